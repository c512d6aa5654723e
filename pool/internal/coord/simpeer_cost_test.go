package coord

import (
	"flag"
	"testing"
	"time"
)

var simPeerFigures = flag.Bool("sim.peer", false, "BenchmarkFigures in peer mode (simpeer_test.go)")

// TestPeerModeSteadyStateCost counts, in virtual time, the store requests
// of a stable pool in peer mode at the defaults (FrequentInterval 5 s,
// LeaderTimeout 15 s), 10 workers over 100 shards: each worker's one
// session write per interval and no read (its reports say its page is
// unchanged), and the coordinator's listing every LeaderTimeout/2 with
// its one session read per listing (docs/pool-protocol.md, 4.8 and 8).
// The election's own requests are not in the simulation.
func TestPeerModeSteadyStateCost(t *testing.T) {
	tm := timing{5 * time.Second, 15 * time.Second}
	for seed := uint64(1); seed <= 3; seed++ {
		s := newSim(seed, simConfig{shards: 100, timing: &tm, noLog: true, maxWorkers: 10, peer: true})
		s.calm = true // no faults, no lost replies, no slow calls
		for range 10 {
			s.addProc()
		}
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced %v after a cold start", seed, 10*tm.lt)
		}
		s.step(s.now + 2*tm.lt)
		const intervals = 12
		before := map[*proc]map[string]int{}
		for _, p := range s.procs {
			before[p] = map[string]int{}
			for k, n := range p.calls {
				before[p][k] = n
			}
		}
		s.step(s.now + intervals*tm.fi)
		var puts, gets, reports, n int
		for _, p := range s.procs {
			d := func(k string) int { return p.calls[k] - before[p][k] }
			if p == s.holder {
				lists, reads := d("list"), d("get")
				t.Logf("seed %d: the coordinator %s: %.2f listings and %.2f GETs per interval (with its own session write, %.2f PUT)",
					seed, p.id, float64(lists)/intervals, float64(reads)/intervals, float64(d("put"))/intervals)
				if most := int(intervals*tm.fi/(tm.lt/2)) + 1; lists > most {
					t.Errorf("seed %d: the coordinator listed %d times in %d intervals; want at most %d (every LeaderTimeout/2)", seed, lists, intervals, most)
				}
				if reads > lists+1 {
					t.Errorf("seed %d: the coordinator made %d GETs in %d intervals; want at most one per listing (%d)", seed, reads, intervals, lists)
				}
				continue
			}
			puts, gets, reports, n = puts+d("put"), gets+d("get"), reports+d("report"), n+1
			if d("put") > intervals+1 || d("get") > 0 || d("list") > 0 {
				t.Errorf("seed %d: worker %s made %d PUTs, %d GETs and %d listings in %d intervals; want one PUT per interval, no read", seed, p.id, d("put"), d("get"), d("list"), intervals)
			}
		}
		t.Logf("seed %d: per worker per interval: %.2f PUT, %.2f GET, %.2f reports", seed,
			float64(puts)/float64(n)/intervals, float64(gets)/float64(n)/intervals, float64(reports)/float64(n)/intervals)
		if len(s.fails) > 0 {
			t.Fatalf("seed %d: %v", seed, s.fails)
		}
	}
}
