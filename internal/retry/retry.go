// Package retry holds the project's fixed retry schedule for store calls,
// shared by the packages that call a store outside the elector (the
// elector's own copy is in the root's retry.go): an immediate attempt, a
// retry 100 ms after the first failure and another 1 s after the second,
// then the caller gives up. No jitter: one caller has one call in flight.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Schedule returns a fresh schedule: NextBackOff yields 100 ms, then 1 s,
// then backoff.Stop.
func Schedule() backoff.BackOff {
	b := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 10, MaxInterval: time.Second,
		Stop: backoff.Stop, Clock: backoff.SystemClock}
	b.Reset()
	return backoff.WithMaxRetries(b, 2)
}
