package coord

import (
	"testing"
	"time"
)

// TestHiddenSessionRenewalWrittenOverByANewSessionIsNotForgotten: 4.3's
// last rule (bb50768, bd64e7d) holds every shard for the longest lease
// after a listing showed a write no read returned, on a key with no live
// session in the era's view, only when the read "shows no live session":
// a write listed there may be the renewal of a session the era never read
// (hidden from its start, its last write put back), written over since.
// But the renewal can be written over by a live session as well as by a
// deletion: a twin of the worker's ID (a second process with the same ID)
// opening its session (W1 writes over whatever the key holds), or an
// operator's restore of another session's write. Then the read shows a
// live session of another writer: no `all` ghost is made, the era has no
// ghost of the hidden session (its page was deleted with its object), and
// the hidden session's shards are granted at the gate while its listed
// renewal's lease runs. Section 7's exceptions do not cover it: the hidden
// session's last write is put back once, and a listing showed the write
// it made.
//
// Schedule: TestHiddenSessionRenewalAListingShowsIsNotForgotten's (3
// workers, 6 shards, FrequentInterval 1.5 s, LeaderTimeout 4 s; no random
// fault; an exact-bytes put-back keeps its ETag, as on S3), but in step 3,
// instead of the operator's second delete, a twin of V's ID starts once a
// listing has shown V's renewal, while the read that listing asked for is
// in flight; the twin's W1 writes its session over the renewal before the
// read lands.
func TestHiddenSessionRenewalWrittenOverByANewSessionIsNotForgotten(t *testing.T) {
	tm := hiddenTiming
	var ta tally
	for seed := uint64(1); seed <= 12; seed++ {
		hd, ok := hiddenByDeletion(t, seed) // 1. and 2.
		if !ok {
			continue
		}
		s, v := hd.sim, hd.v
		sent := s.now
		read := hd.heldRead()
		if read == nil {
			continue
		}
		s.startTwin(v)
		s.stepUntil(sent+time.Second, func() bool { return sameForm(hd.o.etag) != hd.renewal })
		s.delay(read, time.Millisecond)
		slow := s.now - sent
		if sameForm(hd.o.etag) == hd.renewal {
			t.Logf("seed %d: the twin did not write over the renewal within 1 s", seed)
			continue
		}
		s.log("attack: a twin of %s wrote %s over the renewal; the read the listing asked for lands %v after it was sent", v.id, hd.o.etag, slow)
		s.step(s.now + 50*time.Millisecond)
		if k := hd.c.keys[v.id]; k.cur == nil || k.readTag != sameForm(hd.o.etag) {
			t.Logf("seed %d: the read did not show the twin's session", seed)
			continue
		}
		t.Logf("seed %d: the read landed %v after it was sent (the simulation's calls take 2-40 ms, slow ones 100-1,200 ms)", seed, slow)
		ta.reached++
		first, last := s.overlap(v, 3*tm.lt, func() {})
		hd.judge(&ta, first, last)
	}
	ta.end(t, "the renewal written over by a twin")
}
