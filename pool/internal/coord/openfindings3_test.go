//go:build s3lect_openfindings

package coord

// Open findings of the third adversarial review of the coordinator pool
// (docs/findings-pool.md, "Third review"). Each test fails today; they
// are built only with -tags s3lect_openfindings, so the tree stays green:
//
//	go test -tags s3lect_openfindings -run 'TestTwicePutBack|TestExactPutBack' -v ./pool/internal/coord

import (
	"testing"
	"time"
)

// TestTwicePutBackSessionOverlapEndsWithinTheStatedBound: section 7's
// fourth exception ("A session's key put back to its last write and then
// written over (or deleted) again, within a lease, with no listing or
// read of the coordinator in between showing the write the session made
// there") bounds the overlap: the session leads beside a new owner "until
// the lease of that unseen write ends, less than a lease after the
// coordinator's read that made it a ghost". The random simulation at 12
// workers and 30 shards draws the exception on seed 90,164 of 90,000 to
// 90,199 (go test ./pool/internal/coord -run 'TestSimulation$'
// -sim.seeds 200 -sim.first 90000 -sim.workers 12 -sim.shards 30: 1
// failed), and the bound does not hold there:
//
//   - 37.03 s: workers/w2 deleted, w2 paused till 38.32 s;
//   - 38.10 s: the coordinator (w0) reads the absence: w2's session is a
//     ghost, its wait L = 4 s (to 42.10 s);
//   - 38.32 s: workers/w2 put back (ETag e568); w2 renews at 38.32,
//     39.31, 40.29 and 41.27 s (seq 41 to 44), all unseen: the
//     coordinator is paused from 38.57 to 41.93 s;
//   - 41.71 s: workers/w2 deleted again, w2 paused till 45.55 s;
//   - 42.21 s: the coordinator's read (sent after 42.10 s) shows the
//     absence: the ghost is done; s03, s27, s02 go to w6, w11, w10, which
//     start them at 42.59, 43.30 and 43.51 s;
//   - w2's leaderships run on to the lease of its write sent at 41.27 s:
//     measured (10 ms probes), two live owners from 42.60 to 44.81 s,
//     6.66 s after the read that made w2 a ghost (the test sees the ghost
//     at 38.15 s; the bound says under 4 s), 2.2 s of overlap.
//
// The true bound is the lease of a write sent before the confirming read:
// the overlap lasts under one lease after the grant, which ends under two
// leases after the ghost read. Either state that, or close the case where
// the store keeps versions (a confirming read that also lists the key's
// versions since the ghost read finds the unseen writes). The simulation's
// CI shape (5 workers, 16 shards) draws it rarely, but draws it: the
// known seeds 101,390 and 142,414 are the same pair of faults.
func TestTwicePutBackSessionOverlapEndsWithinTheStatedBound(t *testing.T) {
	const seed = 90164
	cfg := defaultSim
	cfg.workers, cfg.shards, cfg.maxWorkers = 12, 30, 15
	s := newSim(seed, cfg)
	s.keep = true
	end := s.cfg.faultFor + s.cfg.calmFor
	s.at(s.dur(0, 2*s.cfg.faultEvery), nil, "fault", s.fault)
	s.at(s.cfg.faultFor, nil, "calm", s.calmDown)
	var ghostAt, ghostWait, firstOverlap, lastOverlap time.Duration
	victim := ""
	for s.now < end {
		s.step(s.now + 10*time.Millisecond)
		by := map[string][]*proc{}
		for _, q := range s.procs {
			for sh, l := range q.ls {
				if s.live(q, l) {
					by[sh] = append(by[sh], q)
				}
			}
		}
		for _, sh := range sortedKeys(by) {
			if len(by[sh]) < 2 {
				continue
			}
			if firstOverlap == 0 {
				firstOverlap = s.now
				for _, q := range by[sh] {
					if q.ls[sh].term < by[sh][0].ls[sh].term || victim == "" {
						victim = q.id
					}
				}
			}
			lastOverlap = s.now
		}
		if h := s.holder; firstOverlap == 0 && h != nil && h.c != nil {
			for _, g := range h.c.ghosts {
				if g.id == "w2" && !g.done && g.until.After(h.local(s.now).Add(g.wait-20*time.Millisecond)) {
					ghostAt, ghostWait = s.now, g.wait // a ghost made within the last 20 ms
				}
			}
		}
	}
	if firstOverlap == 0 {
		t.Fatalf("seed %d: no overlap; the seed no longer draws the exception", seed)
	}
	t.Logf("seed %d: ghost of w2 made at %.2fs (wait %v); two live owners from %.2fs to %.2fs (victim %s)", seed, ghostAt.Seconds(), ghostWait,
		firstOverlap.Seconds(), lastOverlap.Seconds(), victim)
	if bound := ghostAt + ghostWait; lastOverlap > bound {
		t.Errorf("two live owners until %.2fs, %.2fs after the read that made the session a ghost; section 7 bounds it by a lease (%v): %.2fs",
			lastOverlap.Seconds(), (lastOverlap - ghostAt).Seconds(), ghostWait, bound.Seconds())
	}
}

// TestExactPutBackOverlapEndsWithinTheStatedBound: section 7's second
// exception (a store whose ETags hash the bytes: "a session object whose
// later writes the coordinator never saw, put back to the exact bytes it
// saw, looks unchanged since, and 4.3's "silent" can end the session
// while it renews; it leads beside a new owner until its next renewal is
// refused on the restored object, at most one FrequentInterval"). The
// bound assumes the worker renews. A worker paused (or its host
// suspended) right after the put-back does not learn of the refusal: it
// leads until the lease of its last write ends, which the coordinator,
// counting from its first sight of the restored bytes, did not wait for.
//
// Schedule (3 workers, 6 shards, every worker FrequentInterval 1 s,
// LeaderTimeout 6 s; ETags hash the bytes, as on S3; no random fault):
// the coordinator reads victim V's session at ETag X and is paused at
// once, for 4.3 s (less than what is left of its election lease); V
// renews four times meanwhile, unseen; right after V's last renewal lands
// the operator puts V's object back to X's exact bytes (same ETag) and V
// is paused; the coordinator resumes, its read at the first sight of X
// plus 6 s returns X: V is "silent", its shards go to the others.
// Seed 3: the coordinator (w0) reads workers/w1 at 19.61 s and is paused
// to 23.91 s; w1's renewals at 19.97, 20.96, 21.95 and 22.95 s land
// unseen; X is put back at 22.96 s and w1 paused (the reply of its last
// renewal not yet taken in, its lease runs from the write sent at
// 21.95 s); the coordinator's read at 25.42 s returns X and it grants
// s00 and s04 at 25.45 s. Measured (10 ms probes): two live owners from
// 25.77 s to 27.32 s, 1.55 s, against the stated FrequentInterval (1 s).
// The bound is the lease of V's last renewal whose reply it took in: up
// to LeaderTimeout − LeaderTimeout/10 after the put-back (here 5.4 s).
func TestExactPutBackOverlapEndsWithinTheStatedBound(t *testing.T) {
	tm := timing{fi: time.Second, lt: 6 * time.Second}
	s := newSim(3, simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute, contentETags: true})
	s.calm, s.keep = true, true
	if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
		t.Fatalf("not balanced after a cold start")
	}
	s.step(s.now + 2*tm.lt)
	v := s.victim()
	h := s.holder
	key := "workers/" + v.id
	o := s.store[key]
	// 1. Wait for the coordinator to take in a new sighting of V's key
	// that is V's current object, then pause it.
	c := h.c
	last := c.keys[v.id].sight
	for {
		s.step(s.now + time.Millisecond)
		k := c.keys[v.id]
		if k.sight != last && k.sight == o.etag && k.cur != nil {
			break
		}
		last = k.sight
	}
	x, xTag := o.data, o.etag
	pauseEnd := s.now + 4300*time.Millisecond
	h.pauseTill = pauseEnd
	s.log("attack: coordinator %s saw %s at %s; paused till %.3fs", h.id, key, xTag, pauseEnd.Seconds())
	// 2. V renews unseen; after its last renewal before the resume lands,
	// put X back and pause V.
	for s.now < pauseEnd-1100*time.Millisecond {
		s.step(s.now + time.Millisecond)
	}
	tag := o.etag
	for o.etag == tag {
		s.step(s.now + time.Millisecond)
	}
	if s.now >= pauseEnd-20*time.Millisecond {
		t.Fatalf("V's renewal landed at %.3fs, too late to put X back before the coordinator resumes", s.now.Seconds())
	}
	o.data, o.etag = x, xTag
	o.hist = append(o.hist, x)
	s.hold(v)
	s.log("attack: %s put back to %s; %s paused", key, xTag, v.id)
	var first, lastOverlap time.Duration
	for end := s.now + 3*tm.lt; s.now < end; {
		s.step(s.now + 10*time.Millisecond)
		for _, sh := range sortedKeys(v.ls) {
			if l := v.ls[sh]; !s.live(v, l) {
				continue
			}
			for _, q := range s.procs {
				if l := q.ls[sh]; q != v && l != nil && s.live(q, l) {
					if first == 0 {
						first = s.now
					}
					lastOverlap = s.now
				}
			}
		}
	}
	if h.c != c {
		t.Fatalf("the coordinator lost its election during the pause: the schedule does not test the rule")
	}
	t.Logf("two live owners from %.2fs to %.2fs", first.Seconds(), lastOverlap.Seconds())
	if first != 0 && lastOverlap-first > tm.fi {
		t.Logf("ledger tail:\n%s", tail(s.ledger.String(), 60))
		t.Errorf("two live owners for %v (from %.2fs); section 7 bounds it by a FrequentInterval (%v)", lastOverlap-first, first.Seconds(), tm.fi)
	}
}
