package pool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// phases is how many points of a renewal cycle each death and join is
// tried at.
const phases = 12

// TestSpreadAfterEveryDeath kills each worker of 4 over 40 shards in turn,
// at 12 points of the renewal cycle, and checks that within 2 ×
// LeaderTimeout the 3 survivors hold 13 or 14 shards each, that every
// shard was led again within LeaderTimeout + FrequentInterval of the kill
// (the lease, and at most one read interval to see its last renewal), and
// that no shard ever had two live leaders or a term that did not rise.
func TestSpreadAfterEveryDeath(t *testing.T) {
	for victim := range 4 {
		for phase := range phases {
			t.Run(fmt.Sprintf("w%d/phase=%d", victim+1, phase), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					g := newGroup(t, 4, 40)
					defer g.stop()
					time.Sleep(2*testLT + time.Duration(phase)*testFI/phases)
					ids := []string{"w1", "w2", "w3", "w4"}
					if c := g.counts(); !within(c, ids, 10, 10, 40) {
						t.Fatalf("before the kill: %s; want 10 each", spread(c))
					}
					dead := g.workers[victim]
					dead.st.dead.Store(true)
					killed := time.Now()
					survivors := g.ids(dead)
					var ledAgain time.Duration
					for time.Since(killed) < 2*testLT {
						time.Sleep(100 * time.Millisecond)
						if c := g.counts(); ledAgain == 0 && c[dead.id] == 0 && c[survivors[0]]+c[survivors[1]]+c[survivors[2]] == 40 {
							ledAgain = time.Since(killed)
						}
					}
					t.Logf("led again after %.2f LT", float64(ledAgain)/float64(testLT))
					if c := g.counts(); !within(c, survivors, 13, 14, 40) {
						t.Errorf("2 × LeaderTimeout after %s was killed: %s; want 13 or 14 on each survivor, 40 in all", dead.id, spread(c))
					}
					if limit := testLT + testFI; ledAgain == 0 || ledAgain > limit {
						t.Errorf("every shard led again %v after the kill; want within LeaderTimeout + FrequentInterval = %v", ledAgain, limit)
					}
					g.check(t)
				})
			})
		}
	}
}

// TestSpreadAfterJoin starts a fourth worker beside 3 that share 40
// shards, at 12 points of the renewal cycle, and checks that within 2 ×
// LeaderTimeout every worker holds 10, the newcomer's by handover
// (released after the old owner's work returned, never two leaders).
func TestSpreadAfterJoin(t *testing.T) {
	for phase := range phases {
		t.Run(fmt.Sprintf("phase=%d", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, 3, 40)
				defer g.stop()
				time.Sleep(2*testLT + time.Duration(phase)*testFI/phases)
				ids := []string{"w1", "w2", "w3", "w4"}
				if c := g.counts(); !within(c, ids[:3], 13, 14, 40) {
					t.Fatalf("before the join: %s; want 13 or 14 each", spread(c))
				}
				handed := uint64(0)
				for _, w := range g.workers {
					handed -= w.p.Stats().Handovers
				}
				g.add("w4")
				time.Sleep(2 * testLT)
				if c := g.counts(); !within(c, ids, 10, 10, 40) {
					t.Errorf("2 × LeaderTimeout after w4 joined: %s; want 10 each", spread(c))
				}
				for _, w := range g.workers[:3] {
					handed += w.p.Stats().Handovers
				}
				if handed != 10 {
					t.Errorf("%d shards handed over; want 10", handed)
				}
				g.check(t)
			})
		})
	}
}

// TestLeaveHandsShardsOver stops one worker of 4 (Run's context ends): its
// shards are released after their work returned, and the others take
// them at once, not after a lease.
func TestLeaveHandsShardsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 4, 40)
		defer g.stop()
		time.Sleep(2 * testLT)
		w := g.workers[3]
		w.cancel()
		<-w.done
		left := time.Now()
		for g.counts()["w1"]+g.counts()["w2"]+g.counts()["w3"] < 40 {
			time.Sleep(100 * time.Millisecond)
		}
		if d := time.Since(left); d > 2*testFI {
			t.Errorf("the shards of a worker that left were led again after %v; want within 2 × FrequentInterval", d)
		}
		time.Sleep(testLT)
		if c := g.counts(); !within(c, []string{"w1", "w2", "w3"}, 13, 14, 40) {
			t.Errorf("after w4 left: %s; want 13 or 14 each", spread(c))
		}
		g.check(t)
	})
}

// TestThousandShardsOnTenWorkers kills one of 10 workers over 1,000 shards
// at 12 points of the renewal cycle (a different worker each time), in
// virtual time: every shard it led is led again within LeaderTimeout +
// FrequentInterval/2 of the kill, and the 9 survivors hold 111 or 112
// each. It logs the median and the longest time to every shard led again,
// in units of LeaderTimeout: the crash failover's figure (examples/report
// measures the same in real time). By design it is LeaderTimeout +
// FrequentInterval/4 after the dead worker's last renewal (the survivors
// read a quarter interval after the renewals, and claim when that reading
// has stood for LeaderTimeout), so 0.75 to 1.08 × LeaderTimeout after a
// kill at a uniform point of its cycle, median 0.92.
func TestThousandShardsOnTenWorkers(t *testing.T) {
	var times []time.Duration
	for phase := range phases {
		t.Run(fmt.Sprintf("phase=%d", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, 10, 1000)
				defer g.stop()
				time.Sleep(4*testLT + time.Duration(phase)*testFI/phases)
				dead := g.workers[phase%10]
				survivors := g.ids(dead)
				dead.st.dead.Store(true)
				killed := time.Now()
				var ledAgain time.Duration
				for time.Since(killed) < 2*testLT {
					time.Sleep(50 * time.Millisecond)
					if c := g.counts(); ledAgain == 0 && within(c, survivors, 0, 1000, 1000) {
						ledAgain = time.Since(killed)
					}
				}
				t.Logf("every shard led again after %.2f × LeaderTimeout", float64(ledAgain)/float64(testLT))
				if limit := testLT + testFI/2; ledAgain == 0 || ledAgain > limit {
					t.Errorf("every shard led again %v after the kill; want within LeaderTimeout + FrequentInterval/2 = %v", ledAgain, limit)
				}
				if c := g.counts(); !within(c, survivors, 111, 112, 1000) {
					t.Errorf("2 × LeaderTimeout after the kill: %s; want 111 or 112 on each survivor", spread(c))
				}
				g.check(t)
				times = append(times, ledAgain)
			})
		})
	}
	slices.Sort(times)
	if len(times) == phases {
		t.Logf("crash failover over %d phases: median %.2f, max %.2f × LeaderTimeout", phases,
			float64(times[phases/2-1]+times[phases/2])/2/float64(testLT), float64(times[phases-1])/float64(testLT))
	}
}

// TestJoinMovesEachShardOnce starts a fourth worker beside 3 that share
// 300 shards, at 4 points of the renewal cycle: within 2 × LeaderTimeout
// every worker holds 75; the 75 the newcomer needs are handed over once
// each and claimed by it alone (no other worker claims a shard after the
// join: none moves twice); and no handed-over shard waits for its new
// leader longer than a crash failover may (LeaderTimeout +
// FrequentInterval/2). It logs how long the spread took and the longest
// wait.
func TestJoinMovesEachShardOnce(t *testing.T) {
	for phase := range 4 {
		t.Run(fmt.Sprintf("phase=%d", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, 3, 300)
				defer g.stop()
				time.Sleep(3*testLT + time.Duration(phase)*testFI/4)
				ids := []string{"w1", "w2", "w3", "w4"}
				if c := g.counts(); !within(c, ids[:3], 100, 100, 300) {
					t.Fatalf("before the join: %s; want 100 each", spread(c))
				}
				var claims, handed uint64
				for _, w := range g.workers {
					s := w.p.Stats()
					claims, handed = claims-s.Claims, handed-s.Handovers
				}
				g.mu.Lock()
				g.maxGap = 0
				g.mu.Unlock()
				joined := time.Now()
				g.add("w4")
				var even time.Duration
				for time.Since(joined) < 2*testLT {
					time.Sleep(50 * time.Millisecond)
					if c := g.counts(); even == 0 && within(c, ids, 75, 75, 300) {
						even = time.Since(joined)
					}
				}
				var joinerClaims uint64
				for _, w := range g.workers {
					s := w.p.Stats()
					claims, handed = claims+s.Claims, handed+s.Handovers
					if w.id == "w4" {
						joinerClaims = s.Claims
					}
				}
				g.mu.Lock()
				gap := g.maxGap
				g.mu.Unlock()
				t.Logf("even after %.2f × LeaderTimeout; %d handed over, %d claimed (%d by the newcomer); longest wait for a new leader %.2f × LeaderTimeout",
					float64(even)/float64(testLT), handed, claims, joinerClaims, float64(gap)/float64(testLT))
				if even == 0 {
					t.Errorf("2 × LeaderTimeout after w4 joined: %s; want 75 each", spread(g.counts()))
				}
				if handed != 75 || claims != 75 || joinerClaims != 75 {
					t.Errorf("%d shards handed over and %d claimed, %d of them by the newcomer; want 75, 75 and 75 (each shard moved once)", handed, claims, joinerClaims)
				}
				if limit := testLT + testFI/2; gap > limit {
					t.Errorf("a handed-over shard waited %v for its new leader; want at most a crash failover's %v", gap, limit)
				}
				g.check(t)
			})
		})
	}
}

// TestColdStartOfAHundredWorkers starts 100 workers at once over 1,000
// shards on a store that takes 5 ms a call, in virtual time, and checks
// that every worker holds its share (± 1) within 2 × LeaderTimeout. They
// all add themselves to the member list at once, and all but one lose
// each round of it; a loser retries at a random time (joinRetry), so
// that the rounds let many in. (With -sim.mutate=joininstep every loser
// retries a quarter interval later, one more gets in per round, and no
// shard was led for 8 leases: 9.4 × LeaderTimeout to the spread.) CI runs
// it beside the simulations, without -race.
func TestColdStartOfAHundredWorkers(t *testing.T) {
	defer setMutation(t)()
	const n, w = 1000, 100
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 0, n)
		g.wrap = func(_ string, st store.Store) store.Store { return delayed{st, 5 * time.Millisecond} }
		for i := range w {
			g.add(fmt.Sprintf("w%03d", i+1))
		}
		defer g.stop()
		start := time.Now()
		for time.Since(start) < 2*testLT {
			time.Sleep(testLT / 20)
			if within(g.counts(), g.ids(nil), n/w-1, n/w+1, n) {
				t.Logf("every worker at its share ± 1 %.2f × LeaderTimeout after the start", float64(time.Since(start))/float64(testLT))
				g.check(t)
				return
			}
		}
		t.Errorf("2 × LeaderTimeout after 100 workers started at once: %s; want %d ± 1 each", spread(g.counts()), n/w)
	})
}

// delayed adds d to every call of a store, as a store a few milliseconds
// away does.
type delayed struct {
	store.Store
	d time.Duration
}

func (s delayed) Get(ctx context.Context, k string) ([]byte, string, error) {
	time.Sleep(s.d)
	return s.Store.Get(ctx, k)
}

func (s delayed) PutIfMatch(ctx context.Context, k string, b []byte, etag string) (string, error) {
	time.Sleep(s.d)
	return s.Store.PutIfMatch(ctx, k, b, etag)
}

func (s delayed) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	time.Sleep(s.d)
	return s.Store.(store.Lister).List(ctx, prefix)
}
