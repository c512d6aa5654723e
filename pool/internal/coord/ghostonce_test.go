package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestGhostWaitMovedByItsTwinsRacingRenewalStillCountsItsListedRenewal:
// a ghost's key held by another writer's live session (a twin) sees that
// writer's own renewal race a read (a write a listing showed, a later one
// read: accounted for by the writer's seq), and then the ghost's last
// write put back once, renewed, listed, and written over by the other
// writer's next session before the read. That listed renewal must still
// move the ghost's wait (4.3): the ghost's shards are not granted while it
// gives the ghost a lease. (A rule that moved a ghost's wait only once
// beside another writer let the race spend it.)
//
// Schedule (3 workers, 6 shards, every worker FrequentInterval 1 s,
// LeaderTimeout 3 s; no random fault; an exact-bytes put-back keeps its
// ETag, as on S3):
//  1. victim V (session S) is paused right after a write lands, 200-300 ms
//     before the coordinator's next listing; a twin T of V's ID (a second
//     process with the same ID) opens session A over S's write; the
//     coordinator's read of A makes S a ghost (wait 3 s from that read)
//     with A in view;
//  2. the innocent race: T renews; the next listing shows that write; the
//     read it asks for lands after T's next write (64 ms to 986 ms after
//     it was sent: T writes again on taking a page, or renews; the
//     simulation's slow calls take 100-1,200 ms): the read returns T's
//     later write (its seq accounts for the listed one);
//  3. T is paused; S's last write is put back (the one put-back); V
//     resumes 60 ms before its lease ends and renews: the write lands,
//     and V is cut off the store (its lease runs on);
//  4. once a listing has landed showing that renewal, the coordinator is
//     paused a moment while T's process restarts (its supervisor): W1
//     writes a new session A2 over V's renewal; the coordinator resumes
//     and reads A2: the listed renewal is none of A's writes, so the
//     ghost's wait moves to a lease from that listing.
//
// Under a rule that moved the wait only once beside another writer, the
// ghost ended at the race's wait and V's shards were granted (to A2)
// while V led them: 2 of 6 seeds reaching step 4 overlapped.
func TestGhostWaitMovedByItsTwinsRacingRenewalStillCountsItsListedRenewal(t *testing.T) {
	var ta tally
	for seed := uint64(1); seed <= 24; seed++ {
		a := newAttack(t, seed, 3, 6)
		tm, v, h, c, o, k := attackTiming, a.v, a.h, a.c, a.o, a.k
		// 1. V paused right after a write lands, 200-300 ms before the
		// coordinator's next listing, so that the ghost is made early in
		// V's lease; a twin opens a session over it.
		tw := a.twinGhost()
		if tw == nil {
			t.Logf("seed %d: V's writes never fell just before a listing", seed)
			continue
		}
		if a.ghost(false) == nil || k.cur == nil {
			t.Logf("seed %d: no ghost in V's lease", seed)
			continue
		}
		// 2. The innocent race: T's own renewal lands between a listing
		// and the read it asks for.
		a.release(tw)
		a.stepUntil(a.lease, func() bool { return sameForm(o.etag) != k.readTag })
		a.hold(tw)
		listedTag := sameForm(o.etag)
		a.stepUntil(a.lease, func() bool { return k.listed == listedTag && k.getting })
		read := a.inFlight("get "+a.key+" lands", nil)
		if read == nil {
			t.Logf("seed %d: no read of the listed write in flight", seed)
			continue
		}
		sent := a.now
		a.delay(read, time.Hour)
		a.release(tw)
		a.stepUntil(a.lease, func() bool { return sameForm(o.etag) != listedTag })
		a.hold(tw)
		a.delay(read, time.Millisecond)
		slow := a.now - sent
		a.log("attack: a listing showed the twin's %s; its read landed %v later, after the twin's renewal %s", listedTag, slow, o.etag)
		if slow > 1200*time.Millisecond {
			t.Logf("seed %d: the read would have to be slower than the simulation's slowest call (%v)", seed, slow)
			continue
		}
		a.stepUntil(a.lease, func() bool { return k.readTag == sameForm(o.etag) })
		raced := k.readTag == sameForm(o.etag) && k.readTag != listedTag
		g := a.ghost(false)
		if g == nil || !raced || a.now > a.lease-300*time.Millisecond {
			t.Logf("seed %d: no race early enough in V's lease", seed)
			continue
		}
		ghostUntil := h.realAt(g.until)
		twinSess := k.cur.session
		// 3. One put-back of S's last write; V renews on it.
		a.restore(o, a.data, a.etag)
		a.log("attack: twin paused (its session %s); %s put back to %s (ghost waits till %.3fs)", twinSess, a.key, a.etag, ghostUntil.Seconds())
		renewal := a.renewOnPutBack(a.lease - 60*time.Millisecond)
		if renewal == "" {
			t.Fatalf("seed %d: %s did not renew on its key put back", seed, v.id)
		}
		// 4. A listing shows the renewal; the twin writes over it before
		// the coordinator reads.
		a.stepUntil(ghostUntil+3*tm.lt, func() bool { return a.listLanded(c) || k.readTag == renewal || a.ghost(false) == nil })
		if !a.listLanded(c) || k.readTag == renewal || sameForm(o.etag) != renewal {
			t.Logf("seed %d: the renewal was read, or not listed, before the ghost's wait ended", seed)
			continue
		}
		a.hold(h)
		a.log("attack: a listing showed the renewal; %s (coordinator) paused, the twin restarts", h.id)
		a.kill(tw) // the twin's process restarts (its supervisor): W1 writes over what the key holds
		a.release(tw)
		a.start(tw)
		a.stepUntil(a.now+600*time.Millisecond, func() bool { return sameForm(o.etag) != renewal })
		a.release(h)
		if sameForm(o.etag) == renewal {
			t.Logf("seed %d: the twin did not write over the renewal within 600 ms", seed)
			continue
		}
		a.log("attack: the twin wrote %s; %s resumes", o.etag, h.id)
		first, last := a.overlap(v, 3*tm.lt, func() {})
		t.Logf("seed %d: the read raced for %v; V's renewal gives it a lease till %.3fs; the ghost's wait ends %.3fs", seed, slow, a.leaseEnd(v).Seconds(), ghostUntil.Seconds())
		if h.c != c {
			t.Logf("seed %d: the coordinator lost its election", seed)
			continue
		}
		ta.reached++
		ta.judge(t, a.sim, seed, v, first, last, fmt.Sprintf("one put-back after its twin's racing renewal; the ghost's wait till %.3fs", ghostUntil.Seconds()))
	}
	ta.end(t, "the twin's new session after the race")
}
