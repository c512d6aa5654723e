package chaos

import (
	"os"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(fenceNodeEnv) != "" {
		os.Exit(runFenceNode()) // this binary is a node process of TestFencedWritesUnderFaults
	}
	if os.Getenv(poolWorkerEnv) != "" {
		os.Exit(runPoolWorker()) // this binary is a pool worker process of TestPoolProcesses
	}
	if os.Getenv(nodeEnv) != "" {
		os.Exit(runNode()) // this binary is a node process of TestProcessFaults
	}
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxiproxy's toxics log through the global logger
	goleak.VerifyTestMain(m,
		// toxiproxy leaves a toxic's pipe goroutine blocked on a channel
		// send when a link is torn down under it (seen with its bandwidth
		// and no-op toxics). Every toxic pipe runs under ToxicStub.Run:
		// these goroutines are the proxy's, never the elector's.
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}
