package chaos

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) != "" {
		os.Exit(runNode()) // this binary is a node process of TestProcessFaults
	}
	goleak.VerifyTestMain(m,
		// toxiproxy's bandwidth toxic leaves its pipe goroutines blocked on
		// a channel send when a link is torn down under it; they are the
		// proxy's, not the elector's.
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"))
}
