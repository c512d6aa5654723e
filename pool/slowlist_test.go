package pool

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// TestSlowListingsDoNotLook: on a store whose listings take longer than a
// quarter interval (here 0.35 of one, as 100 keys on a MinIO sharing two
// cores with 100 workers did), a settled pool still watches by listing.
// A tick waits for its listing as long as listings have been taking
// (listWait), where one that waited a fixed quarter interval looked at
// every tick: a read of every member's session object, each interval.
func TestSlowListingsDoNotLook(t *testing.T) {
	defer setMutation(t)()
	const workers, shards, intervals = 10, 100, 40
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 0, shards)
		g.wrap = func(_ string, st store.Store) store.Store { return slowList{st, 35 * testFI / 100} }
		for i := range workers {
			g.add(fmt.Sprintf("w%d", i+1))
		}
		defer g.stop()
		g.settle(t)
		looks := map[string]uint64{}
		for _, wk := range g.workers {
			looks[wk.id] = wk.p.Stats().Looks
		}
		before := g.calls()
		time.Sleep(intervals * testFI)
		after := g.calls()
		reads := float64(after.gets+after.lists-before.gets-before.lists) / intervals / workers
		t.Logf("per worker per FrequentInterval: %.2f reads", reads)
		for _, wk := range g.workers {
			if d := wk.p.Stats().Looks - looks[wk.id]; d > 0 {
				t.Errorf("%s looked %d times in %d intervals of a settled pool whose listings take 0.35 of an interval; want 0", wk.id, d, intervals)
			}
		}
	})
}

// slowList is a store whose listings take d (or until their context
// ends, as a real store's request does).
type slowList struct {
	store.Store
	d time.Duration
}

func (s slowList) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(s.d):
	}
	return s.Store.(store.Lister).List(ctx, prefix)
}
