package s3lect

import (
	"bytes"
	"context"
	"crypto/sha256"
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

// opError is a store call's failure: the operation and the lockfile, then
// the store's error. It carries the s3lect: prefix, once.
type opError struct {
	op, key string
	err     error
}

func (e *opError) Error() string { return fmt.Sprintf("s3lect: %s %q: %v", e.op, e.key, e.err) }
func (e *opError) Unwrap() error { return e.err }

// get reads the object key (the lockfile or its term object) under the
// retry policy. An absent object is returned as etag "" and a nil error.
func (e *Elector) get(ctx context.Context, key string) (data []byte, etag string, err error) {
	type result struct {
		data []byte
		etag string
	}
	r, err := retry(ctx, e.cfg.FrequentInterval, func(ctx context.Context) (result, error) {
		data, etag, err := e.cfg.Store.Get(ctx, key)
		e.stats.storeCall("get", err)
		return result{data, etag}, err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", &opError{"read", key, err}
	}
	if r.etag == "" {
		return nil, "", &opError{"read", key, errors.New("the store returned an object without an ETag")}
	}
	return r.data, r.etag, nil
}

// put writes data to key over etag ("" to create) under the retry policy. With a
// non-zero notAfter, no attempt is sent once the local clock reaches it.
//
// If an attempt fails with its outcome unknown (a timeout, a lost reply)
// and a later one finds the precondition failed, the earlier attempt may
// have landed: put reads the lockfile back and, if it holds exactly data,
// returns its ETag as the write's. No other writer produces our bytes:
// every record carries a lease value and a stamp no other write has.
// unsure reports, on failure, that an attempt may have landed.
//
// over, when set, is the SHA-256 of the content etag names. Before a retry
// the lockfile is read: if etag now names other content (a store that
// rewound and handed the ETag out again), the write is refused as a lost
// precondition instead of overwriting someone else's record; if it holds
// exactly data, an earlier attempt landed and is adopted.
func (e *Elector) put(ctx context.Context, key string, data []byte, etag string, over *[32]byte, notAfter time.Time) (tag string, unsure bool, err error) {
	attempt := 0
	tag, err = retry(ctx, e.cfg.FrequentInterval, func(ctx context.Context) (string, error) {
		if !notAfter.IsZero() && !e.now().Before(notAfter) {
			return "", final(context.DeadlineExceeded)
		}
		if attempt++; attempt > 1 && over != nil && etag != "" {
			got, gotTag, err := e.cfg.Store.Get(ctx, key)
			e.stats.storeCall("get", err)
			switch {
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return "", err
			case err == nil && bytes.Equal(got, data):
				return gotTag, nil // an earlier attempt landed
			case err != nil || gotTag != etag || sha256.Sum256(got) != *over:
				return "", store.ErrPreconditionFailed
			}
		}
		tag, err := e.cfg.Store.PutIfMatch(ctx, key, data, etag)
		e.stats.storeCall("put", err)
		if err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
			unsure = true
		}
		return tag, err
	})
	if err == nil {
		return tag, false, nil
	}
	if errors.Is(err, store.ErrPreconditionFailed) && unsure {
		got, gotTag, gerr := e.get(ctx, key)
		if gerr == nil && bytes.Equal(got, data) {
			e.log.Debug("adopted own write whose reply was lost", "etag", gotTag)
			return gotTag, false, nil
		}
	}
	return "", unsure, &opError{"write", key, err}
}
