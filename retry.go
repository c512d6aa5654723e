package s3lect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/s3lect/s3lect/store"
)

// retrySchedule is the fixed retry policy of every store and peer call
// (docs/protocol.md, section 6): an immediate attempt, a retry 100 ms after
// the first failure and another 1 s after the second, then the election
// logic decides. No jitter: one elector has one call in flight, and the
// protocol's timing arguments count these delays.
func retrySchedule() backoff.BackOff {
	b := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 10, MaxInterval: time.Second,
		Stop: backoff.Stop, Clock: backoff.SystemClock}
	b.Reset()
	return backoff.WithMaxRetries(b, 2)
}

// retryWaits is the sum of retrySchedule's waits between attempts.
const retryWaits = 100*time.Millisecond + time.Second

// final marks err as an answer rather than a failure: retry returns it at
// once. It is the one place where a call's error becomes final; store
// errors that are answers (precondition failed, not found, and what a
// store marks with store.Permanent) are made final by retry itself.
func final(err error) error { return backoff.Permanent(err) }

// isAnswer reports whether a store's error is an answer, not a failure.
func isAnswer(err error) bool {
	return errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) || store.IsPermanent(err)
}

// retry runs op under the retry policy. Each attempt gets its own context
// that ends after timeout (or with ctx). Errors that are answers, not
// failures (precondition failed, not found, permanent), end it at once.
// When ctx ends it returns an error wrapping both ctx's error and the last
// attempt's.
func retry[T any](ctx context.Context, timeout time.Duration, op func(ctx context.Context) (T, error)) (T, error) {
	var last error
	res, err := backoff.RetryWithData(func() (T, error) {
		actx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res, err := op(actx)
		if err == nil {
			return res, nil
		}
		last = err
		if isAnswer(err) {
			return res, final(err)
		}
		return res, err
	}, backoff.WithContext(retrySchedule(), ctx))
	if err != nil && ctx.Err() != nil && last != nil && !errors.Is(err, last) {
		err = fmt.Errorf("%w (last attempt: %w)", err, last)
	}
	return res, err
}
