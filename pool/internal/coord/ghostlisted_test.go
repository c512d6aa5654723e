package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestGhostWhoseListedRenewalIsWrittenOverByAnOldSessionIsNotLedTwice:
// 4.3 says that when a listing showed a ghost's key at an ETag that the
// next read did not return, "and that read shows no live session of
// another writer", the listed write may have been the ghost's (its last
// write put back, then a renewal), so the ghost waits L from that
// listing. An operator's restore of an earlier session's write on the
// same key (not closed, another session ID) looks like "a live session of
// another writer" but is no writer: the ghost's wait is not moved, it
// ends L after the read that made the ghost, and the coordinator grants
// the shards while the ghost's listed renewal still gives it a lease.
// Section 7's fourth exception does not cover it: a listing showed the
// write the session made there.
//
// Schedule (3 workers, 6 shards, every worker FrequentInterval 1 s,
// LeaderTimeout 3 s; no random fault, no lost reply; an exact-bytes
// put-back keeps its ETag, as on S3):
//  1. victim V is killed and started again with its ID: its first
//     session S1's last write stays in the key's history, and the era
//     sees S1 over; S2 leads V's shards;
//  2. once the coordinator has read S2's latest write, V is paused and
//     the operator deletes workers/V; the coordinator's read of the
//     absence makes S2 a ghost (its wait L = 3 s from that read);
//  3. the operator puts S2's last write back (same bytes, same ETag); V
//     resumes 60 ms before its lease ends and renews: the write lands,
//     and V is cut off the store (its later writes time out, its lease
//     runs on);
//  4. the coordinator's next listing shows that renewal; before the read
//     it sends lands, the operator restores S1's last write (same bytes,
//     same ETag);
//  5. that read shows S1, a session of "another writer": the ghost keeps
//     its wait, ends at the read after it, and V's shards are granted
//     while V leads them under the renewal of step 3.
//
// Seeds 1 to 12 are tried (the seed sets the phases of listings and
// renewals); a seed whose coordinator reads the renewal (reviving the
// ghost) before a listing shows it does not reach step 4.
func TestGhostWhoseListedRenewalIsWrittenOverByAnOldSessionIsNotLedTwice(t *testing.T) {
	reached, overlapped := 0, 0
	for seed := uint64(1); seed <= 12; seed++ {
		s := calmSim(t, seed, 3, 6)
		tm := attackTiming
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		key := "workers/" + v.id
		o := s.store[key]
		// 1. A first session of V, over, its last write kept.
		s1Data, s1Tag := o.data, o.etag
		s.log("attack: %s killed and started again (S1's last write %s)", v.id, s1Tag)
		s.kill(v)
		s.start(v)
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced after %s restarted", seed, v.id)
		}
		s.step(s.now + 2*tm.lt)
		h := s.holder
		if h == nil || h == v || h.c == nil || len(v.ls) == 0 {
			t.Logf("seed %d: %s coordinates or leads nothing", seed, v.id)
			continue
		}
		c := h.c
		s1, _ := ParseSession(s1Data, v.id)
		if !c.keys[v.id].gone[s1.Session] {
			t.Logf("seed %d: the era did not see S1 end", seed)
			continue
		}
		// 2. V paused right after a write; its key deleted; the
		// coordinator reads the absence: a ghost.
		k := c.keys[v.id]
		for !(k.cur != nil && k.cur.session == v.w.sess && k.cur.seq == v.w.seq && k.readTag == o.etag && o.etag == v.w.etag && v.w.inflight == nil) {
			s.step(s.now + time.Millisecond)
		}
		s.hold(v)
		data, etag := o.data, o.etag
		leaseEnd := s.leaseEnd(v)
		s.etags++
		o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
		o.hist = append(o.hist, nil)
		s.log("attack: %s paused, %s deleted (was %s)", v.id, key, etag)
		ghostOf := func() *ghost {
			for i := range c.ghosts {
				if g := &c.ghosts[i]; g.id == v.id && !g.done {
					return g
				}
			}
			return nil
		}
		for ghostOf() == nil && s.now < leaseEnd {
			s.step(s.now + time.Millisecond)
		}
		g := ghostOf()
		if g == nil || s.now > leaseEnd-400*time.Millisecond {
			t.Logf("seed %d: no ghost early enough in V's lease", seed)
			s.release(v)
			continue
		}
		ghostUntil := h.realAt(g.until)
		// 3. S2's last write put back; V resumes shortly before its lease
		// ends and renews; once that lands, V is cut off the store.
		o.data, o.etag = data, etag
		o.hist = append(o.hist, data)
		s.log("attack: %s put back to %s (ghost waits till %.3fs)", key, etag, ghostUntil.Seconds())
		s.step(leaseEnd - 60*time.Millisecond)
		s.release(v)
		for o.etag == etag && s.now < leaseEnd {
			s.step(s.now + time.Millisecond)
		}
		if o.etag == etag {
			t.Fatalf("seed %d: %s did not renew on its key put back", seed, v.id)
		}
		renewal := sameForm(o.etag)
		v.cutTill = s.now + time.Hour
		s.log("attack: %s renewed (%s); cut off the store", v.id, o.etag)
		// 4. Once a listing shows the renewal, before the read it asks
		// for lands, S1's last write is restored.
		for k.listed != renewal && ghostOf() != nil && k.readTag != renewal && s.now < ghostUntil {
			s.step(s.now + time.Millisecond)
		}
		if k.listed != renewal || k.readTag == renewal {
			t.Logf("seed %d: the renewal was read, or not listed, before the ghost's wait ended", seed)
			continue
		}
		o.data, o.etag = s1Data, s1Tag
		o.hist = append(o.hist, s1Data)
		s.log("attack: %s restored to S1's last write (%s)", key, s1Tag)
		reached++
		first, last := s.overlap(v, 3*tm.lt, func() {})
		if h.c != c {
			t.Fatalf("seed %d: the coordinator lost its election: the schedule does not test the rule", seed)
		}
		if first > 0 || len(s.fails) > 0 {
			if overlapped == 0 {
				t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 60))
			}
			overlapped++
			t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (ghost's wait till %.3fs, the renewal listed, then S1 restored); the simulation's own check: %v",
				seed, v.id, first.Seconds(), last.Seconds(), ghostUntil.Seconds(), s.fails)
		}
	}
	if reached == 0 {
		t.Fatalf("no seed reached the restore: the schedule does not test the rule")
	}
	t.Logf("%d seeds reached the restore; %d led a shard twice", reached, overlapped)
}
