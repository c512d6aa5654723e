package coord

import "testing"

// TestHiddenSessionRenewalAListingShowsIsNotForgotten: section 5, case 3
// argues that a session hidden from an era's start (its object deleted)
// and put back renews before the gate listing, "which shows the key at an
// ETag no read of the era returned. The era reads it before its first
// grant, and S, first read before the gate, holds every shard". A listing
// that shows the renewal asks for a read of the key, but when the key is
// deleted again before that read lands, the read shows nothing and the
// renewal the listing showed is forgotten: the era has no view and no
// ghost of the session (its page was deleted with its object, so no page
// of an earlier era names it), the gate listing no longer shows the key,
// and the era grants the session's shards at its gate while the renewal's
// lease runs. Section 7's fourth exception does not cover it: a listing
// showed the write the session made there.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1.5 s, LeaderTimeout
// 4 s; no random fault; an exact-bytes put-back keeps its ETag, as on S3):
//  1. right after victim V's write lands, V is paused, the operator
//     deletes workers/V and assign/V, and the coordinator resigns;
//  2. once the next era has read every key of its first listing, 100 ms
//     before V's lease ends, workers/V is put back (same bytes, same
//     ETag) and V resumes: its renewal lands, and V is cut off the store
//     (its lease runs on);
//  3. a listing of the era shows the renewal; before the read it asks
//     for lands, the operator deletes workers/V again.
//
// Seeds 1 to 12 are tried (the seed sets the phase of the next era).
func TestHiddenSessionRenewalAListingShowsIsNotForgotten(t *testing.T) {
	tm := hiddenTiming
	var ta tally
	for seed := uint64(1); seed <= 12; seed++ {
		hd, ok := hiddenByDeletion(t, seed) // 1. and 2.
		if !ok {
			continue
		}
		s, v := hd.sim, hd.v
		// 3.
		s.deleteKey(hd.key)
		s.log("attack: %s deleted again before the read the listing asked for lands", hd.key)
		ta.reached++
		first, last := s.overlap(v, 3*tm.lt, func() {})
		hd.judge(&ta, first, last)
	}
	ta.end(t, "the key deleted again after a listing showed V's renewal")
}

// TestRosterSkippedSessionRenewalAListingShowsIsNotForgotten: the same on
// the roster's path (4.7), where the session's page need not be deleted:
// the era does not read a key its roster lets it skip, nor its page, so
// it makes no ghost of the session the page names; the put-back session's
// renewal is listed, the key is put back to the closed write before the
// read lands, and the read shows only that closed session.
//
// Schedule (as TestRosterSkippedSessionPutBackIsNotLedTwice, then as
// above): V leaves (its closed write C goes to the roster) and starts
// again with its ID (session S2); right after a write of S2 lands, V is
// paused, the roster and workers/V are put back to C, and the
// coordinator resigns; once the next era has read its first listing's
// keys, 100 ms before S2's lease ends, S2's last write is put back and V
// resumes: its renewal lands, V is cut off the store; a listing shows the
// renewal; before the read it asks for lands, workers/V is put back to C.
func TestRosterSkippedSessionRenewalAListingShowsIsNotForgotten(t *testing.T) {
	tm := hiddenTiming
	var ta tally
	for seed := uint64(1); seed <= 12; seed++ {
		s := hiddenSim(t, seed)
		v := s.victim()
		closed, ok := s.leaveAndReturn(t, seed, v)
		if !ok {
			continue
		}
		key := "workers/" + v.id
		hd, ok := hideAndRenew(t, s, seed, v, "roster and "+key+" put back to the closed write "+closed.tag, closed.putBack, true)
		if !ok {
			continue
		}
		closed.putBackKey()
		s.log("attack: %s put back to the closed write before the read the listing asked for lands", key)
		ta.reached++
		first, last := s.overlap(v, 3*tm.lt, func() {})
		hd.judge(&ta, first, last)
	}
	ta.end(t, "the key put back to the closed write after a listing showed V's renewal")
}
