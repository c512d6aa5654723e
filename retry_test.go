package s3lect

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// TestRetrySchedule: docs/protocol.md, 6: an attempt, a retry 100 ms after
// the first failure, another 1 s after the second, then the election
// decides.
func TestRetrySchedule(t *testing.T) {
	b := retrySchedule()
	for round := range 2 { // and again after a Reset, as every call starts
		var got []time.Duration
		for d := b.NextBackOff(); d != backoff.Stop; d = b.NextBackOff() {
			got = append(got, d)
			if len(got) > 5 {
				break
			}
		}
		if len(got) != 2 || got[0] != 100*time.Millisecond || got[1] != time.Second {
			t.Fatalf("round %d: retry delays %v; want [100ms 1s]", round, got)
		}
		b.Reset()
	}
}
