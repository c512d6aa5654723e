package pool

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestSteadyStateCostIsOneWritePerWorker checks the multiplexed lease's
// price (docs/protocol.md, section 10): once 1,000 shards are spread over
// 10 workers, the pool writes one session renewal per worker per
// FrequentInterval, whatever the number of shards, in every window of
// several intervals. The same figure, measured on a real store with real
// timers, is the shard table of examples/report.
func TestSteadyStateCostIsOneWritePerWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 10, 1000)
		defer g.stop()
		time.Sleep(4*testLT + testFI/3) // spread and settled; windows off the renewals' phase
		if c := g.counts(); !within(c, g.ids(nil), 100, 100, 1000) {
			t.Fatalf("after 4 × LeaderTimeout: %s; want 100 shards on each worker", spread(c))
		}
		const intervals = 40
		for window := range 3 {
			before := g.calls()
			time.Sleep(intervals * testFI)
			after := g.calls()
			puts := after.puts - before.puts
			gets := after.gets - before.gets
			t.Logf("window %d: %.2f PUT and %.2f GET per FrequentInterval", window,
				float64(puts)/intervals, float64(gets)/intervals)
			// A window's edges cut at most one renewal of each worker in or
			// out: within ±1/40 of 10 per interval, under the 1.05 × target.
			if lo, hi := uint64(10*(intervals-1)), uint64(10*(intervals+1)); puts < lo || puts > hi {
				t.Errorf("window %d: %d PUTs over %d intervals for 10 workers; want 10 per interval (%d to %d), never one per shard",
					window, puts, intervals, lo, hi)
			}
		}
		g.check(t)
	})
}

type callCount struct{ gets, puts, lists uint64 }

// calls sums the store calls of every worker of the group.
func (g *group) calls() callCount {
	var c callCount
	for _, w := range g.workers {
		s := w.p.Stats()
		c.gets += s.Gets
		c.puts += s.Puts
		c.lists += s.Lists
	}
	return c
}

// TestSteadyStateReadsPerWorker checks the watch's price (docs/pool-protocol.md,
// "Cost"): once the shards are spread, each worker makes at most one PUT
// and two reads (a listing of the session objects and a read of the member
// list) per FrequentInterval, whatever the number of workers, on a store
// that lists. On one that does not, each reads the member list and every
// other member's session object: W reads per worker per interval. With
// -sim.mutate=nolist (every tick reads every member's session) the first
// case fails. Config.ReadEachSession makes a worker on a store that lists
// read as on one that does not.
func TestSteadyStateReadsPerWorker(t *testing.T) {
	defer setMutation(t)()
	for _, tc := range []struct {
		workers, shards  int
		noList, readEach bool
	}{{10, 1000, false, false}, {30, 300, false, false}, {100, 1000, false, false}, {10, 1000, true, false}, {10, 1000, false, true}} {
		name := fmt.Sprintf("workers=%d/shards=%d", tc.workers, tc.shards)
		if tc.noList {
			name += "/nolister"
		}
		if tc.readEach {
			name += "/readeachsession"
		}
		t.Run(name, func(t *testing.T) { steadyStateReads(t, tc.workers, tc.shards, tc.noList, tc.readEach) })
	}
}

// TestHundredWorkersOverTenThousandShards is issue 28's largest pool in
// virtual time: 100 workers start together over 10,000 shards, each holds
// 100 within 6 × LeaderTimeout, and then makes one PUT and two reads per
// FrequentInterval. CI runs it beside the simulations (about 16 s without
// the race detector).
func TestHundredWorkersOverTenThousandShards(t *testing.T) {
	steadyStateReads(t, 100, 10000, false, false)
}

// steadyStateReads starts workers over shards, checks the spread after 6 ×
// LeaderTimeout and then the requests per worker per FrequentInterval.
func steadyStateReads(t *testing.T, workers, shards int, noList, readEach bool) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 0, shards)
		g.noList, g.readAll = noList, readEach
		for i := range workers {
			g.add(fmt.Sprintf("w%d", i+1))
		}
		defer g.stop()
		g.settle(t)
		w := len(g.workers)
		const intervals = 40
		before := g.calls()
		looks := map[string]uint64{}
		for _, wk := range g.workers {
			looks[wk.id] = wk.p.Stats().Looks
		}
		time.Sleep(intervals * testFI)
		after := g.calls()
		if !noList && !readEach {
			// Settled, on a store that lists: nothing changes, so no worker
			// looks (reads the session objects).
			for _, wk := range g.workers {
				if d := wk.p.Stats().Looks - looks[wk.id]; d > 0 {
					t.Errorf("%s looked %d times in %d intervals of a settled pool; want 0", wk.id, d, intervals)
				}
			}
		}
		puts := after.puts - before.puts
		reads := after.gets + after.lists - before.gets - before.lists
		perPut := float64(puts) / intervals / float64(w)
		perRead := float64(reads) / intervals / float64(w)
		t.Logf("per worker per FrequentInterval: %.2f PUT, %.2f reads (%d GET, %d LIST in all)", perPut, perRead,
			after.gets-before.gets, after.lists-before.lists)
		// A window's edges cut at most one renewal and one tick of each
		// worker in or out.
		if limit := uint64(w * (intervals + 1)); puts > limit {
			t.Errorf("%d PUTs over %d intervals for %d workers; want at most one per worker per interval (%d)", puts, intervals, w, limit)
		}
		readsPerTick := 2
		if noList || readEach {
			readsPerTick = w // the member list and every other member's session
			if after.lists != before.lists {
				t.Errorf("%d LISTs; want none", after.lists-before.lists)
			}
		}
		if limit := uint64(readsPerTick * w * (intervals + 1)); reads > limit {
			t.Errorf("%d reads over %d intervals for %d workers; want at most %d per worker per interval (%d)", reads, intervals, w, readsPerTick, limit)
		}
		g.check(t)
	})
}
