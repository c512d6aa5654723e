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

// replayPins are seeds whose history once hung on the Go scheduler, run
// by TestSafetySimulationReplays beside the flags' seed. Each diverged
// often under its bug: peer 103 in nearly every run (the peer poller
// reported an answer or took a new target by select's choice), restorer
// 16614 in about one run of six (the mid-takeover hook read whether its
// node led yet outside the gate). Under the race detector they run
// racePinReplays times, not -sim.replays: 20 would add about 6 s of CPU
// there, and CI's run without it replays them 20 times.
var replayPins = map[string][]int64{
	"peer":     {103},
	"restorer": {16614},
}

const racePinReplays = 4

// TestSafetySimulationReplays: a seed of the safety simulation replays
// exactly. Each variant's seed runs -sim.replays times (20) and every run
// must give the same ledger hash: the same leaderships, at the same
// virtual nanoseconds, with the same counters. The seed is -sim.seed, else
// -sim.first (0), and the variant's replayPins.
func TestSafetySimulationReplays(t *testing.T) {
	from, _ := simworld.SeedRange() // the first seed the flags name: this test replays, it does not explore
	for _, v := range append(slices.Clone(simVariants), simAnnounceVariants...) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			for i, seed := range append([]int64{from}, replayPins[v.name]...) {
				runs := *simReplays
				if i > 0 && raceOn {
					runs = min(runs, racePinReplays)
				}
				var first string
				for run := range runs {
					var hash string
					synctest.Test(t, func(t *testing.T) { _, hash = simulateSeed(t, seed, v) })
					if run == 0 {
						first = hash
					} else if hash != first {
						t.Fatalf("seed %d, run %d: ledger %s; run 0 gave %s (replay with -run 'TestSafetySimulation/%s' -sim.seed=%d -v)",
							seed, run, hash, first, v.name, seed)
					}
				}
				t.Logf("seed %d: %d runs, one ledger %s", seed, runs, first)
			}
		})
	}
}
