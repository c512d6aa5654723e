package coord

import (
	"flag"
	"testing"
	"time"
)

var simPeerFigures = flag.Bool("sim.peer", false, "BenchmarkFigures in peer mode (simpeer_test.go)")

// TestPeerModeSteadyStateCost counts, in virtual time, the store requests
// of a stable pool of 10 workers over 100 shards in peer mode: each
// peer-mode worker's one session write per interval and no read (its
// reports say its page is unchanged), and the coordinator's listing
// every LeaderTimeout/2 with one session read per listing
// (docs/pool-protocol.md, 4.8 and 8); at the defaults, with one worker
// on other timings (a rolling change: the old pool then listed every
// interval on every worker), and with one worker polling (a rolling
// change of mode: it reads its page every interval, the others do not).
// The election's own requests are not in the simulation.
func TestPeerModeSteadyStateCost(t *testing.T) {
	def, short := timing{5 * time.Second, 15 * time.Second}, timing{4 * time.Second, 11 * time.Second}
	for _, tc := range []struct {
		name    string
		odd     timing // the last worker's
		oddPoll bool
	}{{"defaults", def, false}, {"OneWorkerOnOtherTimings", short, false}, {"OnePollingWorker", def, true}} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				s := newSim(seed, simConfig{shards: 100, timing: &def, noLog: true, maxWorkers: 10, peer: true})
				s.calm = true // no faults, no lost replies, no slow calls
				for range 9 {
					s.addProc()
				}
				odd := s.addProc()
				s.kill(odd)
				odd.tm, odd.peer.mode = tc.odd, !tc.oddPoll
				s.start(odd)
				if _, ok := s.waitFor(10*def.lt, s.balanced); !ok {
					t.Fatalf("seed %d: not balanced %v after a cold start", seed, 10*def.lt)
				}
				s.step(s.now + 2*def.lt)
				before := map[*proc]map[string]int{}
				for _, p := range s.procs {
					before[p] = map[string]int{"put": p.calls["put"], "get": p.calls["get"], "list": p.calls["list"]}
				}
				const span = time.Minute
				s.step(s.now + span)
				var puts, gets float64
				for _, p := range s.procs {
					n := float64(span / p.tm.fi) // the worker's intervals
					dp, dg, dl := p.calls["put"]-before[p]["put"], p.calls["get"]-before[p]["get"], p.calls["list"]-before[p]["list"]
					switch {
					case p == s.holder:
						t.Logf("seed %d: the coordinator %s: %.2f listings and %.2f GETs per interval, and its session's %.2f PUT", seed, p.id, float64(dl)/n, float64(dg)/n, float64(dp)/n)
						if most := int(span/(p.tm.lt/2)) + 1; dl > most {
							t.Errorf("seed %d: the coordinator listed %d times in %v; want at most %d (every LeaderTimeout/2)", seed, dl, span, most)
						}
						if dg > dl+1 {
							t.Errorf("seed %d: the coordinator made %d GETs in %v; want at most one per listing (%d)", seed, dg, span, dl)
						}
					case !p.peer.mode:
						if float64(dp) > n+1 || float64(dg) > n+1 || dl > 0 {
							t.Errorf("seed %d: polling worker %s made %d PUTs, %d GETs and %d listings in %.0f intervals; want one PUT and one GET per interval", seed, p.id, dp, dg, dl, n)
						}
					default:
						puts, gets = puts+float64(dp)/n, gets+float64(dg)/n
						if float64(dp) > n+1 || dg > 0 || dl > 0 {
							t.Errorf("seed %d: worker %s made %d PUTs, %d GETs and %d listings in %.0f intervals; want one PUT per interval, no read", seed, p.id, dp, dg, dl, n)
						}
					}
				}
				peers := 9.0
				if tc.oddPoll {
					peers = 8
				}
				t.Logf("seed %d: per peer-mode worker per interval: %.2f PUT, %.2f GET", seed, puts/peers, gets/peers)
				if len(s.fails) > 0 {
					t.Fatalf("seed %d: %v", seed, s.fails)
				}
			}
		})
	}
}
