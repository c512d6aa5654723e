package coord

import (
	"container/heap"
	"fmt"
	"testing"
	"time"
)

// TestHiddenSessionRenewalListedOverBeforeItsReadIsNotForgotten: 4.3's
// last rule makes the `all` ghost (every shard held for the longest lease
// from the listing) only in SessionRead, for the write the key's LAST
// listing showed. When the next listing replaces that ETag before the
// read returns, unreadListed runs, but it only moves existing ghosts'
// waits: a hidden session (its object and page deleted before the era
// began, its last write put back) has no ghost, so its renewal is
// forgotten: the next listing shows the key deleted again (k.listed
// becomes ""), the slow read then shows the absence with nothing listed
// unread, and the session's shards are granted at the gate while the
// renewal's lease runs. Not section 7's: one put-back, and a listing
// showed the write.
//
// Schedule: TestHiddenSessionRenewalAListingShowsIsNotForgotten's (3
// workers, 6 shards, FrequentInterval 1.5 s, LeaderTimeout 4 s; no random
// fault; an exact-bytes put-back keeps its ETag, as on S3), but the read
// that the listing showing V's renewal asks for is slow: it lands only
// once the next listing (showing the operator's second delete) has been
// taken in, about a FrequentInterval after it was sent (the executor's
// calls time out only after a FrequentInterval).
func TestHiddenSessionRenewalListedOverBeforeItsReadIsNotForgotten(t *testing.T) {
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
		// The read the listing asked for is slow; the operator deletes
		// the key again meanwhile, and the next listing (showing the
		// absence) is taken in before the read lands.
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
		del(key)
		k := c.keys[v.id]
		for k.listed == renewal && s.holder == cp && s.now < sent+2*tm.fi {
			s.step(s.now + time.Millisecond)
		}
		read.at = s.now + time.Millisecond
		heap.Init(&s.q)
		slow := s.now - sent
		if k.listed == renewal || slow >= tm.fi {
			// Past a FrequentInterval the executor's read would have
			// failed (its timeout) and been sent again.
			t.Logf("seed %d: no listing replaced the renewal's within a FrequentInterval of the read's send (%v)", seed, slow)
			continue
		}
		s.log("attack: %s deleted again; the next listing taken in; the read the first asked for lands %v after it was sent", key, slow)
		t.Logf("seed %d: the read landed %v after it was sent (the coordinator's calls time out after a FrequentInterval, %v)", seed, slow, tm.fi)
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
	t.Logf("%d seeds had V's renewal listed and listed over before its read; %d led a shard twice", reached, overlapped)
}
