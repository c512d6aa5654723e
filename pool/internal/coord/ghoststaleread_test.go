package coord

import (
	"testing"
	"time"
)

// TestGhostRenewalAfterAStaleReadOfItsListedRenewalIsNotForgotten: 4.3
// moves a ghost's wait, for a write a listing showed that no read
// returned, to a lease from the return of the read that next lands, and
// clears the listed write ("every such write landed before it"). That
// holds for a read SENT after the listing. Here the read that returns
// first was sent before the put-back (it shows the twin's session in view,
// at the seq the era had read): the ghost waits a lease from its return,
// k.listed is cleared; the read the listing asked for is slow, and the
// ghost renews again (never listed) after the stale read returned, before
// its twin's new session writes over it. The slow read shows the twin's
// new session with nothing listed unread: the wait is not moved, and the
// ghost's last renewal's lease outlives it. One put-back.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// calm, exact-bytes put-back keeps its ETag):
//  1. V (session S) held right after a write lands; twin T opens A over
//     it; the coordinator reads A (S a ghost, A in view); T held;
//  2. a coordinator read of V's key lands (shows A); its reply is held;
//  3. S's last write put back; V renews (E1); a listing shows E1;
//  4. the held reply returns (A, same seq); the read the listing asked
//     for is held in flight (at most -ghost.hold), and so are listings;
//  5. V renews on (unlisted) until 250 ms before the hold ends, then is
//     cut off (lease runs on); T restarts: A2 over V's last renewal;
//  6. the read and the listings land: all show A2.
func TestGhostRenewalAfterAStaleReadOfItsListedRenewalIsNotForgotten(t *testing.T) {
	var ta tally
	for seed := uint64(1); seed <= 40; seed++ {
		a := newAttack(t, seed, 3, 6)
		tm, v, h, c, o, k := attackTiming, a.v, a.h, a.c, a.o, a.k
		// 1.
		tw := a.twinGhost()
		if tw == nil {
			continue
		}
		if a.ghost(false) == nil || k.cur == nil || a.now > a.lease-400*time.Millisecond {
			t.Logf("seed %d: no ghost early in V's lease", seed)
			continue
		}
		// 2. A read of the key lands (A), its reply held.
		a.stepUntil(a.lease, func() bool { return !k.getting })
		k.wantGet = true // as the listing's read-in-turn would
		var stale *event
		for stale == nil && a.now < a.lease-200*time.Millisecond {
			a.step(a.now + time.Millisecond)
			stale = a.inFlight("get "+a.key+" reply", h)
		}
		if stale == nil || o.etag == a.etag {
			t.Logf("seed %d: no read landed in time", seed)
			continue
		}
		staleLanded := a.now
		a.delay(stale, time.Hour)
		// 3. One put-back; V renews on it; a listing shows E1.
		a.restore(o, a.data, a.etag)
		a.log("attack: %s put back to %s; %s resumes; stale read reply held", a.key, a.etag, v.id)
		a.release(v)
		if !a.stepUntil(a.lease, func() bool { return o.etag != a.etag }) {
			t.Logf("seed %d: V did not renew on its key put back", seed)
			continue
		}
		e1 := sameForm(o.etag)
		a.stepUntil(a.lease+3*tm.lt, func() bool { return k.listed == e1 || sameForm(o.etag) != e1 })
		if k.listed != e1 || sameForm(o.etag) != e1 {
			t.Logf("seed %d: E1 not listed before V renewed again", seed)
			continue
		}
		listedAt := a.now
		// 4. The stale reply returns; the next read is held in flight.
		a.delay(stale, time.Millisecond)
		var read *event
		for read == nil && a.now < listedAt+300*time.Millisecond {
			a.step(a.now + time.Millisecond)
			read = a.inFlight("get "+a.key+" lands", nil)
		}
		if read == nil {
			t.Logf("seed %d: no read after the stale one (listed %q)", seed, k.listed)
			continue
		}
		staleBack := a.now
		a.delay(read, time.Hour)
		// 5. and 6.
		if _, short := a.renewThenTwinOver(tw, read, e1, listedAt, *ghostHold, true); short != "" {
			t.Logf("seed %d: %s", seed, short)
			continue
		}
		vLease := a.leaseEnd(v)
		a.step(a.now + 100*time.Millisecond)
		if g := a.ghost(false); g != nil {
			t.Logf("seed %d: after the slow read: ghost S waits till %.3fs (stale read landed %.3fs, back %.3fs), V's last lease till %.3fs", seed, h.realAt(g.until).Seconds(), staleLanded.Seconds(), staleBack.Seconds(), vLease.Seconds())
		}
		first, last := a.overlap(v, 3*tm.lt, func() {})
		if h.c != c {
			continue
		}
		ta.reached++
		t.Logf("seed %d: stale read back %.3fs after the listing; V's lease till %.3fs; first overlap %.3fs", seed, (staleBack - listedAt).Seconds(), a.leaseEnd(v).Seconds(), first.Seconds())
		ta.judge(t, a.sim, seed, v, first, last, "one put-back; a stale read cleared the listed renewal")
	}
	ta.end(t, "the twin's write")
}
