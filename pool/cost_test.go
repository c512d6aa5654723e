package pool

import (
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

type callCount struct{ gets, puts uint64 }

// calls sums the store calls of every worker of the group.
func (g *group) calls() callCount {
	var c callCount
	for _, w := range g.workers {
		s := w.p.Stats()
		c.gets += s.Gets
		c.puts += s.Puts
	}
	return c
}
