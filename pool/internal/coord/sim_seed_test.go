package coord

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	simSeeds   = flag.Int("sim.seeds", defaultSeeds(), "seeds TestSimulation runs (default $S3LECT_SIM_SEEDS, else 50)")
	simFirst   = flag.Uint64("sim.first", 1, "the first seed TestSimulation runs")
	simWorkers = flag.Int("sim.workers", defaultSim.workers, "workers at the start of each TestSimulation run")
	simShards  = flag.Int("sim.shards", defaultSim.shards, "shards of each TestSimulation run")
	simLate    = ""
	simNo      = map[string]bool{} // -sim.no: fault kinds left out
	simContent = flag.Bool("sim.content-etags", false, "the store's ETags hash the bytes (S3 without versioning): outside the protocol's assumptions")
)

func init() {
	flag.Func("sim.no", "fault kinds to leave out, comma-separated (reterm, putback, restore...): to hunt in small shapes outside section 7's exceptions (thirteenth review)", func(v string) error {
		for _, k := range strings.Split(v, ",") {
			simNo[k] = true
		}
		return nil
	})
	flag.Func("sim.late", "some writes whose key contains this (assign/, workers/, departed) land up to 2 LeaderTimeouts after their send (thirteenth review)", func(v string) error { simLate = v; return nil })
}

func defaultSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("S3LECT_SIM_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 50
}

// TestSimulation runs seeds of the pool under faults and checks that no
// shard has two live leaderships, that terms rise, and that every shard
// is led within the bound after the faults stop.
func TestSimulation(t *testing.T) { runSeeds(t, *simSeeds, false) }

// TestPeerSimulation is TestSimulation in peer mode (simpeer_test.go):
// the workers report to the coordinator, polling workers among them for
// a while (rolling changes of mode), with the peer faults on top. Where
// S3LECT_SIM_SEEDS sets the count (CI's run under the race detector,
// where 20 peer seeds take 4 s on an idle machine and 25 s on a loaded
// one), it runs a quarter of it; CI's full run, without the detector,
// names its count.
func TestPeerSimulation(t *testing.T) {
	n, named := *simSeeds, false
	flag.Visit(func(f *flag.Flag) { named = named || f.Name == "sim.seeds" })
	if os.Getenv("S3LECT_SIM_SEEDS") != "" && !named {
		n = max(1, n/4)
	}
	runSeeds(t, n, true)
}

func runSeeds(t *testing.T, n int, peer bool) {
	var worst time.Duration
	failed := 0
	faults := map[string]int{}
	digest := sha256.New() // of every seed's ledger hash: a change that must not alter any decision keeps it
	for i := range n {
		seed := *simFirst + uint64(i)
		cfg := defaultSim
		cfg.workers, cfg.shards, cfg.maxWorkers, cfg.contentETags, cfg.peer = *simWorkers, *simShards, *simWorkers+3, *simContent, peer
		s := newSim(seed, cfg)
		h := func() string {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("seed %d panicked: %v", seed, r)
				}
			}()
			return s.run()
		}()
		digest.Write([]byte(h))
		if s.ledAt > worst {
			worst = s.ledAt
		}
		for k, n := range s.faults {
			faults[k] += n
		}
		if len(s.fails) > 0 {
			failed++
			if failed <= 1 {
				r := newSim(seed, cfg) // the same history, its ledger kept
				r.keep = true
				if rh := r.run(); rh != h {
					t.Errorf("seed %d replayed to ledger %s; first run %s", seed, rh, h)
				}
				os.Stdout.Write(r.ledger.Bytes())
			}
			t.Errorf("seed %d (ledger %s): %d failures, first: %s", seed, h, len(s.fails), s.fails[0])
			if failed > 5 {
				t.FailNow()
			}
		}
	}
	total := 0
	var kinds []string
	for _, k := range sortedKeys(faults) {
		total += faults[k]
		kinds = append(kinds, fmt.Sprintf("%s %d", k, faults[k]))
	}
	t.Logf("%d seeds from %d: %d failed; every shard led at most %v after the faults stopped (bound %v); faults injected: %d (%s); ledgers' digest %x",
		n, *simFirst, failed, worst, ledBound(), total, strings.Join(kinds, ", "), digest.Sum(nil)[:8])
}

// TestSimulationReplays runs one seed 20 times and expects one ledger
// (3 times where S3LECT_SIM_SEEDS is set: CI's run under the race
// detector; its full run, without it, makes the 20).
func TestSimulationReplays(t *testing.T) { replays(t, defaultSim) }

// TestPeerSimulationReplays is TestSimulationReplays in peer mode.
func TestPeerSimulationReplays(t *testing.T) {
	cfg := defaultSim
	cfg.peer = true
	replays(t, cfg)
}

func replays(t *testing.T, cfg simConfig) {
	const seed = 7
	runs := 20
	if os.Getenv("S3LECT_SIM_SEEDS") != "" {
		runs = 3
	}
	first := ""
	for i := range runs {
		s := newSim(seed, cfg)
		h := s.run()
		if i == 0 {
			first = h
			t.Logf("seed %d: ledger %s, %d events", seed, h, s.steps)
			continue
		}
		if h != first {
			t.Fatalf("run %d of seed %d: ledger %s; want %s", i, seed, h, first)
		}
	}
}

// TestSimulationCalmRestartsAWorkerWhoseLeaveEndsAfterIt: the calm
// restarts every worker that is down, and a worker whose leave was under
// way when the faults stopped (paused, its closing write refused by a
// twin) closes only after the calm began; the harness must start it
// again, or a pool of one is left with no worker and the run fails as if
// the protocol had left the shards unled. Seed 91,122 at 1 worker × 3
// shards draws it (found by the third pool review).
func TestSimulationCalmRestartsAWorkerWhoseLeaveEndsAfterIt(t *testing.T) {
	cfg := defaultSim
	cfg.workers, cfg.shards, cfg.maxWorkers = 1, 3, 4
	s := newSim(91122, cfg)
	h := s.run()
	if len(s.fails) > 0 {
		t.Errorf("seed 91122 at 1 × 3 (ledger %s): %d failures, first: %s", h, len(s.fails), s.fails[0])
	}
}
