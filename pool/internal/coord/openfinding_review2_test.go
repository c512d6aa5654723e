//go:build s3lect_openfindings

package coord

// Open findings of the second adversarial review of the coordinator-decided
// pool (issue 40). Each test scripts one schedule in the deterministic
// simulation and asserts the safe outcome; each FAILS on today's code:
//
//	go test -tags s3lect_openfindings -run 'TestUnseen|TestOpenR2' -v ./pool/internal/coord

import (
	"container/heap"
	"fmt"
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

// leaseEnd is the real time at which p's session lease ends.
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
// gives two live leaderships of a shard.
func TestUnseenSessionPutBackIsNotLedTwice(t *testing.T) {
	tm := timing{fi: 1500 * time.Millisecond, lt: 4 * time.Second}
	reached := 0
	for off := range 12 {
		s := newSim(uint64(1+off), simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute})
		s.calm, s.keep = true, true
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("not balanced after a cold start")
		}
		s.step(s.now + 2*tm.lt)
		v := s.victim()
		key := "workers/" + v.id
		o := s.store[key]
		// 1. Wait for V's next write to land, then pause V, delete its
		// object, and have the coordinator resign.
		tag := v.w.etag
		for v.w.etag == tag || v.w.etag != o.etag {
			s.step(s.now + time.Millisecond)
		}
		data, etag := o.data, o.etag
		h := s.holder
		s.hold(v)
		s.etags++
		o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
		o.hist = append(o.hist, nil)
		s.holder, h.c, h.noRunTill = nil, nil, s.now+h.tm.lt
		s.log("attack: %s paused, %s deleted (was %s), coordinator %s resigns", v.id, key, etag, h.id)
		// 2. Wait for the next era to have read everything and for its
		// last listing before it may grant to have returned.
		var c *Coordinator
		var cp *proc
		ok := false
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
				ok = true
				break
			}
		}
		if !ok {
			if c != nil {
				t.Logf("seed %d: now %.3f lease end %.3f; era %d allRead %v ready %.3f nextLst %.3f lmax %v", off+1, s.now.Seconds(), s.leaseEnd(v).Seconds(), c.term, !c.allRead.IsZero(), cp.realAt(c.allRead.Add(c.lmax)).Seconds(), cp.realAt(c.nextLst).Seconds(), c.lmax)
			} else {
				t.Logf("seed %d: no new era by %.3f", off+1, s.now.Seconds())
			}
			s.release(v)
			continue
		}
		// 3. Put V's last write back (S3: same bytes, same ETag); V resumes.
		reached++
		o.data, o.etag = data, etag
		o.hist = append(o.hist, data)
		s.log("attack: put back %s with its ETag %s; %s resumes; era %d (%s) grants from %.3fs", key, etag, v.id, c.term, cp.id,
			cp.realAt(c.allRead.Add(c.lmax)).Seconds())
		s.release(v)
		n, first := s.probe(3 * tm.lt)
		if n > 0 || len(s.fails) > 0 {
			t.Logf("attack seed %d: ledger tail:\n%s", off+1, tail(s.ledger.String(), 80))
			t.Fatalf("attack seed %d: %d shard-instants (10 ms apart) with two live leaderships, first %s; the simulation's own check: %v", off+1, n, first, s.fails)
		}
	}
	if reached == 0 {
		t.Fatalf("no attack seed reached the put-back while the victim's lease ran: the schedule does not test the rule")
	}
	t.Logf("%d attack seeds reached the put-back under the victim's lease; none led a shard twice", reached)
}
