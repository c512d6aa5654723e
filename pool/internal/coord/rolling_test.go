package coord

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"
)

var rollingSeeds = flag.Int("rolling.seeds", 1, "seeds of TestRollingDeployMovesEachShardAwayAndBackOnce")

// owners returns the worker whose leadership of each shard is live.
func (s *sim) owners() map[string]string {
	o := map[string]string{}
	for _, p := range s.procs {
		for sh, l := range p.ls {
			if s.live(p, l) {
				o[sh] = p.id
			}
		}
	}
	return o
}

// TestRollingDeployMovesEachShardAwayAndBackOnce: a rolling deploy, each
// worker in turn leaving (SIGTERM: its shards are handed over) and
// started again with its ID, ends with every worker leading the shards
// it led before, each shard having moved at most away and back: a shard
// handed over is not handed on from worker to worker as the deploy goes.
// The coordinator goes third: the era after it learns from the pages
// where its shards, and the shards still away, go back to (4.4).
// One seed by default (about 2 s under -race); -rolling.seeds runs more.
func TestRollingDeployMovesEachShardAwayAndBackOnce(t *testing.T) {
	tm := timing{5 * time.Second, 15 * time.Second}
	for seed := uint64(1); seed <= uint64(*rollingSeeds); seed++ {
		s := newSim(seed, simConfig{shards: 60, timing: &tm, noLog: true, maxWorkers: 6})
		s.calm = true
		for range 6 {
			s.addProc()
		}
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced after a cold start", seed)
		}
		s.step(s.now + 2*tm.lt)
		before := s.owners()
		last := before
		moves := map[string]int{}
		hist := map[string]string{}
		track := func() {
			now := s.owners()
			for sh, id := range now {
				if last[sh] != "" && last[sh] != id {
					moves[sh]++
					hist[sh] += fmt.Sprintf(" %v:%s->%s", s.now, last[sh], id)
				}
			}
			for sh, id := range now {
				last[sh] = id
			}
		}
		coordinator, era := s.holder, s.term
		order := slices.DeleteFunc(slices.Clone(s.procs), func(p *proc) bool { return p == coordinator })
		order = slices.Insert(order, 2, coordinator)
		for _, p := range order {
			s.wdo(p, p.w.Leave(p.local(s.now)))
			if _, ok := s.waitFor(10*tm.lt, func() bool { track(); return !p.up && s.allLed() }); !ok {
				t.Fatalf("seed %d: %s's shards not led again after it left", seed, p.id)
			}
			s.start(p)
			if _, ok := s.waitFor(10*tm.lt, func() bool { track(); return s.balanced() }); !ok {
				t.Fatalf("seed %d: not balanced after %s came back", seed, p.id)
			}
			s.step(s.now + tm.lt)
			track()
		}
		if s.term == era {
			t.Fatalf("seed %d: the coordinator's restart started no new era", seed)
		}
		after := s.owners()
		for sh, id := range before {
			if after[sh] != id {
				t.Errorf("seed %d: shard %s led by %s before the deploy, by %s after", seed, sh, id, after[sh])
			}
			if moves[sh] > 2 {
				t.Errorf("seed %d: shard %s moved %d times in the deploy; want at most 2 (away and back): %s", seed, sh, moves[sh], hist[sh])
			}
		}
		if len(s.fails) > 0 {
			t.Fatalf("seed %d: %v", seed, s.fails)
		}
	}
}
