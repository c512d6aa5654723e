package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/s3lect/s3lect/internal/retry"
	"github.com/s3lect/s3lect/store"
)

// Calls makes one caller's store calls under the retry schedule
// (docs/protocol.md, sections 2 and 6). Its errors carry no prefix and no
// key: the caller wraps them with its own.
type Calls struct {
	Store store.Store
	// Timeout bounds each attempt (the caller's FrequentInterval).
	Timeout time.Duration
	// Clock is the local clock that Put's notAfter is read on.
	Clock *Clock
	// Count, if set, is told of every request sent: op is "get", "put" or
	// "list", err the store's answer.
	Count func(op string, err error)
	// Log, if set, gets a Debug line for each write adopted after a lost
	// reply.
	Log *slog.Logger
}

// ErrNoETag is a read whose object came without an ETag: a store that
// breaks the store.Store contract.
var ErrNoETag = errors.New("the store returned an object without an ETag")

// ErrLate is a write that was not sent because the lease it needs had
// ended: Put's notAfter had come. It is an answer (store.Permanent).
var ErrLate = store.Permanent(errors.New("lease over"))

func (c *Calls) count(op string, err error) {
	if c.Count != nil {
		c.Count(op, err)
	}
}

// Get reads key. An absent object is returned as etag "" and a nil error.
func (c *Calls) Get(ctx context.Context, key string) (data []byte, etag string, err error) {
	type result struct {
		data []byte
		etag string
	}
	r, err := retry.Do(ctx, c.Timeout, func(ctx context.Context, _ int) (result, error) {
		data, etag, err := c.Store.Get(ctx, key)
		c.count("get", err)
		return result{data, etag}, err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	case r.etag == "":
		return nil, "", ErrNoETag
	}
	return r.data, r.etag, nil
}

// GetSighting is Get with the store's sighting token (store.Sighter):
// "" when the store gives none.
func (c *Calls) GetSighting(ctx context.Context, key string) (data []byte, etag, token string, err error) {
	sg, ok := c.Store.(store.Sighter)
	if !ok {
		data, etag, err = c.Get(ctx, key)
		return data, etag, "", err
	}
	type result struct {
		data        []byte
		etag, token string
	}
	r, err := retry.Do(ctx, c.Timeout, func(ctx context.Context, _ int) (result, error) {
		data, etag, token, err := sg.GetSighting(ctx, key)
		c.count("get", err)
		return result{data, etag, token}, err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, "", "", nil
	case err != nil:
		return nil, "", "", err
	case r.etag == "":
		return nil, "", "", ErrNoETag
	}
	return r.data, r.etag, r.token, nil
}

// ErrNoList is List on a store that does not implement store.Lister.
var ErrNoList = fmt.Errorf("%w: the store cannot list keys (it does not implement store.Lister)", errors.ErrUnsupported)

// List returns the objects under prefix with their ETags, by
// store.Lister, under the retry schedule. A listing is a hint, never a
// sighting: it carries no bytes, and may lag behind writes.
func (c *Calls) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	l, ok := c.Store.(store.Lister)
	if !ok {
		return nil, ErrNoList
	}
	return retry.Do(ctx, c.Timeout, func(ctx context.Context, _ int) ([]store.Entry, error) {
		es, err := l.List(ctx, prefix)
		c.count("list", err)
		return es, err
	})
}

// Put writes data to key over the object as over saw it (the zero
// Sighting: create) and returns the new ETag. With a non-zero notAfter, no
// attempt is sent once the local clock reaches it (ErrLate).
//
// Every retry first reads key (docs/protocol.md, section 2): if it holds
// exactly data, an earlier attempt landed and is adopted; if it no longer
// shows over (another ETag, the same ETag over other bytes from a store
// that handed it out again, an object where over saw none, or none where
// over saw one), the write is refused as a lost precondition instead of
// overwriting someone else's record. A round's first attempt reads
// nothing, so a healthy write is one PUT.
//
// If an attempt failed with its outcome unknown (a timeout, a lost reply)
// and a later one finds the precondition failed, the earlier attempt may
// have landed: Put reads key once more and, if it holds exactly data,
// returns its ETag as the write's. No other writer produces our bytes:
// every record carries a random value (NewID) or a stamp no other write
// has. unsure reports, on failure, that an attempt may have landed.
func (c *Calls) Put(ctx context.Context, key string, data []byte, over Sighting, notAfter time.Time) (etag string, unsure bool, err error) {
	etag, err = retry.Do(ctx, c.Timeout, func(ctx context.Context, n int) (string, error) {
		if !notAfter.IsZero() && !c.Clock.Now().Before(notAfter) {
			return "", retry.Final(fmt.Errorf("%w: the lease ended before the write was sent", ErrLate))
		}
		if n > 0 {
			got, gotTag, err := c.Store.Get(ctx, key)
			c.count("get", err)
			switch {
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return "", err
			case err == nil && bytes.Equal(got, data):
				return gotTag, nil // an earlier attempt landed
			case err != nil && over.ETag != "",
				err == nil && Sight(got, gotTag) != over:
				return "", store.ErrPreconditionFailed
			}
		}
		tag, err := c.Store.PutIfMatch(ctx, key, data, over.ETag)
		c.count("put", err)
		if err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
			unsure = true
		}
		return tag, err
	})
	if err == nil {
		return etag, false, nil
	}
	if errors.Is(err, store.ErrPreconditionFailed) && unsure {
		if got, gotTag, gerr := c.Get(ctx, key); gerr == nil && bytes.Equal(got, data) {
			if c.Log != nil {
				c.Log.Debug("adopted own write whose reply was lost", "key", key, "etag", gotTag)
			}
			return gotTag, false, nil
		}
	}
	return "", unsure, err
}
