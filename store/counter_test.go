package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/storetest"
)

func TestCounterConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewCounter(memstore.New()) })
}

func TestCounterCounts(t *testing.T) {
	ctx := t.Context()
	c := store.NewCounter(memstore.New())
	c.Get(ctx, "k")                                   // not found
	tag, _ := c.PutIfMatch(ctx, "k", []byte("1"), "") // ok
	c.PutIfMatch(ctx, "k", []byte("2"), "")           // precondition failed
	c.Get(ctx, "k")                                   // ok
	c.PutIfMatch(ctx, "k", []byte("3"), tag)          // ok
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.Get(cancelled, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get(cancelled) = %v", err)
	}
	want := store.Counts{Gets: 3, Puts: 3, PreconditionFailed: 1, NotFound: 1, Failures: 1}
	if got := c.Counts(); got != want {
		t.Errorf("Counts() = %+v; want %+v", got, want)
	}
}
