package coord

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

var churnSeeds = flag.Uint64("churn.seeds", 200, "seeds of TestSimulationOfSetShardsChurn (4 where $S3LECT_SIM_SEEDS is set: CI's run under the race detector)")

// TestSimulationOfSetShardsChurn (sixth review, what held): SetShards is
// not in the random simulation. Here the coordinator's shard list changes
// every 0.3 to 3 s between random subsets of 12 names, with drains of 0
// to 2 s, a worker killed and started again and a new era now and then;
// the plan's index is checked against a plan from scratch at every event
// (planCheck). No two live owners, no repeated or lower term; every shard
// of the last list led within the bound of the last change.
func TestSimulationOfSetShardsChurn(t *testing.T) {
	seeds := *churnSeeds
	if os.Getenv("S3LECT_SIM_SEEDS") != "" && !flagSet("churn.seeds") {
		seeds = 4
	}
	changes := 0
	defer func() { t.Logf("%d shard term histories checked", changes) }()
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 6))
		// Every other seed, Work drains for up to 4 LeaderTimeouts: a new
		// era then begins while workers drain (the sixth review's
		// finding 1; 4.1's early rule counts the page taken).
		longest := 2 * time.Second
		if seed%2 == 0 {
			longest = 12 * time.Second
		}
		const fi, lt = time.Second, 3 * time.Second
		var all []string
		for i := range 12 {
			all = append(all, fmt.Sprintf("s%02d", i))
		}
		h := newScript(t, fi, lt, all)
		h.names = all
		drain := func(string, error) time.Duration { return time.Duration(rng.Int64N(int64(longest))) }
		for i := range 4 {
			h.addWorker(fmt.Sprintf("w%d", i), drain)
		}
		term := uint64(1)
		h.elect(term)
		var cur []string
		d := 5 * time.Second
		for d < 80*time.Second {
			h.run(d)
			switch rng.IntN(10) {
			case 0: // a new era
				h.depose()
				d += lt
				h.run(d)
				term++
				h.elect(term)
			case 1: // a worker killed and started again (a new process, its ID)
				w := h.ws[h.order[rng.IntN(len(h.order))]]
				h.kill(w)
				d += time.Duration(rng.Int64N(int64(2 * lt)))
				h.run(d)
				n := 0
				w.up, w.leads = true, map[string]*scriptLead{}
				w.w = NewWorker(WorkerConfig{ID: w.id, FrequentInterval: fi, LeaderTimeout: lt,
					NewSession: func() string { n++; return fmt.Sprintf("%s.%d.%d", w.id, seed, n) + fmt.Sprint(d) }})
				h.wdo(w, w.w.Start(h.local()))
			default:
				cur = nil
				for _, s := range all {
					if rng.IntN(3) > 0 {
						cur = append(cur, s)
					}
				}
				if len(cur) == 0 {
					cur = all[:1]
				}
				h.shards = cur
				if h.c != nil {
					h.c.SetShards(cur)
					h.cdo(h.c, h.cTok, h.c.Tick(h.local()))
				}
			}
			d += time.Duration(300+rng.IntN(2700)) * time.Millisecond
		}
		last := d
		bound := longest + 3*lt + 3*fi
		h.run(last + bound)
		led := h.led()
		in := map[string]bool{}
		for _, s := range h.shards {
			in[s] = true
			if !led[s] {
				t.Errorf("seed %d: shard %s of the last list unled %v after the last change", seed, s, bound)
			}
		}
		for s := range led {
			if !in[s] {
				t.Errorf("seed %d: shard %s, removed, still led %v after the last change", seed, s, bound)
			}
		}
		changes += len(h.maxTerm)
		for _, f := range h.fails {
			t.Errorf("seed %d: %s", seed, f)
		}
	}
}

// flagSet says whether the named flag was given on the command line.
func flagSet(name string) (set bool) {
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
