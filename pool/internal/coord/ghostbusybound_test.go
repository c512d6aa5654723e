package coord

import (
	"flag"
	"testing"
	"time"
)

var busyBoundTook = flag.Duration("busybound.took", 1050*time.Millisecond, "TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileListingsRunBackToBack: how long each listing is out (FrequentInterval 1 s)")

// TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileListingsRunBackToBack
// (fifteenth review; liveness, section 6): ghostbusylist_test.go's
// schedule, whose test asks only that every shard be led again within
// 30 s, checked against section 6's bound, 3 × LeaderTimeout + 3 ×
// FrequentInterval (12 s here). With each listing out a little longer
// than a FrequentInterval (1.01 to 1.08 s), after 19fffc0 some seeds
// take 12 to 30 s, and some never within 30 s; at 1.2 to 1.7 s all are
// within 11 s. At f760327 (before 19fffc0) none of 10 seeds passed the
// bound at 1.01, 1.03, 1.05, 1.08 or 1.1 s; after it 1, 4, 5, 3 and 1.
//
// Why (seed 10 traced): the restarted worker's new session N renews
// every second; the deciding read of the old session's ghost returns
// (N at e83) while a listing is out; the listing, sent before that read,
// comes back showing e80, N's write between the read before (e77) and
// e83: neither tag entry() takes for stale, so it is "listed", ended()
// does not end the ghost, and the next read shows e83 again. The count
// excuse then compares e83's seq with the view's seq, already e83's
// (the ending read set it): zero writes cannot account for one listed,
// so the ghost's wait, and the "every shard" ghost beside it, move a
// lease on; the next deciding read again returns while a listing is
// out, and so on, each round 3.2 s, until a read happens to return with
// none out.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout
// 3 s, calm): every listing's reply comes busybound.took after its send;
// two leases of it; then a worker that leads shards and does not
// coordinate is killed and started again at once. No fault after that.
func TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileListingsRunBackToBack(t *testing.T) {
	late := 0
	const seeds = 10
	tm := attackTiming
	bound := 3*tm.lt + 3*tm.fi
	for seed := uint64(1); seed <= seeds; seed++ {
		s := calmSim(t, seed, 3, 6)
		slow := func() {
			h := s.holder
			if h == nil || h.c == nil || !h.c.listing {
				return
			}
			if e := s.inFlight("list reply", h); e != nil {
				if due := h.realAt(h.c.listSent) + *busyBoundTook; e.at < due {
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
			t.Fatalf("seed %d: listings out %v each: the pool is not balanced before the restart", seed, *busyBoundTook)
		}
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		s.log("attack: %s restarts (listings out %v each)", v.id, *busyBoundTook)
		s.kill(v)
		s.start(v)
		restart := s.now
		led := run(bound, s.allLed)
		if led {
			t.Logf("seed %d: every shard led %.3fs after the restart", seed, (s.now - restart).Seconds())
			continue
		}
		late++
		if late == 1 {
			t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 150))
		}
		more := run(30*time.Second, s.allLed)
		t.Errorf("seed %d: not every shard led within section 6's bound (%v) after %s restarted (every shard led after %.3fs: %v)", seed, bound, v.id, (s.now - restart).Seconds(), more)
	}
	t.Logf("%d of %d seeds past the bound", late, seeds)
}
