package coord

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

// TestGhostWhosePutBackAStaleListingShowedIsNotLedTwice (fifteenth
// review, on 19fffc0's listing.go entry rule): "a listing sent before a
// key's last read returned that shows what that read, or the read before,
// returned shows no new write there". On a store whose ETags hash the
// bytes, what such a listing shows may be the operator's put-back of the
// tag the read before returned: the ghost's own last write. Before
// 19fffc0 that listing made the key "listed" (the ghost's key is haunted:
// read it); the next read, showing the key deleted again, counted a
// listed write no read returned and moved the ghost's wait a lease on,
// past the renewal the ghost made on its put-back. Now the listing is
// taken for an older view of the key, the ghost ends at its deciding
// read, and its shards are granted while that renewal's lease runs.
//
// Whether this is section 7's fourth exception depends on its words "no
// listing ... in between showing the write the session made there": a
// listing did show the session's write there (put back), though not the
// renewal made on it.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// calm; an exact-bytes put-back keeps its ETag; no twin):
//  1. V paused after a write W0 the era read; the operator deletes V's
//     key; the era's read R1 of the absence is slow: it lands at once but
//     its landing waits until the next listing L1 has been sent; L1's
//     landing is held;
//  2. R1 lands: V's session S is a ghost (readTag "");
//  3. the operator puts W0 back; L1 lands (showing W0) and returns;
//  4. V resumes, renews on W0 (W1) and is cut off the store; the operator
//     deletes the key again at once; the ghost's deciding read shows the
//     absence and ends the ghost.
var stalePutBack = flag.Duration("stalelisting.putback", 150*time.Millisecond, "TestGhostWhosePutBackAStaleListingShowedIsNotLedTwice: the put-back comes this long before V's lease ends")

var staleDebug = flag.Bool("stalelisting.debug", false, "TestGhostWhosePutBackAStaleListingShowedIsNotLedTwice: log each seed's ledger")

func TestGhostWhosePutBackAStaleListingShowedIsNotLedTwice(t *testing.T) {
	var ta tally
	for seed := uint64(1); seed <= 20; seed++ {
		a := newAttack(t, seed, 3, 6)
		v, c, k := a.v, a.c, a.k
		lh := listHolder{s: a.sim}
		// 1.
		a.keepOnceRead()
		a.deleteKey(a.key)
		a.log("attack: %s paused, %s deleted (was %s)", v.id, a.key, a.etag)
		var r1 *event
		a.stepUntil(a.lease, func() bool {
			r1 = a.inFlight("get "+a.key+" lands", nil)
			return r1 != nil
		})
		if r1 == nil {
			t.Logf("seed %d: no read of the deleted key", seed)
			continue
		}
		a.delay(r1, time.Hour)
		sent := c.listSent
		a.stepUntil(a.lease, func() bool { return c.listing && c.listSent.After(sent) })
		if !c.listing || !c.listSent.After(sent) {
			t.Logf("seed %d: no listing sent", seed)
			continue
		}
		lh.hold()
		l1Sent := c.listSent
		// 2.
		a.delay(r1, time.Millisecond)
		a.stepUntil(a.lease, func() bool { lh.hold(); return a.ghost(false) != nil })
		g := a.ghost(false)
		if g == nil || !c.listing || c.listSent != l1Sent || a.now > a.lease-*stalePutBack-100*time.Millisecond {
			t.Logf("seed %d: no ghost while L1 was out, early enough", seed)
			continue
		}
		ghostUntil := a.h.realAt(g.until)
		// 3. Late in V's lease, the put-back.
		a.stepUntil(a.lease-*stalePutBack, func() bool { lh.hold(); return false })
		a.restore(a.o, a.data, a.etag)
		lh.free()
		a.stepUntil(a.lease, func() bool { return !c.listing })
		a.log("attack: %s put back to W0 %s; L1 came back: listed %q, sight %q", a.key, a.etag, k.listed, k.sight)
		if c.listing || c.listSent != l1Sent {
			t.Logf("seed %d: L1 did not come back", seed)
			continue
		}
		// 4.
		if a.renewOnPutBack(a.now) == "" {
			t.Logf("seed %d: V did not renew on W0 put back", seed)
			continue
		}
		a.deleteKey(a.key)
		a.log("attack: %s deleted again at once; the ghost waits till %.3fs", a.key, ghostUntil.Seconds())
		a.step(a.now + 150*time.Millisecond) // V's reply
		a.staleVerdict(&ta, a.leaseEnd(v), ghostUntil)
	}
	ta.end(t, "the renewal on the put-back a stale listing showed")
}

// TestGhostEndedByASlowStaleListingOfItsPutBackIsNotLedTwice (fifteenth
// review): the same rule, through 19fffc0's `ending`: the ghost's
// deciding read returns while a listing is out, and that listing, sent
// before the read returned, comes back showing the ghost's last write put
// back (the tag of the read before): "nothing unread on its key", so
// ended() ends the ghost. Before 19fffc0 the read was not sent while a
// listing was out, and the listing's W0 was a listed write the next read
// (the key deleted again) counted: the wait moved a lease on.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// calm; an exact-bytes put-back keeps its ETag; no twin):
//  1. V paused after a write W0 the era read; the operator deletes V's
//     key; the era reads the absence: V's session S is a ghost;
//  2. the next listing L1 is sent; it is slow: it lands only after
//     3, and its reply is held until the ghost's deciding read returns
//     (L1 out about 2.2 s);
//  3. late in V's lease the operator puts W0 back; L1 lands (W0); V
//     resumes, renews on W0 (W1) and is cut off the store; the operator
//     deletes the key again at once;
//  4. the ghost's wait ends with L1 out: the deciding read is sent, shows
//     the absence and returns (ending); L1 comes back showing W0, taken
//     for the older view of the key: the ghost ends while W1's lease runs.
func TestGhostEndedByASlowStaleListingOfItsPutBackIsNotLedTwice(t *testing.T) {
	var ta tally
	for seed := uint64(1); seed <= 20; seed++ {
		a := newAttack(t, seed, 3, 6)
		v, c, k := a.v, a.c, a.k
		lh := listHolder{s: a.sim}
		// 1.
		a.keepOnceRead()
		a.deleteKey(a.key)
		a.log("attack: %s paused, %s deleted (was %s)", v.id, a.key, a.etag)
		if !a.stepUntil(a.lease, func() bool { return a.ghost(false) != nil }) {
			t.Logf("seed %d: no ghost", seed)
			continue
		}
		g := a.ghost(false)
		ghostUntil := a.h.realAt(g.until)
		// 2.
		made := a.now
		a.stepUntil(a.lease-*stalePutBack-50*time.Millisecond, func() bool { return c.listing && a.h.realAt(c.listSent) > made })
		if !c.listing || a.h.realAt(c.listSent) <= made {
			t.Logf("seed %d: no listing sent between the ghost and the put-back", seed)
			continue
		}
		l1Sent := c.listSent
		a.stepUntil(a.lease-*stalePutBack, func() bool { lh.hold(); return false })
		if len(lh.held) == 0 {
			t.Logf("seed %d: L1 landed before it could be held", seed)
			continue
		}
		// 3.
		a.restore(a.o, a.data, a.etag)
		lh.free()
		a.stepUntil(a.now+10*time.Millisecond, func() bool { return a.inFlight("list reply", a.h) != nil })
		reply := a.inFlight("list reply", a.h)
		if reply == nil {
			t.Logf("seed %d: no reply of L1 on its way", seed)
			continue
		}
		a.delay(reply, time.Hour)
		if a.renewOnPutBack(a.now) == "" {
			t.Logf("seed %d: V did not renew on W0 put back", seed)
			continue
		}
		a.deleteKey(a.key)
		a.log("attack: %s deleted again at once; L1's reply held; the ghost waits till %.3fs", a.key, ghostUntil.Seconds())
		a.step(a.now + 150*time.Millisecond) // V's reply
		w1Lease := a.leaseEnd(v)
		// 4.
		if !a.stepUntil(ghostUntil+2*time.Second, func() bool { g := a.ghost(false); return g == nil || g.ending }) || a.ghost(false) == nil {
			t.Logf("seed %d: the ghost did not reach ending", seed)
			continue
		}
		a.delay(reply, time.Millisecond)
		a.stepUntil(a.now+time.Second, func() bool { return !c.listing })
		a.log("attack: L1 (out %.3fs) came back: listed %q, unread %d; ghost ended: %v", (a.now - a.h.realAt(l1Sent)).Seconds(), k.listed, k.unread, a.ghost(false) == nil)
		a.staleVerdict(&ta, w1Lease, ghostUntil)
	}
	ta.end(t, "the slow listing's return")
}

// staleVerdict watches for two live owners of the victim's shards, and
// counts the seed if the coordinator stayed the same.
func (a *attack) staleVerdict(ta *tally, w1Lease, ghostUntil time.Duration) {
	first, last := a.overlap(a.v, 3*attackTiming.lt, func() {})
	if a.holder != a.h || a.h.c != a.c {
		a.t.Logf("seed %d: the coordinator changed", a.seed)
		return
	}
	ta.reached++
	if *staleDebug {
		a.t.Logf("seed %d: ledger tail:\n%s", a.seed, tail(a.ledger.String(), 400))
	}
	ta.judge(a.t, a.sim, a.seed, a.v, first, last, fmt.Sprintf("ghost's wait till %.3fs; W1's lease till %.3fs", ghostUntil.Seconds(), w1Lease.Seconds()))
}
