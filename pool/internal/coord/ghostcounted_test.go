package coord

import (
	"container/heap"
	"fmt"
	"testing"
	"time"
)

// TestGhostsListedRenewalIsNotExcusedByTheTwinsLaterWrites (fourteenth
// review): the ghost's side of TestHiddenSessionRenewalWrittenOverIsNotExcusedByTheTwinsLaterWrites
// (hiddencounted_test.go). The schedule of
// TestGhostReleasedBeforeASlowListingOfItsRenewalReturnsIsNotLedTwice
// (ghostslowlist_test.go, "twin's new session"), to its step 5: the
// ghost's put-back renewal E1 is listed by a listing whose reply is
// slow; the twin's new session A2 writes over it; the read sent at the
// ghost's wait returns A2 while the listing is out (the thirteenth
// review's mend: the ghost is kept, its key read again once the listing
// is in). Then:
//  6. the listing stays out until A2 has written twice since the era
//     last read it (the listing out at most 2.4 s from its send: two
//     LISTs, each as slow as the simulation's slowest call);
//  7. the listing returns (E1 listed); the read it asks for shows A2
//     two writes on: SessionRead's count of writes (s.Seq-cur.seq above
//     the one write listed) says the listed write may have been A2's,
//     though A2 was first read after that listing was sent and its
//     writes all came after E1 was written over. Nothing unread: the
//     ghost ends, and its shards are granted while its renewal's lease
//     runs.
//
// One put-back (exact bytes, S3), a twin, a slow listing reply and
// slow reads (each under 1.2 s); the ghost's worker then cut off the
// store (its lease runs on). Before the put-back the era reads the
// twin's last write if only a listing showed it (as a read in turn
// would; else that write, unread, extends the ghost's wait by chance).
// FrequentInterval 1 s, LeaderTimeout 5 s (-counted.lt): at 3 s and 4 s
// the ghost ends too, within V's lease, but the grants reach a worker
// after it. Found: 5 of the 8 seeds that reach step 7 (of 300) overlap,
// by 1.1 to 1.4 s; with the count excuse asking view.since before
// key.listedSent too, none.
func TestGhostsListedRenewalIsNotExcusedByTheTwinsLaterWrites(t *testing.T) {
	countedListingSchedule(t, false, false)
}

// countedListingSchedule is slowListingSchedule (ghostslowlist_test.go)
// with the listing held until the twin's session wrote twice more.
func countedListingSchedule(t *testing.T, noTwin, deleted bool) {
	reached, overlapped := 0, 0
	for seed := uint64(1); seed <= *countedSeeds; seed++ {
		tm := timing{fi: time.Second, lt: *countedLT}
		s := newSim(seed, simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute})
		s.calm, s.keep = true, true
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced after a cold start", seed)
		}
		s.step(s.now + 2*tm.lt)
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		h := s.holder
		c := h.c
		key := "workers/" + v.id
		o := s.store[key]
		prev := o.etag
		for s.now < 60*time.Second {
			s.step(s.now + time.Millisecond)
			if o.etag == prev || o.etag != v.w.etag || v.w.inflight != nil {
				continue
			}
			break
		}
		if o.etag != v.w.etag || v.w.inflight != nil {
			continue
		}
		// 1.
		s.hold(v)
		data, etag := o.data, o.etag
		sess := v.w.sess
		leaseEnd := s.leaseEnd(v)
		tw := &proc{id: v.id, n: len(s.procs), rate: 1, off: v.off + time.Minute, tm: v.tm, calls: map[string]int{}, twin: true}
		if noTwin {
			s.etags++
			o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
			o.hist = append(o.hist, nil)
			s.log("attack: operator deletes %s", key)
		} else {
			s.procs = append(s.procs, tw)
			s.start(tw)
		}
		ghostOf := func() *ghost {
			for i := range c.ghosts {
				if g := &c.ghosts[i]; g.id == v.id && g.session == sess && !g.done {
					return g
				}
			}
			return nil
		}
		for ghostOf() == nil && s.now < leaseEnd {
			s.step(s.now + time.Millisecond)
		}
		g := ghostOf()
		if g == nil || s.now > leaseEnd-400*time.Millisecond || h.c != c {
			t.Logf("seed %d: no ghost early in V's lease", seed)
			continue
		}
		until := h.realAt(g.until)
		// 2. Late in S's lease (as late as V can still renew), one put-back.
		// 400 ms before it the twin is held, and the era reads its last
		// write if a listing showed it and no read has (as a read in turn
		// would): nothing is left unread on the key but what follows.
		for s.now < leaseEnd-*slowListPutBack-400*time.Millisecond {
			s.step(s.now + time.Millisecond)
		}
		k := c.keys[v.id]
		if !noTwin {
			s.hold(tw)
			s.stepUntil(s.now+100*time.Millisecond, func() bool { return tw.w.inflight == nil })
			if k.listed != "" && k.listed != sameForm(o.etag) || k.unread > 0 {
				k.wantGet = true
			}
		}
		for s.now < leaseEnd-*slowListPutBack {
			s.step(s.now + time.Millisecond)
		}
		if k.listed != "" && k.listed != sameForm(o.etag) || k.unread > 0 {
			t.Logf("seed %d: a write of the twin's left unread before the put-back", seed)
			continue
		}
		if ghostOf() == nil {
			t.Logf("seed %d: the ghost ended before the put-back", seed)
			continue
		}
		if !noTwin {
			s.hold(tw)
		}
		o.data, o.etag = data, etag
		o.hist = append(o.hist, data)
		s.log("attack: %s put back to %s; %s resumes; %s (twin) held; the ghost waits till %.3fs", key, etag, v.id, tw.id, until.Seconds())
		s.release(v)
		putBack := s.now
		// Every coordinator read of the key lands only once A2 is written
		// (slow reads): before, it would show V's renewal (S live again).
		var reads []*event
		heldAt := map[*event]time.Duration{} // when each held read would have landed
		var twinRead *event                  // the twin's own read of its key, not held
		holdReads := func() {
			for _, e := range s.q {
				if e.what == "get "+key+" lands" && e.p == nil && e != twinRead && e.at < s.now+time.Minute {
					heldAt[e] = e.at
					e.at = s.now + time.Hour
					reads = append(reads, e)
					heap.Init(&s.q)
				}
			}
		}
		holdReads()
		for (o.etag == etag || o.etag != v.w.etag) && s.now < leaseEnd+200*time.Millisecond {
			s.step(s.now + time.Millisecond)
			holdReads()
		}
		if o.etag == etag || o.etag != v.w.etag {
			t.Logf("seed %d: V did not renew on its key put back:\n%s", seed, tail(s.ledger.String(), 30))
			continue
		}
		// 3. A listing lands while the key holds V's write; its reply is slow.
		var list *event
		for list == nil && s.now < putBack+time.Second+300*time.Millisecond {
			s.step(s.now + time.Millisecond)
			holdReads()
			for _, e := range s.q {
				if e.what == "list reply" && e.p == h && e.at < s.now+time.Minute {
					list = e
				}
			}
		}
		if list == nil || !isSession(o.data, v.id, sess) {
			t.Logf("seed %d: no listing landed on V's renewal", seed)
			continue
		}
		list.at = s.now + time.Hour
		heap.Init(&s.q)
		listLanded := s.now
		// 4. V renews once more, then is cut off; T writes A2 over it.
		e1 := o.etag
		for o.etag == e1 && s.now < listLanded+*slowListRenew {
			s.step(s.now + time.Millisecond)
			holdReads()
		}
		for v.w.inflight != nil && s.now < listLanded+*slowListRenew+100*time.Millisecond {
			s.step(s.now + time.Millisecond)
			holdReads()
		}
		v.cutTill = s.now + time.Hour
		if deleted {
			s.etags++
			o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
			o.hist = append(o.hist, nil)
			s.log("attack: operator deletes %s again", key)
		} else {
			s.kill(tw)
			s.release(tw)
			s.start(tw)
		}
		for _, e := range s.q {
			if e.what == "get "+key+" lands" && e.p == nil && (twinRead == nil || e.seq > twinRead.seq) {
				twinRead = e
			}
		}
		last := o.etag
		for !deleted && isSession(o.data, v.id, sess) && s.now < listLanded+1200*time.Millisecond {
			s.step(s.now + time.Millisecond)
			holdReads()
		}
		if isSession(o.data, v.id, sess) {
			t.Logf("seed %d: the twin did not write over V's renewal in time:\n%s", seed, tail(s.ledger.String(), 40))
			continue
		}
		s.log("attack: V's last write %s written over (%q); the held reads land", last, o.etag)
		// 5. The held reads land now; the listing's reply waits for the
		// read sent at the ghost's wait to return (at most 1.2 s after
		// the listing landed).
		held := time.Duration(0)
		for _, e := range reads {
			e.at = s.now + time.Millisecond
			held = max(held, e.at-heldAt[e])
		}
		heap.Init(&s.q)
		if held > *slowListMaxHold {
			t.Logf("seed %d: a read would be held %.3fs, over -slowlist.maxhold", seed, held.Seconds())
			list.at = s.now + time.Millisecond
			heap.Init(&s.q)
			continue
		}
		for ghostOf() != nil && s.now < listLanded+1200*time.Millisecond {
			s.step(s.now + time.Millisecond)
		}
		if h.c != c || s.now < until+100*time.Millisecond && ghostOf() != nil {
			// The read the ghost's wait asks for did not return while the
			// listing was out: the schedule was not reached.
			t.Logf("seed %d: the ghost's wait (till %.3fs) not over while the listing (landed %.3fs) was out", seed, until.Seconds(), listLanded.Seconds())
			list.at = s.now + time.Millisecond
			heap.Init(&s.q)
			continue
		}
		// 6. The listing stays out until the twin's new session has
		// written twice since the era last read it (the listing at most
		// -counted.listout from its send).
		listSent := h.realAt(c.listSent)
		seqAt := func() uint64 {
			ss, err := ParseSession(o.data, v.id)
			if err != nil || deleted {
				return 0
			}
			return ss.Seq
		}
		if !s.stepUntil(listSent+*countedListOut, func() bool { return k.cur != nil && !k.getting && seqAt() >= k.cur.seq+2 }) || ghostOf() == nil {
			t.Logf("seed %d: the twin's session did not write twice more while the listing was out (sent %.3fs), or the ghost ended", seed, listSent.Seconds())
			list.at = s.now + time.Millisecond
			heap.Init(&s.q)
			continue
		}
		s.log("attack: the ghost %s (ended: %v) read past its wait; the twin's session wrote twice since the last read; the listing (landed %.3fs) returns now", sess, ghostOf() == nil, listLanded.Seconds())
		list.at = s.now + time.Millisecond
		heap.Init(&s.q)
		out := list.at - listSent
		listBack := list.at
		reached++
		vLease := s.leaseEnd(v)
		endedBy := false
		first, lastO := s.overlap(v, 3*tm.lt, func() {
			if s.now <= vLease && ghostOf() == nil {
				endedBy = true
			}
		})
		if h.c != c {
			reached--
			continue
		}
		t.Logf("seed %d: listing out %.3fs; ghost ended by %.3fs: %v; listing landed %.3fs, its reply held till %.3fs; the ghost's wait till %.3fs; reads held up to %.3fs; V's lease till %.3fs; overlap %.3fs-%.3fs", seed, out.Seconds(), vLease.Seconds(), endedBy, listLanded.Seconds(), listBack.Seconds(), until.Seconds(), held.Seconds(), vLease.Seconds(), first.Seconds(), lastO.Seconds())
		if first > 0 || len(s.fails) > 0 {
			if overlapped == 0 {
				t.Logf("seed %d: ledger from the put-back:\n%s", seed, from(s.ledger.String(), "attack:", 140))
			}
			overlapped++
			t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (one put-back; a listing that showed the ghost's renewal came back once the twin's session had written twice since the era read it); the simulation's own check: %v",
				seed, v.id, first.Seconds(), lastO.Seconds(), s.fails)
		}
	}
	if reached == 0 {
		t.Fatalf("no seed reached the schedule: the test does not test the rule")
	}
	t.Logf("%d seeds reached it; %d led a shard twice", reached, overlapped)
}
