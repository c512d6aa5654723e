package pool

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// TestColdStartOnABusyStore: 100 workers start together over 1,000
// shards (intervals halved, as examples/report runs them on MinIO) on a
// store that serves at most 2,000 calls a second, about what MinIO
// served on the project's two cores. The workers join the member list
// one write at a time. While they did, every worker already listed
// claimed, and every join set off a look at every member's session
// object: the store stayed saturated, each join took seconds, and the
// pool led its first shard 7.7 leases in (10 to 12 under the mutation
// joinrush). A worker that leads nothing now waits for the list to stop
// growing, reading only the members it never read (assembling); the
// pool spreads within 6 leases.
func TestColdStartOnABusyStore(t *testing.T) {
	defer setMutation(t)()
	const workers, shards = 100, 1000
	synctest.Test(t, func(t *testing.T) {
		g := newGroupAt(t, 0, shards, 2)
		busy := &busyStore{slots: make(chan struct{}, 4), service: 2 * time.Millisecond}
		g.wrap = func(_ string, st store.Store) store.Store { return busyClient{st, busy} }
		for i := range workers {
			g.add(fmt.Sprintf("w%03d", i))
		}
		defer g.stop()
		lt, start := testLT/2, time.Now()
		for !within(g.counts(), g.ids(nil), shards/workers, shards/workers, shards) {
			if time.Since(start) > 6*lt {
				led := 0
				for _, n := range g.counts() {
					led += n
				}
				t.Fatalf("6 × LeaderTimeout after a cold start: %d of %d shards led (%s); want %d on each worker", led, shards, spread(g.counts()), shards/workers)
			}
			time.Sleep(lt / 20)
		}
		took := time.Since(start)
		t.Logf("spread %.2f × LeaderTimeout after the start; the store served %.0f calls a second", float64(took)/float64(lt), float64(busy.served.Load())/took.Seconds())
	})
}

// busyStore is a store's capacity: slots calls at a time, each served in
// service.
type busyStore struct {
	slots   chan struct{}
	service time.Duration
	served  atomic.Int64
}

func (b *busyStore) serve() {
	b.slots <- struct{}{}
	time.Sleep(b.service)
	b.served.Add(1)
	<-b.slots
}

// busyClient is one worker's client of a busyStore: every call waits a
// millisecond on the wire, then for a slot; a listing takes two.
type busyClient struct {
	store.Store
	b *busyStore
}

func (c busyClient) Get(ctx context.Context, k string) ([]byte, string, error) {
	time.Sleep(time.Millisecond)
	c.b.serve()
	return c.Store.Get(ctx, k)
}

func (c busyClient) PutIfMatch(ctx context.Context, k string, data []byte, etag string) (string, error) {
	time.Sleep(time.Millisecond)
	c.b.serve()
	return c.Store.PutIfMatch(ctx, k, data, etag)
}

func (c busyClient) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	time.Sleep(time.Millisecond)
	c.b.serve()
	c.b.serve()
	return c.Store.(store.Lister).List(ctx, prefix)
}
