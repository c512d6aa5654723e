package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestGhostWhoseListedRenewalIsWrittenOverByATwinIsNotLedTwice: 4.3's
// last rule lets a ghost wait L from a listing that showed its key at an
// ETag no read returned, unless the read "shows a live session of another
// writer". A second process of the same worker ID (a twin) is such a
// writer, and its W1 writes a new session over whatever the key holds,
// the ghost's own renewal included: the read then shows the twin's new
// session, the ghost's wait is not moved, and, the key having a live
// session in the era's view (the twin's first), neither the listing that
// replaces the renewal nor the read makes the `all` ghost. The shards are
// granted while the ghost's listed renewal still gives it a lease.
// Section 7's fourth exception does not cover it: a listing showed the
// write the session made there.
//
// Schedule (3 workers, 6 shards, every worker FrequentInterval 1 s,
// LeaderTimeout 3 s; no random fault; an exact-bytes put-back keeps its
// ETag, as on S3):
//  1. once the coordinator has read victim V's latest write (session
//     S), V is paused; a twin T of V's ID starts and opens session A
//     over S's write; the coordinator's read of A makes S a ghost
//     (holding V's shards, its wait L = 3 s from that read);
//  2. T is paused; the operator puts S's last write back (same bytes,
//     same ETag); V resumes 60 ms before its lease ends and renews: the
//     write lands, and V is cut off the store (its lease runs on);
//  3. once the coordinator's listing shows that renewal, T resumes: its
//     renewal is refused, it reads the key and opens session A2 over V's
//     renewal (W1);
//  4. the coordinator reads A2 (a live session of another writer): the
//     ghost keeps its wait and ends at the read after it, and V's shards
//     are granted while V leads them under the renewal of step 2.
func TestGhostWhoseListedRenewalIsWrittenOverByATwinIsNotLedTwice(t *testing.T) {
	var ta tally
	for seed := uint64(1); seed <= 12; seed++ {
		a := newAttack(t, seed, 3, 6)
		tm, v, h, c, o, k := attackTiming, a.v, a.h, a.c, a.o, a.k
		// 1. V paused right after a write the coordinator has read.
		a.keepOnceRead()
		a.log("attack: %s paused after %s; a twin of its ID starts", v.id, a.etag)
		tw := a.startTwin(v)
		if !a.stepUntil(a.lease, func() bool { return a.ghost(false) != nil }) || a.now > a.lease-400*time.Millisecond || k.cur == nil {
			t.Logf("seed %d: no ghost early enough in V's lease", seed)
			continue
		}
		ghostUntil := h.realAt(a.ghost(false).until)
		twinSess := k.cur.session
		// 2. T paused; S's last write put back; V renews on it, then is
		// cut off the store.
		a.hold(tw)
		a.restore(o, a.data, a.etag)
		a.log("attack: twin paused (its session %s); %s put back to %s (ghost waits till %.3fs)", twinSess, a.key, a.etag, ghostUntil.Seconds())
		renewal := a.renewOnPutBack(a.lease - 60*time.Millisecond)
		if renewal == "" {
			t.Fatalf("seed %d: %s did not renew on its key put back", seed, v.id)
		}
		// 3. Once a listing has landed at the store showing the renewal,
		// the coordinator's process is paused (its reply waits) and the
		// twin resumes: its renewal is refused, it opens A2 over V's
		// renewal; then the coordinator resumes.
		a.stepUntil(ghostUntil, func() bool { return a.listLanded(c) || k.readTag == renewal || a.ghost(false) == nil })
		if !a.listLanded(c) || k.readTag == renewal || o.etag != a.etag && sameForm(o.etag) != renewal {
			t.Logf("seed %d: the renewal was read, or not listed, before the ghost's wait ended", seed)
			continue
		}
		a.hold(h)
		a.log("attack: a listing showed the renewal; %s (coordinator) paused, the twin resumes", h.id)
		a.release(tw)
		a.stepUntil(a.now+600*time.Millisecond, func() bool { return sameForm(o.etag) != renewal })
		a.release(h)
		if sameForm(o.etag) == renewal {
			// The twin's W1 saw V's session on the key and waits to
			// see it renew (its duplicate check) before writing over.
			t.Logf("seed %d: the twin did not write over the renewal within 600 ms", seed)
			continue
		}
		a.log("attack: the twin wrote %s; %s resumes", o.etag, h.id)
		first, last := a.overlap(v, 3*tm.lt, func() {})
		if h.c != c {
			t.Logf("seed %d: the coordinator lost its election", seed)
			continue
		}
		ta.reached++
		ta.judge(t, a.sim, seed, v, first, last, fmt.Sprintf("ghost's wait till %.3fs, its renewal listed, then a twin's new session over it", ghostUntil.Seconds()))
	}
	ta.end(t, "the twin's new session")
}
