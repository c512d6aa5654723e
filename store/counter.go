package store

import (
	"context"
	"errors"
	"sync/atomic"
)

// Counter wraps a Store and counts its calls, for metrics and cost
// accounting. Wrap one store per elector to count per elector. It is safe
// for concurrent use.
type Counter struct {
	store                                     Store
	gets, puts, conflicts, notFound, failures atomic.Int64
}

// Counts is a snapshot of a Counter.
type Counts struct {
	Gets               int64 // Get calls, whatever their outcome
	Puts               int64 // PutIfMatch calls, whatever their outcome
	PreconditionFailed int64 // PutIfMatch calls answered ErrPreconditionFailed
	NotFound           int64 // Get calls answered ErrNotFound
	Failures           int64 // calls that failed otherwise
}

// NewCounter returns a Counter that passes every call to s.
func NewCounter(s Store) *Counter { return &Counter{store: s} }

// Counts returns the counts so far.
func (c *Counter) Counts() Counts {
	return Counts{
		Gets:               c.gets.Load(),
		Puts:               c.puts.Load(),
		PreconditionFailed: c.conflicts.Load(),
		NotFound:           c.notFound.Load(),
		Failures:           c.failures.Load(),
	}
}

// Get implements Store.
func (c *Counter) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.gets.Add(1)
	data, etag, err := c.store.Get(ctx, key)
	c.tally(err)
	return data, etag, err
}

// PutIfMatch implements Store.
func (c *Counter) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	c.puts.Add(1)
	tag, err := c.store.PutIfMatch(ctx, key, data, etag)
	c.tally(err)
	return tag, err
}

func (c *Counter) tally(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrPreconditionFailed):
		c.conflicts.Add(1)
	case errors.Is(err, ErrNotFound):
		c.notFound.Add(1)
	default:
		c.failures.Add(1)
	}
}
