package coord

import (
	"testing"
	"time"
)

// TestHiddenSessionRenewalListedOverBeforeItsReadIsNotForgotten: 4.3's
// last rule makes the `all` ghost (every shard held for the longest lease
// from the listing) only in SessionRead, for the write the key's LAST
// listing showed. When the next listing replaces that ETag before the
// read returns, unreadListed runs, but it only moves existing ghosts'
// waits: a hidden session (its object and page deleted before the era
// began, its last write put back) has no ghost, so its renewal is
// forgotten: the next listing shows the key deleted again (k.listed
// becomes ""), the slow read then shows the absence with nothing listed
// unread, and the session's shards are granted at the gate while the
// renewal's lease runs. Not section 7's: one put-back, and a listing
// showed the write.
//
// Schedule: TestHiddenSessionRenewalAListingShowsIsNotForgotten's (3
// workers, 6 shards, FrequentInterval 1.5 s, LeaderTimeout 4 s; no random
// fault; an exact-bytes put-back keeps its ETag, as on S3), but the read
// that the listing showing V's renewal asks for is slow: it lands only
// once the next listing (showing the operator's second delete) has been
// taken in, about a FrequentInterval after it was sent (the executor's
// calls time out only after a FrequentInterval).
func TestHiddenSessionRenewalListedOverBeforeItsReadIsNotForgotten(t *testing.T) {
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
		s.deleteKey(hd.key)
		k := hd.k
		s.stepUntil(sent+2*tm.fi, func() bool { return k.listed != hd.renewal || s.holder != hd.cp })
		s.delay(read, time.Millisecond)
		slow := s.now - sent
		if k.listed == hd.renewal || slow >= tm.fi {
			t.Logf("seed %d: no listing replaced the renewal's within a FrequentInterval of the read's send (%v)", seed, slow)
			continue
		}
		s.log("attack: %s deleted again; the next listing taken in; the read the first asked for lands %v after it was sent", hd.key, slow)
		t.Logf("seed %d: the read landed %v after it was sent (the coordinator's calls time out after a FrequentInterval, %v)", seed, slow, tm.fi)
		ta.reached++
		first, last := s.overlap(v, 3*tm.lt, func() {})
		hd.judge(&ta, first, last)
	}
	ta.end(t, "the renewal listed over before its read")
}
