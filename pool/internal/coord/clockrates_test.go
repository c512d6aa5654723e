package coord

// Checks from the first adversarial review of the coordinator-decided pool
// (issue 40) that held once its findings were mended: seeds replay with
// the attack flags, and clocks at the limits of their rates leave a gap.

import (
	"testing"
	"time"
)

// TestSeedsReplayWithTheAttackFlags runs seeds 1 to 5 twenty times each (with the
// flags given: -attack.suspend, -sim.content-etags are part of the
// history) and expects one ledger hash per seed.
func TestSeedsReplayWithTheAttackFlags(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		first := ""
		for i := range 20 {
			cfg := defaultSim
			cfg.contentETags = *simContent
			s := newSim(seed, cfg)
			h := s.run()
			if i == 0 {
				first = h
				t.Logf("seed %d: ledger %s, %d events, %d failures", seed, h, s.steps, len(s.fails))
				continue
			}
			if h != first {
				t.Fatalf("run %d of seed %d: ledger %s; want %s", i, seed, h, first)
			}
		}
	}
}

// TestClockRatesAtTheLimitsLeaveAGap: every clock at 5 % fast (the
// coordinator and the takers) but the victim's, 5 % slow; the victim is
// cut off the store at a moment drawn from the seed, so its leaderships
// run to their deadline on its slow clock while the coordinator waits it
// out on its fast one. 40 seeds; the test reports the smallest gap
// between the victim's last deadline (real time) and the start of any of
// its shards elsewhere.
func TestClockRatesAtTheLimitsLeaveAGap(t *testing.T) {
	minGap := time.Hour
	for seed := uint64(1); seed <= 40; seed++ {
		tm := attackTiming
		s := newSim(seed, simConfig{workers: 4, shards: 8, timing: &tm, maxWorkers: 4, calmFor: time.Minute})
		s.calm = true
		for _, p := range s.procs {
			p.rate = 1.05
		}
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced", seed)
		}
		s.step(s.now + s.dur(tm.lt, 2*tm.lt))
		var v *proc
		for _, p := range s.procs {
			if p.up && p != s.holder && len(p.ls) > 0 {
				v = p
				break
			}
		}
		// Its clock slows from now on (kept continuous at this instant).
		loc := v.local(s.now)
		v.rate = 0.95
		v.off = loc.Sub(time.Time{}) - time.Duration(float64(s.now)*v.rate)
		s.step(s.now + s.dur(0, tm.fi))
		v.cutTill = s.now + time.Hour
		mine := map[string]bool{}
		var end time.Duration
		for sh, l := range v.ls {
			mine[sh] = true
			end = max(end, v.realAt(l.deadline))
		}
		startAt := time.Duration(-1)
		for s.now < end+3*tm.lt && startAt < 0 {
			s.step(s.now + time.Millisecond)
			for _, q := range s.procs {
				if q == v {
					continue
				}
				for sh := range q.ls {
					if mine[sh] && s.live(q, q.ls[sh]) {
						startAt = s.now
					}
				}
			}
		}
		// v's deadlines may have moved on by a renewal sent before the cut.
		for _, l := range v.ls {
			if !l.ended {
				end = max(end, v.realAt(l.deadline))
			}
		}
		if startAt < 0 {
			t.Errorf("seed %d: %s's shards not led elsewhere 3 leases after its lease", seed, v.id)
			continue
		}
		minGap = min(minGap, startAt-end)
		if len(s.fails) > 0 || startAt < end {
			t.Errorf("seed %d: %s's shard started elsewhere at %v, before its lease ended at %v: %v", seed, v.id, startAt, end, s.fails)
		}
	}
	t.Logf("smallest gap between the cut-off worker's last deadline and a start of one of its shards elsewhere: %v", minGap)
}
