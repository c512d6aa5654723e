package pool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/store"
)

// retryDelays is the retry policy of every store call, the same as an
// elector's: an attempt, a retry 100 ms after the first failure, another
// 1 s after the second.
var retryDelays = [...]time.Duration{100 * time.Millisecond, time.Second}

// answer reports whether err is an answer rather than a failure: retrying
// it would get the same answer.
func answer(err error) bool {
	return errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) || store.IsPermanent(err)
}

// attempts runs op under the retry policy, each attempt with its own
// timeout of FrequentInterval. It stops at an answer, at success, or when
// ctx ends.
func (p *Pool) attempts(ctx context.Context, op func(ctx context.Context, n int) error) error {
	var err error
	for n := 0; ; n++ {
		actx, cancel := context.WithTimeout(ctx, p.fi)
		err = op(actx, n)
		cancel()
		if err == nil || answer(err) || n == len(retryDelays) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(retryDelays[n])
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
	}
}

// get reads key; an absent object is etag "" and no error.
func (p *Pool) get(ctx context.Context, key string) (data []byte, etag string, err error) {
	err = p.attempts(ctx, func(ctx context.Context, _ int) error {
		data, etag, err = p.cfg.Store.Get(ctx, key)
		p.stats.call("get", err)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("pool: read %q: %w", key, err)
	case etag == "":
		return nil, "", fmt.Errorf("pool: read %q: the store returned an object without an ETag", key)
	}
	return data, etag, nil
}

// put writes data over the object key holds, named by etag ("" to
// create), with the election's retry rules (docs/protocol.md, section 2):
// a retry reads first, adopts the object when it holds exactly data (an
// earlier attempt landed), and is refused as a lost precondition when etag
// now names other bytes than over. With a non-zero notAfter, no attempt is
// sent once the local clock reaches it.
func (p *Pool) put(ctx context.Context, key string, data []byte, etag string, over [32]byte, notAfter time.Time) (string, error) {
	var tag string
	unsure := false
	err := p.attempts(ctx, func(ctx context.Context, n int) error {
		if !notAfter.IsZero() && !p.now().Before(notAfter) {
			return fmt.Errorf("%w: the lease ended before the write was sent", errLate)
		}
		if n > 0 {
			got, gotTag, err := p.cfg.Store.Get(ctx, key)
			p.stats.call("get", err)
			switch {
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return err
			case err == nil && bytes.Equal(got, data):
				tag = gotTag
				return nil
			case etag == "" && err == nil,
				etag != "" && (err != nil || gotTag != etag || sha256.Sum256(got) != over):
				return store.ErrPreconditionFailed
			}
		}
		var err error
		tag, err = p.cfg.Store.PutIfMatch(ctx, key, data, etag)
		p.stats.call("put", err)
		if err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
			unsure = true
		}
		return err
	})
	if err == nil {
		return tag, nil
	}
	if errors.Is(err, store.ErrPreconditionFailed) && unsure {
		if got, gotTag, gerr := p.get(ctx, key); gerr == nil && bytes.Equal(got, data) {
			return gotTag, nil
		}
	}
	return "", fmt.Errorf("pool: write %q: %w", key, err)
}

// errLate is a write not sent because the lease it needs had ended.
var errLate = store.Permanent(errors.New("lease over"))
