package coord

import (
	"container/heap"
	"flag"
	"testing"
	"time"
)

// TestGhostRenewalAfterItsListedRenewalIsNotForgotten: a ghost's last
// write put back once; it renews (a listing shows that renewal, E1), and
// the read that listing asks for is slow, as is the next listing: before
// they land the ghost renews again (E2, sent after the listing, never
// listed) and its twin's new session writes over it. The read shows
// neither: the ghost's wait moves to a lease from the listing of E1 (4.3),
// but E2 gives the ghost a lease beyond that, and its shards must not be
// granted while that lease runs. (A listed write is read so that only a
// write landing between the listing and the read goes unseen; such a
// write was sent before the read landed, not before the listing.)
//
// Schedule (3 workers, 6 shards, every worker FrequentInterval 1 s,
// LeaderTimeout 3 s; no random fault; an exact-bytes put-back keeps its
// ETag, as on S3):
//  1. victim V (session S) is paused right after a write lands; a twin T
//     of its ID (a second process with the same ID) opens session A over
//     it; the coordinator's read of A makes S a ghost, A in view; T is
//     paused;
//  2. S's last write is put back (the one put-back); V resumes and renews
//     (E1); a listing shows E1; the read it asks for is held in flight,
//     and so is every listing the coordinator sends meanwhile (each lands
//     at most -ghost.hold, 1.2 s by default, after it was sent: the
//     simulation's slow calls take 100-1,200 ms);
//  3. V renews on (E2, 0.95 s after the listing) until 250 ms before the
//     hold ends; it is then cut off the store (its lease runs on); T's
//     process restarts (its supervisor): W1 writes A2 over E2;
//  4. the read lands, then the listings: both show A2.
//
// Today 3 of 19 seeds reaching step 4 led V's shards twice (seeds 2, 3, 6:
// 0.16-0.42 s, the twin's A2 starting them while V's E2 lease ran); with
// -ghost.hold 2.5s (V renews twice unlisted) 11 of 19 did, up to 1.3 s.
var ghostHold = flag.Duration("ghost.hold", 1200*time.Millisecond, "how long TestGhostRenewalAfterItsListedRenewalIsNotForgotten holds the slow read")

var ghostSlowLists = flag.Bool("ghost.slowlists", true, "TestGhostRenewalAfterItsListedRenewalIsNotForgotten holds the coordinator's listings in flight with the read")

func TestGhostRenewalAfterItsListedRenewalIsNotForgotten(t *testing.T) {
	maxHold := *ghostHold
	reached, overlapped := 0, 0
	for seed := uint64(1); seed <= 24; seed++ {
		s := calmSim(t, seed, 3, 6)
		tm := attackTiming
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		h := s.holder
		c := h.c
		key := "workers/" + v.id
		o := s.store[key]
		k := c.keys[v.id]
		prev := o.etag
		for s.now < 90*time.Second {
			s.step(s.now + time.Millisecond)
			if o.etag == prev || o.etag != v.w.etag || v.w.inflight != nil {
				continue
			}
			prev = o.etag
			if d := h.realAt(c.nextLst) - s.now; !c.listing && d >= 200*time.Millisecond && d <= 300*time.Millisecond {
				break
			}
		}
		if o.etag != v.w.etag || v.w.inflight != nil {
			continue
		}
		s.hold(v)
		data, etag := o.data, o.etag
		sess := v.w.sess
		leaseEnd := s.leaseEnd(v)
		tw := &proc{id: v.id, n: len(s.procs), rate: 1, off: v.off + time.Minute, tm: v.tm, calls: map[string]int{}, twin: true}
		s.procs = append(s.procs, tw)
		s.start(tw)
		for o.etag == etag && s.now < leaseEnd {
			s.step(s.now + time.Millisecond)
		}
		s.hold(tw)
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
		if ghostOf() == nil || k.cur == nil || s.now > leaseEnd-200*time.Millisecond {
			t.Logf("seed %d: no ghost early in V's lease", seed)
			continue
		}
		// 2. One put-back; V renews on it.
		o.data, o.etag = data, etag
		o.hist = append(o.hist, data)
		s.log("attack: %s put back to %s; %s resumes", key, etag, v.id)
		s.release(v)
		for o.etag == etag && s.now < leaseEnd {
			s.step(s.now + time.Millisecond)
		}
		if o.etag == etag {
			t.Logf("seed %d: V did not renew on its key put back", seed)
			continue
		}
		e1 := sameForm(o.etag)
		for !(k.listed == e1 && k.getting) && sameForm(o.etag) == e1 && k.readTag != e1 && s.now < leaseEnd+3*tm.lt {
			s.step(s.now + time.Millisecond)
		}
		if !(k.listed == e1 && k.getting) || sameForm(o.etag) != e1 {
			t.Logf("seed %d: the renewal was not listed before V renewed again, or read", seed)
			continue
		}
		listedAt := s.now
		s.log("attack: E1 %s listed at %.3fs", e1, s.now.Seconds())
		var read *event
		for _, e := range s.q {
			if e.what == "get "+key+" lands" && e.p == nil {
				read = e
			}
		}
		if read == nil {
			t.Logf("seed %d: no read of the listed renewal in flight", seed)
			continue
		}
		read.at = s.now + time.Hour
		heap.Init(&s.q)
		// 3. V renews on, until just before the read lands; then it is cut
		// off (its lease runs on) and the twin restarts over its last
		// renewal.
		var lists []*event // the coordinator's listings meanwhile, held in flight too
		holdLists := func() {
			for _, e := range s.q {
				if e.what == "list lands" && e.at < s.now+time.Minute {
					e.at = s.now + time.Hour
					lists = append(lists, e)
					heap.Init(&s.q)
				}
			}
		}
		for s.now < listedAt+maxHold-250*time.Millisecond {
			s.step(s.now + time.Millisecond)
			if *ghostSlowLists {
				holdLists()
			}
		}
		for v.w.inflight != nil && s.now < listedAt+maxHold {
			s.step(s.now + time.Millisecond)
		}
		if sameForm(o.etag) == e1 || o.etag != v.w.etag {
			t.Logf("seed %d: V did not renew again in time", seed)
			continue
		}
		e2sent := s.now // an upper bound: V's last renewal had landed by now
		v.cutTill = s.now + time.Hour
		s.kill(tw)
		s.release(tw)
		s.start(tw)
		e2 := o.etag
		for o.etag == e2 && s.now < listedAt+maxHold {
			s.step(s.now + time.Millisecond)
			if *ghostSlowLists {
				holdLists()
			}
		}
		if o.etag == e2 {
			t.Logf("seed %d: the twin did not write over V's renewal in time", seed)
			continue
		}
		held := s.now - listedAt
		read.at = s.now + time.Millisecond
		for _, e := range lists {
			e.at = s.now + 2*time.Millisecond
		}
		heap.Init(&s.q)
		s.log("attack: read of %s held %v; V's last renewal %s landed by %v after the listing; twin wrote %s", key, held, e2, e2sent-listedAt, o.etag)
		reached++
		first, last := s.overlap(v, 3*tm.lt, func() {})
		if h.c != c {
			reached--
			continue
		}
		t.Logf("seed %d: read held %v; V's last renewal by %v after the listing; V's lease till %.3fs; first overlap %.3fs", seed, held, e2sent-listedAt, s.leaseEnd(v).Seconds(), first.Seconds())
		if first > 0 || len(s.fails) > 0 {
			if overlapped == 0 {
				t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 60))
			}
			overlapped++
			t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (one put-back; a renewal after its listed one, written over before the slow read); the simulation's own check: %v",
				seed, v.id, first.Seconds(), last.Seconds(), s.fails)
		}
	}
	if reached == 0 {
		t.Fatalf("no seed reached the twin's write over the second renewal: the schedule does not test the rule")
	}
	t.Logf("%d seeds reached it; %d led a shard twice", reached, overlapped)
}
