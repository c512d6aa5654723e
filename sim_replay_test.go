package s3lect

import (
	"flag"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/s3lect/s3lect/internal/simworld"
)

var (
	simReplays = flag.Int("sim.replays", 20, "TestSafetySimulationReplays: how many times the seed is run")
	simHashes  = flag.Bool("sim.hashes", false, "TestSafetySimulation: log each seed's ledger hash (with -v)")
)

// TestSafetySimulationReplays: a seed of the safety simulation replays
// exactly. Each variant's seed runs -sim.replays times (20) and every run
// must give the same ledger hash: the same leaderships, at the same
// virtual nanoseconds, with the same counters. The seed is -sim.seed, else
// -sim.first (0).
func TestSafetySimulationReplays(t *testing.T) {
	from, _ := simworld.SeedRange()
	n := int64(1) // the first seed the flags name: this test replays, it does not explore
	for _, v := range append(slices.Clone(simVariants), simAnnounceVariants...) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			for seed := from; seed < from+n; seed++ {
				var first string
				for run := range *simReplays {
					var hash string
					synctest.Test(t, func(t *testing.T) { _, hash = simulateSeed(t, seed, v) })
					if run == 0 {
						first = hash
					} else if hash != first {
						t.Fatalf("seed %d, run %d: ledger %s; run 0 gave %s (replay with -run 'TestSafetySimulation/%s' -sim.seed=%d -v)",
							seed, run, hash, first, v.name, seed)
					}
				}
				t.Logf("seed %d: %d runs, one ledger %s", seed, *simReplays, first)
			}
		})
	}
}
