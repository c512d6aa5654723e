package pool

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// stuckLister is a store whose listings, once stuck, go on showing the
// ETags of the moment they stuck: a listing that lags behind the writes.
type stuckLister struct {
	store.Store
	mu    sync.Mutex
	stuck []store.Entry // nil: not stuck
}

func (s *stuckLister) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stuck != nil {
		return s.stuck, nil
	}
	return s.Store.(store.Lister).List(ctx, prefix)
}

func (s *stuckLister) stick(t *testing.T, prefix string) {
	entries, err := s.Store.(store.Lister).List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck = entries
}

// TestStaleListingNeverTakesOver: w1's listings stick at one moment while
// w2 lives on and renews its session: to w1, w2's listed ETag stands
// unchanged for leases on end. A listing is a hint: w1 looks, and its
// fresh read of w2's session returns another ETag, which counts from that
// read; w1 takes nothing of w2's. With -sim.mutate=stalelist (a sighting
// counts from its first listing whatever the fresh read returns) w1 takes
// w2's shards while w2 leads them.
func TestStaleListingNeverTakesOver(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		var stale *stuckLister
		g := newGroup(t, 0, 20)
		g.wrap = func(id string, st store.Store) store.Store {
			if id != "w1" {
				return st
			}
			stale = &stuckLister{Store: st}
			return stale
		}
		g.add("w1")
		g.add("w2")
		defer g.stop()
		time.Sleep(3 * testLT)
		if c := g.counts(); !within(c, []string{"w1", "w2"}, 10, 10, 20) {
			t.Fatalf("after 3 × LeaderTimeout: %s; want 10 each", spread(c))
		}
		stale.stick(t, "pool/sessions/")
		time.Sleep(4 * testLT)
		if c := g.counts(); !within(c, []string{"w1", "w2"}, 10, 10, 20) {
			t.Errorf("4 × LeaderTimeout after w1's listings stuck: %s; want 10 each (w2 lives on)", spread(c))
		}
		g.check(t)
	})
}
