package coord

// A session hidden from an era's start (its object deleted, or put back
// to a closed write the roster names) and then put back to its last write
// must not lead beside the new owners of its shards (docs/pool-protocol.md
// 4.1, the gate; section 5, case 3).

import (
	"container/heap"
	"testing"
	"time"
)

// hold pauses p until release is called: its events wait.
func (s *sim) hold(p *proc) { p.pauseTill = s.now + 24*time.Hour }

// release ends p's pause now: the events it held fire now, in their order.
func (s *sim) release(p *proc) {
	p.pauseTill = s.now
	for _, e := range s.q {
		if e.p == p && e.at > s.now {
			e.at = s.now + time.Millisecond
		}
	}
	heap.Init(&s.q)
}

// putBackBeforeGrants waits (V held) for the next era to have read every
// key of its first listing and for its last listing before it may grant
// to have returned; then it puts key back to data with its old ETag (S3:
// the same bytes have the same ETag) and releases V. It reports false
// (V released, nothing put back) if V's lease ran out first.
func (s *sim) putBackBeforeGrants(t *testing.T, v *proc, key string, data []byte, etag string) bool {
	var c *Coordinator
	var cp *proc
	for s.now < s.leaseEnd(v)-50*time.Millisecond {
		s.step(s.now + time.Millisecond)
		if s.holder == nil || s.holder.c == nil {
			continue
		}
		cp, c = s.holder, s.holder.c
		if c.allRead.IsZero() || c.listing {
			continue
		}
		if ready := c.allRead.Add(c.lmax); !c.nextLst.Before(ready) {
			s.restore(s.store[key], data, etag)
			s.log("attack: put back %s with its ETag %s; %s resumes; era %d (%s) grants from %.3fs", key, etag, v.id, c.term, cp.id,
				cp.realAt(c.allRead.Add(c.lmax)).Seconds())
			s.release(v)
			return true
		}
	}
	if c != nil {
		t.Logf("seed %d: V's lease ran out (%.3fs) first; era %d ready at %.3fs, next listing %.3fs", s.seed, s.leaseEnd(v).Seconds(), c.term,
			cp.realAt(c.allRead.Add(c.lmax)).Seconds(), cp.realAt(c.nextLst).Seconds())
	}
	s.release(v)
	return false
}

// leaseEnd is the real time at which p's session lease ends.
// holdAfterWrite runs the simulation until v's next write lands on o,
// its session object, and pauses v; it returns that write.
func (s *sim) holdAfterWrite(v *proc, o *obj) (data []byte, etag string) {
	tag := v.w.etag
	for v.w.etag == tag || v.w.etag != o.etag {
		s.step(s.now + time.Millisecond)
	}
	s.hold(v)
	return o.data, o.etag
}

func (s *sim) leaseEnd(p *proc) time.Duration { return p.realAt(p.w.deadline) }

// TestUnseenSessionPutBackIsNotLedTwice: the era-start rule (4.1) makes
// every session the era's first listing shows "early" (it holds every
// shard until it has applied a page of this era), and section 5.3 argues
// that a session whose object was deleted before the era began is over
// because "S's writes fail from the deletion on". On S3 that is not so:
// an If-Match compares a hash of the body, so once the operator puts the
// deleted object back with its last bytes, the worker's next write
// succeeds (4.3 already says so for ghosts). A session that the era first
// reads after its start is taken as a fresh join: it holds only what it
// lists, and only once the coordinator has read it.
//
// Schedule (3 workers, 6 shards, every worker FrequentInterval 1.5 s,
// LeaderTimeout 4 s; no random fault, no lost reply):
//  1. right after victim V's session write lands, V's process is paused
//     (GC, SIGSTOP), the operator deletes workers/V, and the coordinator
//     resigns (as the simulation's "unseen" fault);
//  2. the next era's first listing does not show V's session; it reads
//     everything it lists, waits its lease, then grants V's shards to the
//     others;
//  3. after that era's last listing before its grant, and while V's lease
//     still runs, the operator puts workers/V back to V's last write
//     (same bytes, so on S3 the same ETag) and V resumes: V's renewal,
//     If-Match its last ETag, succeeds;
//  4. V leads on, beside the shards' new owners, until the coordinator
//     reads V's session and writes V a page that drops them.
//
// Seeds 1 to 12 are tried (the seed sets the phase of the next
// coordinator's election after V's write); the test fails if any of them
// gives two live leaderships of a shard. Seed 7 does (on the first six
// V's lease runs out before the era's last listing): era 2 grants V's shards at
// about 19.0 s, w0 starts s00 at 19.02 s while V (w1) leads it, and the
// overlaps last about 2 s, until era 2 reads V and writes it a page.
func TestUnseenSessionPutBackIsNotLedTwice(t *testing.T) {
	tm := hiddenTiming
	reached := 0
	for seed := uint64(1); seed <= 12; seed++ {
		s := hiddenSim(t, seed)
		s.step(s.now + 2*tm.lt)
		v := s.victim()
		key := "workers/" + v.id
		data, etag := s.holdAfterWrite(v, s.store[key])
		s.deleteKey(key)
		s.log("attack: %s paused, %s deleted (was %s), coordinator %s resigns", v.id, key, etag, s.resign().id)
		if !s.putBackBeforeGrants(t, v, key, data, etag) {
			continue
		}
		reached++
		s.probeFor(t, seed, 3*tm.lt)
	}
	if reached == 0 {
		t.Fatalf("no seed reached the put-back while the victim's lease ran: the schedule does not test the rule")
	}
	t.Logf("%d seeds reached the put-back under the victim's lease; none led a shard twice", reached)
}

// TestRosterSkippedSessionPutBackIsNotLedTwice is the same hole on the
// roster's path (4.7, 5.3 "Hidden on a key the roster let the era
// skip"): the argument says that once the put-back session writes again
// "the era reads S at its next change, and S holds every shard until it
// applies a page of this era; until then, the era granted nothing for L
// after its first listing". But the era reads S only at its next listing,
// and its grants wait L after its first listing, not for a listing after
// that wait: a write made between the last listing before the grants and
// the grants is not seen in time.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1.5 s, LeaderTimeout
// 4 s; no random fault, no lost reply):
//  1. victim V leaves (its closed write, ETag C, goes to the roster) and
//     starts again with its ID: session S2, which leads shards; the
//     coordinator reads S2 and drops V from the roster;
//  2. right after a write of S2 lands, V is paused, the operator puts the
//     roster back to its version naming V at C and V's session object
//     back to the closed write (S3: ETag C again), and the coordinator
//     resigns;
//  3. the next era's first listing shows V's key at C, which its roster
//     names: it skips the key, waits its lease and grants S2's shards;
//  4. after that era's last listing before its grants, and while S2's
//     lease runs, the operator puts back S2's last write (its old ETag),
//     V resumes, and S2 renews: it leads on beside the new owners.
//
// On seed 1 (era 2): grants at 25.20 s (s01 to w2, s02 to w0); w2 starts
// s01 at 25.68 s while w1 (S2) leads it. Worse, once the era reads S2 it
// writes S2 a page naming the shards S2 lists (v2.5: s01 and s02 at their
// era-1 terms) while the pages of w2 and w0 still name them: the era's
// own pages give one shard to two sessions, and it takes the shards back
// from the new owners only at 27.13 s. Two live leaderships for about 3 s.
func TestRosterSkippedSessionPutBackIsNotLedTwice(t *testing.T) {
	tm := hiddenTiming
	reached := 0
	for seed := uint64(1); seed <= 12; seed++ {
		s := hiddenSim(t, seed)
		v := s.victim()
		closed, ok := s.leaveAndReturn(t, seed, v)
		if !ok {
			continue
		}
		key := "workers/" + v.id
		data, etag := s.holdAfterWrite(v, s.store[key])
		closed.putBack(nil)
		s.log("attack: %s paused; roster and %s put back to %s's closed write (ETag %s); coordinator %s resigns", v.id, key, v.id, closed.tag, s.resign().id)
		if !s.putBackBeforeGrants(t, v, key, data, etag) {
			continue
		}
		reached++
		s.probeFor(t, seed, 3*tm.lt)
	}
	if reached == 0 {
		t.Fatalf("no seed reached the put-back while the victim's lease ran: the schedule does not test the rule")
	}
	t.Logf("%d seeds reached the put-back under the victim's lease; none led a shard twice", reached)
}
