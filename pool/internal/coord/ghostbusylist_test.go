package coord

import (
	"flag"
	"testing"
	"time"
)

var busyListTook = flag.Duration("busylist.took", 1100*time.Millisecond, "TestRestartedWorkersShardsAreLedAgainWhileListingsRunBackToBack: how long each listing is out (FrequentInterval 1 s)")

// TestRestartedWorkersShardsAreLedAgainWhileListingsRunBackToBack
// (fourteenth review; liveness, section 6): the thirteenth review's mend
// ends no ghost by a read that returns while a listing is out
// (readGhosts), and after() asks for the ghost's read only with no
// listing out. When a listing (two LISTs: workers/, then news/) takes
// longer than a FrequentInterval, after() sends the next one in the very
// call that takes in the last (nextLst has passed), so a listing is
// always out: every read returns while one is, and no ghost ever ends.
// An ordinary restart makes a ghost (the new session writes over the
// old one, 4.3), so the restarted worker's shards stay unled for good;
// and the read of the new session, which a listing showed at another
// write, makes a ghost holding every shard (4.3's last rule), which
// never ends either: Ready is false for good, and the era grants
// nothing more to anyone. Found: 10 of 10 seeds, at a listing out 1.01
// s and more (at 0.9 s, and at 1.1 s before 9f936a1, every shard is led
// again within 3.3 to 6.3 s).
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout
// 3 s, calm): every listing's reply comes 1.1 s after its send (each
// LIST 550 ms: a pool of some thousand workers, or a slow store); a
// control phase of two leases shows the pool stays balanced so; then a
// worker that leads shards and does not coordinate is killed and started
// again at once. Section 6 bounds the time to every shard led by 3 ×
// LeaderTimeout + 3 × FrequentInterval (12 s); the test waits 30 s.
// No fault of the store's, no operator.
func TestRestartedWorkersShardsAreLedAgainWhileListingsRunBackToBack(t *testing.T) {
	stuck := 0
	const seeds = 10
	for seed := uint64(1); seed <= seeds; seed++ {
		s := calmSim(t, seed, 3, 6)
		tm := attackTiming
		slow := func() {
			h := s.holder
			if h == nil || h.c == nil || !h.c.listing {
				return
			}
			if e := s.inFlight("list reply", h); e != nil {
				if due := h.realAt(h.c.listSent) + *busyListTook; e.at < due {
					s.delay(e, due-s.now)
				}
			}
		}
		run := func(d time.Duration, done func() bool) bool {
			for end := s.now + d; s.now < end; {
				s.step(s.now + time.Millisecond)
				slow()
				if done != nil && done() {
					return true
				}
			}
			return false
		}
		run(2*tm.lt, nil)
		if !s.balanced() {
			t.Fatalf("seed %d: listings out %v each: the pool is not balanced before the restart", seed, *busyListTook)
		}
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		s.log("attack: %s restarts (listings out %v each)", v.id, *busyListTook)
		s.kill(v)
		s.start(v)
		restart := s.now
		if run(30*time.Second, s.allLed) {
			t.Logf("seed %d: every shard led %.3fs after the restart", seed, (s.now - restart).Seconds())
			continue
		}
		stuck++
		c := s.holder.c
		ghosts, all := 0, 0
		for _, g := range c.ghosts {
			if !g.done {
				ghosts++
				if g.all {
					all++
				}
			}
		}
		if stuck == 1 {
			t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 40))
		}
		t.Errorf("seed %d: 30 s after %s restarted, not every shard is led (%d ghosts still hold, %d of them every shard; a listing out: %v); section 6 bounds it by 12 s", seed, v.id, ghosts, all, c.listing)
	}
	t.Logf("%d of %d seeds: some shard never led again", stuck, seeds)
}
