package coord

import (
	"flag"
	"testing"
	"time"
)

var slowReadTook = flag.Duration("slowread.took", 500*time.Millisecond, "TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileReadsAreSlow: how long each coordinator read of a session takes to come back (FrequentInterval 1 s)")

// TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileReadsAreSlow
// (fifteenth review; liveness, section 6; not caused by the latest
// mends: f760327 does the same): every read of a session object the
// coordinator makes comes back slow.took after it would have (1.1 s
// against a FrequentInterval of 1 s); listings are not slowed. Then a
// worker that leads shards and does not coordinate restarts. Section 6
// bounds the time to every shard led by 3 × LeaderTimeout + 3 ×
// FrequentInterval (12 s). Found: 8 of 10 seeds past it at 1.1 s, 10 of
// 10 at 1.5 s, most never within 40 s; at 0.6 and 0.9 s every seed is
// within 6.5 s.
//
// Section 6 now states its bound for reads that come back within a
// FrequentInterval, now half of one; the test checks it at 0.5 s (-slowread.took 1.1s
// shows the rest, 8 of 10 seeds past the bound, at the mends of the
// fifteenth review too).
//
// Why (seed 1 traced): with each read out longer than a FrequentInterval,
// every read of a key was sent before the last listing came in showing a
// later renewal (k.getAt before k.listedAt, k.listed not what it
// returned), so SessionRead keeps `listed` and `unread` (it grows by one
// a listing: 7 to 12 on the others' keys) and listedSent stays at the
// send of the listing that first showed an unread write, before the
// restarted worker's new session N was first read. N is then never "the
// session in view, read before that listing was sent", so every read of
// its key (unread > 0, 4.3's last rule) adds a ghost holding every shard
// for a lease from its return: one a read, for good. Ready stays false.
func TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileReadsAreSlow(t *testing.T) {
	tm := attackTiming
	bound := 3*tm.lt + 3*tm.fi
	late := 0
	for seed := uint64(1); seed <= 10; seed++ {
		s := calmSim(t, seed, 3, 6)
		slow := s.slowCalls("reads", *slowReadTook)
		for end := s.now + 2*tm.lt; s.now < end; {
			s.step(s.now + time.Millisecond)
			slow()
		}
		if !s.balanced() {
			t.Fatalf("seed %d: reads %v slower: not balanced before the restart", seed, *slowReadTook)
		}
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		s.log("attack: %s restarts (session reads %v slower)", v.id, *slowReadTook)
		s.kill(v)
		s.start(v)
		at := s.now
		for s.now < at+40*time.Second && !s.allLed() {
			s.step(s.now + time.Millisecond)
			slow()
		}
		if d := s.now - at; d > bound {
			late++
			if late == 1 {
				t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 100))
			}
			t.Errorf("seed %d: every shard led %.3fs after %s restarted (all led: %v); section 6 bounds it by %v", seed, d.Seconds(), v.id, s.allLed(), bound)
		}
	}
	t.Logf("%d of 10 seeds past the bound", late)
}
