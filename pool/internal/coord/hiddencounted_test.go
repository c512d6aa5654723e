package coord

import (
	"flag"
	"testing"
	"time"
)

var countedSeeds = flag.Uint64("counted.seeds", 300, "TestGhostsListedRenewalIsNotExcusedByTheTwinsLaterWrites: seeds")

var countedLT = flag.Duration("counted.lt", 5*time.Second, "TestGhostsListedRenewalIsNotExcusedByTheTwinsLaterWrites: the LeaderTimeout (FrequentInterval 1 s)")

var countedListOut = flag.Duration("counted.listout", 2400*time.Millisecond, "TestHiddenSessionRenewalWrittenOverIsNotExcusedByTheTwinsLaterWrites: the longest the listing is out (two LISTs, each as slow as the simulation's slowest call, 1.2 s)")

// TestHiddenSessionRenewalWrittenOverIsNotExcusedByTheTwinsLaterWrites
// (fourteenth review): 4.3 counts a write a listing showed that no read
// returned, "unless the read shows the session in view going on with at
// least as many writes unseen". The thirteenth review's mend asks, for
// the rule that holds every shard, that the session in view predate the
// send of that listing (view.since before key.listedSent); the count of
// writes (SessionRead's `unread`, s.Seq-cur.seq above n) asks no such
// thing. A session a read adopted while the listing was out, and read
// again since, can have made as many writes after that read as the
// listing showed, though the listed write landed before its first: the
// count excuses the listed write, and neither the all-shard hold nor the
// gate (the read already returned the twin's session at the ETag the
// gate listing shows, or the gate read itself is the excused one) stops
// the grants.
//
// Schedule: the one of TestHiddenSessionRenewalWrittenOverWhileItsListingIsOutIsNotForgotten
// (hiddenraced_test.go) to its step 4: a hidden session's put-back
// renewal E1 is listed by a listing whose reply is slow; the twin's new
// session A2 writes over E1 and a read returns A2 while the listing is
// out. Then:
//  5. the listing stays out until A2 has written twice since the era
//     last read it (at most 2.4 s from its send, -counted.listout: two
//     LISTs, each as slow as the simulation's slowest call; the era
//     waits a LeaderTimeout for a listing);
//  6. the listing returns (E1 listed, A2 in view since after its send);
//     the read that follows shows A2 two writes on: n = 1 listed write,
//     s.Seq-cur.seq = 2, so nothing counts as unread; the gate passes
//     and V's shards go to A2 while V's put-back renewal's lease runs.
//
// One put-back (exact bytes, S3), a twin (two processes of one ID), a
// slow listing reply; no pause of the coordinator, no slow read.
func TestHiddenSessionRenewalWrittenOverIsNotExcusedByTheTwinsLaterWrites(t *testing.T) {
	tm := hiddenTiming
	var ta tally
	excused := 0
	for seed := uint64(1); seed <= 80; seed++ {
		r, ok := hiddenTwinRace(t, seed) // 1. to 4.
		if !ok {
			continue
		}
		s, v, c, cp, k, list, o := r.sim, r.v, r.c, r.cp, r.k, r.list, r.o
		// 5. The listing stays out until the twin's session has written
		// twice since the era last read it.
		r0 := s.now
		listSent := cp.realAt(c.listSent)
		seqAt := func() uint64 {
			ss, err := ParseSession(o.data, v.id)
			if err != nil {
				return 0
			}
			return ss.Seq
		}
		if !s.stepUntil(listSent+*countedListOut, func() bool { return k.cur != nil && !k.getting && seqAt() >= k.cur.seq+2 }) {
			t.Logf("seed %d: the twin's session did not write twice more while the listing was out (sent %.3fs)", seed, listSent.Seconds())
			s.delay(list, time.Millisecond)
			continue
		}
		s.log("attack: a read showed %s's new session %s while the listing was out (%.3fs); it has written twice since the last read; the listing (sent %.3fs) returns", v.id, k.cur.session, r0.Seconds(), listSent.Seconds())
		s.delay(list, time.Millisecond)
		out := s.now - listSent
		s.step(s.now + 2*time.Millisecond)
		if k.listed == "" && k.unread == 0 {
			t.Logf("seed %d: the listing did not leave E1 unread", seed)
			continue
		}
		s.log("attack: listing in: listed %q unread %d, view since after its send: %v, cur.seq %d", k.listed, k.unread, !k.cur.since.Before(k.listedSent), k.cur.seq)
		// 6. The next read of the key.
		ghosts := len(c.ghosts)
		s.stepUntil(s.now+2*tm.fi, func() bool { return k.listed == "" && k.unread == 0 && !k.getting })
		held := len(c.ghosts) > ghosts
		s.log("attack: read in: listed %q unread %d; a hold made: %v; gated %v", k.listed, k.unread, held, c.gated)
		if !held {
			excused++
		}
		ta.reached++
		renewedTill := s.leaseEnd(v)
		first, last := s.overlap(v, 3*tm.lt, func() {})
		t.Logf("seed %d: listing out %.3fs; a hold made: %v; V's lease till %.3fs; the era's gate at %.3fs; overlap %.3fs-%.3fs", seed, out.Seconds(), held, renewedTill.Seconds(), cp.realAt(c.allRead.Add(c.lmax)).Seconds(), first.Seconds(), last.Seconds())
		ta.judge(t, s, seed, v, first, last, "a hidden session's put-back renewal listed, written over by a twin's new session read while the listing was out, and excused by that session's later writes")
	}
	t.Logf("%d seeds made no hold for the listed write", excused)
	ta.end(t, "the read after the listing's return, A2 two writes on")
	// Found: all 16 seeds that reach step 6 overlap, by 0.34 s to 1.58 s,
	// the listing out 1.66 to 1.79 s; with the count excuse asking
	// view.since before key.listedSent too, none.
}
