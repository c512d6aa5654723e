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
// pool led its first shard 7.7 leases in and spread after 10 to 12
// (mutation joinrush). A worker that leads nothing now waits for the list
// to stop growing, reading only the members it never read (assembling);
// the pool spreads within 8 leases (3.2 to 5.25 in 31 runs).
func TestColdStartOnABusyStore(t *testing.T) {
	defer setMutation(t)()
	const workers, shards = 100, 1000
	synctest.Test(t, func(t *testing.T) {
		g, busy := busyPool(t, workers, shards)
		defer g.stop()
		lt, start := testLT/2, time.Now()
		var joined, first time.Duration // when the member list named every worker; when a shard was first led
		for !within(g.counts(), g.ids(nil), shards/workers, shards/workers, shards) {
			if joined == 0 {
				if data, tag, err := g.mem.Get(context.Background(), "pool/members.json"); err == nil && tag != "" {
					if m, err := parseMembers(data); err == nil && len(m.Workers) == workers {
						joined = time.Since(start)
					}
				}
			}
			if first == 0 && len(g.counts()) > 0 {
				for _, n := range g.counts() {
					if n > 0 {
						first = time.Since(start)
					}
				}
			}
			if time.Since(start) > 8*lt {
				led := 0
				for _, n := range g.counts() {
					led += n
				}
				t.Fatalf("8 × LeaderTimeout after a cold start: %d of %d shards led (%s); want %d on each worker", led, shards, spread(g.counts()), shards/workers)
			}
			time.Sleep(lt / 20)
		}
		took := time.Since(start)
		x := func(d time.Duration) float64 { return float64(d) / float64(lt) }
		var gets, looks uint64
		for _, w := range g.workers {
			st := w.p.Stats()
			gets, looks = gets+st.Gets, looks+st.Looks
		}
		t.Logf("every worker on the member list %.2f × LeaderTimeout after the start, the first shard led at %.2f, spread at %.2f; the store served %.0f calls a second; each worker made %.1f GETs (%.1f × the number of workers) and %.1f looks", x(joined), x(first), x(took), float64(busy.served.Load())/took.Seconds(),
			float64(gets)/workers, float64(gets)/workers/workers, float64(looks)/workers)
	})
}

// busyPool starts workers (w000, w001...) over shards, at half the
// default intervals, on one busyStore serving 2,000 calls a second.
func busyPool(t *testing.T, workers, shards int) (*group, *busyStore) {
	g := newGroupAt(t, 0, shards, 2)
	busy := &busyStore{slots: make(chan struct{}, 4), service: 2 * time.Millisecond}
	g.wrap = func(_ string, st store.Store) store.Store { return busyClient{st, busy} }
	for i := range workers {
		g.add(fmt.Sprintf("w%03d", i))
	}
	return g, busy
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

// TestCrashOnABusyStore: of 100 workers settled over 1,000 shards on the
// store of TestColdStartOnABusyStore, one is killed (every call fails at
// once, no goodbye): the one with the lowest ID (it prunes the member
// list), one in the middle and the last, each at its own point of its
// renewal cycle. Its shards must
// be led again within 1.5 × LeaderTimeout of the kill. When all 99
// survivors looked at the death together, 100 reads each, the store
// stayed saturated and that took 2.4 to 3 leases (mutation eagerlooks);
// now only the survivors below their share look at once.
func TestCrashOnABusyStore(t *testing.T) {
	defer setMutation(t)()
	const workers, shards = 100, 1000
	for _, tc := range []struct {
		victim, phase int
	}{{0, 0}, {37, 3}, {99, 6}} {
		t.Run(fmt.Sprintf("victim=%d/phase=%d", tc.victim, tc.phase), func(t *testing.T) {
			phase := tc.phase
			synctest.Test(t, func(t *testing.T) {
				g, _ := busyPool(t, workers, shards)
				defer g.stop()
				lt := testLT / 2
				time.Sleep(8*lt + time.Duration(phase)*testFI/2/8)
				victim := g.workers[tc.victim]
				mine := victim.p.Leading()
				if len(mine) != shards/workers {
					t.Fatalf("8 × LeaderTimeout after the start: %s leads %d shards; want %d", victim.id, len(mine), shards/workers)
				}
				victim.st.dead.Store(true)
				start := time.Now()
				for g.ledBy(mine, victim.id) < len(mine) {
					if time.Since(start) > 3*lt/2 {
						t.Fatalf("1.5 × LeaderTimeout after %s was killed, %d of its %d shards are led again; want all", victim.id, g.ledBy(mine, victim.id), len(mine))
					}
					time.Sleep(lt / 100)
				}
				t.Logf("its shards led again %.2f × LeaderTimeout after the kill", float64(time.Since(start))/float64(lt))
			})
		})
	}
}
