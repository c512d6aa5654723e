// Package simworld is the faulty world that the randomized safety
// simulations of package s3lect (TestSafetySimulation) and package fence
// (TestFenceSimulation) run their nodes in, in testing/synctest bubbles:
// one copy of what both need.
//
//   - Store: one node incarnation's view of the shared store, with the
//     seed's random faults (errors, lost replies, stalled connections,
//     latency and spikes past the lease, writes that land after their
//     caller gave up, listings that lag), partitions (also right after a
//     write lands), crashes and pauses; World is what a seed's stores
//     share, History the last writes of each key for an operator who
//     restores older versions, Rewind a store that loses acknowledged
//     writes.
//   - PeerNet: an in-memory network between peer-mode nodes that refuses,
//     stalls, delays and answers late or stale.
//   - Ledger: every leadership as the checker sees it, and the overlap
//     check; Schedule: the seed's timed events; Tally: what a seed did.
//   - Gate and Sched: two ways to make a bubble's history a function of
//     its seed. Gate runs the calls that reach the shared store at one
//     instant in the order of their names (the root simulation, which
//     hashes its ledger with Hash); Sched grants every step of a
//     simulation in an order drawn from the seed and hashes the steps
//     (the fence simulations).
//   - The draws both worlds make the same way (DrawTiming, ClockRate), and
//     the flags: -sim.seeds, -sim.first, -sim.seed (replay) and
//     -sim.mutate, with Seeds running a simulation over them and printing
//     the totals at the end.
//
// Every random draw comes from a generator seeded by the seed, so a seed's
// world is the same on every run; the events happen in virtual time.
package simworld

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var (
	// The default is small, for the quick `go test ./...`; .ci/run sets
	// S3LECT_SIM_SEEDS=2000 for the simulations' own run (docs/testing.md).
	seeds  = flag.Int("sim.seeds", envInt("S3LECT_SIM_SEEDS", 50), "how many seeds the safety simulation runs (per variant; default: $S3LECT_SIM_SEEDS, else 50)")
	seed   = flag.Int64("sim.seed", -1, "run the safety simulation for this seed only (replay)")
	first  = flag.Int64("sim.first", 0, "the first seed the safety simulation runs (to run a long range in parts)")
	mutate = flag.String("sim.mutate", "", "break one rule (mutations.go of the package) to see the simulation or a deterministic test catch it; needs -tags s3lect_mutations")
)

// Debug is set by S3LECT_SIM_DEBUG (or SIMDEBUG): the simulations print
// what they do.
var Debug = os.Getenv("S3LECT_SIM_DEBUG") != "" || os.Getenv("SIMDEBUG") != ""

// Debugf prints a line stamped with the (virtual) time when Debug is set.
func Debugf(format string, args ...any) {
	if Debug {
		fmt.Println(time.Now().Format("05.000000000"), fmt.Sprintf(format, args...))
	}
}

// envInt returns the environment variable name as a number, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// SeedRange returns the seeds the flags name: n seeds from first on
// (-sim.first, -sim.seeds), or the one -sim.seed names.
func SeedRange() (from, n int64) {
	if *seed >= 0 {
		return *seed, 1
	}
	return *first, int64(*seeds)
}

// chunk is how many seeds run side by side at most: a long run goes
// chunk by chunk, with a line of progress after each.
const chunk = 1000

// Seeds runs sim once for each seed that -sim.first and -sim.seeds name
// (or the one -sim.seed names), each in a synctest bubble, as parallel
// subtests of t named seed=N, grouped by the thousand (seeds=0-999), and
// logs "label: N seeds survived in D: counters" with the sum of the
// counters sim returned. A run of more than one group logs each group's
// figures as it ends, for long runs (-sim.seeds=50000).
func Seeds(t *testing.T, label string, sim func(t *testing.T, seed int64) map[string]int) {
	from, n := SeedRange()
	var (
		mu     sync.Mutex
		totals = map[string]int{}
		failed []int64 // the seeds that failed, under mu
	)
	start := time.Now()
	for lo := from; lo < from+n; lo += chunk {
		hi := min(lo+chunk, from+n) - 1
		began := time.Now()
		t.Run(fmt.Sprintf("seeds=%d-%d", lo, hi), func(t *testing.T) {
			for s := lo; s <= hi; s++ {
				t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
					t.Parallel()
					var counts map[string]int
					synctest.Test(t, func(t *testing.T) {
						defer func() {
							if t.Failed() { // the bubble's t: its failure reaches ours only later
								mu.Lock()
								defer mu.Unlock()
								failed = append(failed, s)
							}
						}()
						counts = sim(t, s)
					})
					mu.Lock()
					defer mu.Unlock()
					for k, v := range counts {
						totals[k] += v
					}
				})
			}
		})
		if n > chunk {
			mu.Lock()
			var in []int64
			for _, s := range failed {
				if s >= lo && s <= hi {
					in = append(in, s)
				}
			}
			mu.Unlock()
			slices.Sort(in)
			t.Logf("%s: seeds %d-%d: %d failed %v, in %v (%v since the start)", label, lo, hi, len(in), in,
				time.Since(began).Round(time.Second), time.Since(start).Round(time.Second))
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(totals)) {
		fmt.Fprintf(&b, " %s=%d", k, totals[k])
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		t.Logf("%s: %d of %d seeds failed %v in %v:%s", label, len(failed), n, failed, time.Since(start).Round(time.Second), b.String())
		return
	}
	t.Logf("%s: %d seeds survived in %v:%s", label, n, time.Since(start).Round(time.Second), b.String())
}

// SetMutation sets the mutation -sim.mutate names among muts, and returns
// a function that clears it. Without the build tag s3lect_mutations a
// package passes nil muts (its mutations are constants) and cmd, the
// command that compiles them in: a -sim.mutate then fails t, saying so.
func SetMutation(t testing.TB, muts map[string]*bool, cmd string) func() {
	t.Helper()
	if *mutate == "" {
		return func() {}
	}
	if muts == nil {
		t.Fatalf("-sim.mutate=%s needs the mutations compiled in: %s", *mutate, strings.ReplaceAll(cmd, "NAME", *mutate))
	}
	m, ok := muts[*mutate]
	if !ok {
		t.Fatalf("-sim.mutate=%s: want one of %s", *mutate, slices.Sorted(maps.Keys(muts)))
	}
	*m = true
	return func() { *m = false }
}

// Tally counts what a seed did: faults injected, events, outcomes.
type Tally struct {
	mu sync.Mutex
	m  map[string]int
}

// Add counts one k.
func (c *Tally) Add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

// Counts returns a copy of the counts.
func (c *Tally) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}
