package coord

import (
	"container/heap"
	"fmt"
	"testing"
	"time"
)

// TestHiddenSessionRenewalWrittenOverByANewSessionIsNotForgotten: 4.3's
// last rule (bb50768, bd64e7d) holds every shard for the longest lease
// after a listing showed a write no read returned, on a key with no live
// session in the era's view, only when the read "shows no live session":
// a write listed there may be the renewal of a session the era never read
// (hidden from its start, its last write put back), written over since.
// But the renewal can be written over by a live session as well as by a
// deletion: a twin of the worker's ID (a second process with the same ID)
// opening its session (W1 writes over whatever the key holds), or an
// operator's restore of another session's write. Then the read shows a
// live session of another writer: no `all` ghost is made, the era has no
// ghost of the hidden session (its page was deleted with its object), and
// the hidden session's shards are granted at the gate while its listed
// renewal's lease runs. Section 7's exceptions do not cover it: the hidden
// session's last write is put back once, and a listing showed the write
// it made.
//
// Schedule: TestHiddenSessionRenewalAListingShowsIsNotForgotten's (3
// workers, 6 shards, FrequentInterval 1.5 s, LeaderTimeout 4 s; no random
// fault; an exact-bytes put-back keeps its ETag, as on S3), but in step 3,
// instead of the operator's second delete, a twin of V's ID starts once a
// listing has shown V's renewal, while the read that listing asked for is
// in flight; the twin's W1 writes its session over the renewal before the
// read lands.
func TestHiddenSessionRenewalWrittenOverByANewSessionIsNotForgotten(t *testing.T) {
	tm := timing{fi: 1500 * time.Millisecond, lt: 4 * time.Second}
	reached, overlapped := 0, 0
	for seed := uint64(1); seed <= 12; seed++ {
		s := newSim(seed, simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute})
		s.calm, s.keep = true, true
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced after a cold start", seed)
		}
		s.step(s.now + 2*tm.lt)
		v := s.victim()
		key := "workers/" + v.id
		o := s.store[key]
		// 1.
		data, etag := s.holdAfterWrite(v, o)
		del := func(k string) {
			if ob := s.store[k]; ob != nil && ob.data != nil {
				s.etags++
				ob.data, ob.etag = nil, fmt.Sprintf("e%d", s.etags)
				ob.hist = append(ob.hist, nil)
			}
		}
		del(key)
		del("assign/" + v.id)
		h := s.holder
		s.holder, h.c, h.noRunTill = nil, nil, s.now+h.tm.lt
		s.log("attack: %s paused; %s and assign/%s deleted; coordinator %s resigns", v.id, key, v.id, h.id)
		// 2.
		var c *Coordinator
		for s.now < s.leaseEnd(v)-150*time.Millisecond {
			s.step(s.now + time.Millisecond)
			if s.holder != nil && s.holder.c != nil && !s.holder.c.allRead.IsZero() {
				c = s.holder.c
				break
			}
		}
		if c == nil {
			t.Logf("seed %d: V's lease ran out before the next era had read its first listing's keys", seed)
			s.release(v)
			continue
		}
		cp := s.holder
		s.step(s.leaseEnd(v) - 100*time.Millisecond)
		o.data, o.etag = data, etag
		o.hist = append(o.hist, data)
		s.release(v)
		for o.etag == etag && s.now < s.leaseEnd(v) {
			s.step(s.now + time.Millisecond)
		}
		if o.etag == etag || c.gated {
			t.Logf("seed %d: V did not renew before the era's gate", seed)
			continue
		}
		v.cutTill = s.now + time.Hour
		renewal := sameForm(o.etag)
		renewedAt := s.now
		s.step(s.now + 100*time.Millisecond) // its reply
		leaseTo := s.leaseEnd(v)
		s.log("attack: %s put back; %s renewed (%s), cut off the store", key, v.id, o.etag)
		// 3.
		listed := func() bool { k := c.keys[v.id]; return k != nil && (k.listed == renewal || k.readTag == renewal) }
		for !listed() && s.holder == cp && !c.gated && s.now < leaseTo {
			s.step(s.now + time.Millisecond)
		}
		if !listed() || c.keys[v.id].readTag == renewal {
			t.Logf("seed %d: no listing showed V's renewal before a read or the gate", seed)
			continue
		}
		// The read the listing asked for is slow; a twin of V's ID (a
		// second process with the same ID) starts meanwhile, and its W1
		// writes a new session over V's renewal.
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
		sent := s.now
		read.at = s.now + time.Hour
		heap.Init(&s.q)
		tw := &proc{id: v.id, n: len(s.procs), rate: 1, off: v.off + time.Minute, tm: v.tm, calls: map[string]int{}, twin: true}
		s.procs = append(s.procs, tw)
		s.start(tw)
		for sameForm(o.etag) == renewal && s.now < sent+time.Second {
			s.step(s.now + time.Millisecond)
		}
		read.at = s.now + time.Millisecond
		heap.Init(&s.q)
		if sameForm(o.etag) == renewal {
			t.Logf("seed %d: the twin did not write over the renewal within 1 s", seed)
			continue
		}
		slow := s.now - sent
		s.log("attack: a twin of %s wrote %s over the renewal; the read the listing asked for lands %v after it was sent", v.id, o.etag, slow)
		s.step(s.now + 50*time.Millisecond)
		if k := c.keys[v.id]; k.cur == nil || k.readTag != sameForm(o.etag) {
			t.Logf("seed %d: the read did not show the twin's session", seed)
			continue
		}
		t.Logf("seed %d: the read landed %v after it was sent (the simulation's calls take 2-40 ms, slow ones 100-1,200 ms)", seed, slow)
		reached++

		first, last := s.overlap(v, 3*tm.lt, func() {})
		if first > 0 || len(s.fails) > 0 {
			if overlapped == 0 {
				t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 60))
			}
			overlapped++
			t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (renewal landed %.3fs, lease to %.3fs; the era's gate at %.3fs); the simulation's own check: %v",
				seed, v.id, first.Seconds(), last.Seconds(), renewedAt.Seconds(), leaseTo.Seconds(), cp.realAt(c.allRead.Add(c.lmax)).Seconds(), s.fails)
		}
	}
	if reached == 0 {
		t.Fatalf("no seed had V's renewal listed before the era's gate: the schedule does not test the rule")
	}
	t.Logf("%d seeds had V's renewal listed and written over by a twin; %d led a shard twice", reached, overlapped)
}
