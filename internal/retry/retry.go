// Package retry holds the project's fixed retry policy for store and peer
// calls (docs/protocol.md, section 6), the one copy that the elector, the
// pool and package fence share: an immediate attempt, a retry 100 ms after
// the first failure and another 1 s after the second, then the caller
// decides. No jitter: one caller has one call in flight, and the
// protocol's timing arguments count these delays.
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/s3lect/s3lect/store"
)

// Schedule returns a fresh schedule: NextBackOff yields 100 ms, then 1 s,
// then backoff.Stop.
func Schedule() backoff.BackOff {
	b := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 10, MaxInterval: time.Second,
		Stop: backoff.Stop, Clock: backoff.SystemClock}
	b.Reset()
	return backoff.WithMaxRetries(b, 2)
}

// Waits is the sum of Schedule's waits between attempts.
const Waits = 100*time.Millisecond + time.Second

// Final marks err as an answer rather than a failure: Do returns it at
// once, unwrapped. Store errors that are answers (IsAnswer) are made final
// by Do itself.
func Final(err error) error { return backoff.Permanent(err) }

// IsAnswer reports whether a store's error is an answer, not a failure:
// precondition failed, not found, or what a store marks with
// store.Permanent. Retrying it would get the same answer.
func IsAnswer(err error) bool {
	return errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) || store.IsPermanent(err)
}

// Do runs op under the schedule. Each attempt gets its own context that
// ends after timeout (or with ctx), and its number n, from 0. An error that
// is an answer (IsAnswer, or marked with Final) ends it at once. When ctx
// ends it returns an error that matches both ctx's error and the last
// attempt's.
func Do[T any](ctx context.Context, timeout time.Duration, op func(ctx context.Context, n int) (T, error)) (T, error) {
	var last error
	n := 0
	res, err := backoff.RetryWithData(func() (T, error) {
		if err := ctx.Err(); err != nil {
			// Asked, not only watched: a Leadership's context reports its
			// end from the clock before its Done closes (a host suspend
			// holds its timer back), and nothing is sent after it.
			var zero T
			return zero, Final(err)
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res, err := op(actx, n)
		n++
		if err == nil {
			return res, nil
		}
		last = err
		if IsAnswer(err) {
			return res, Final(err)
		}
		return res, err
	}, backoff.WithContext(Schedule(), ctx))
	if err != nil && ctx.Err() != nil && last != nil && !errors.Is(err, last) {
		err = fmt.Errorf("%w (last attempt: %w)", err, last)
	}
	return res, err
}
