package coord

// Peer mode's reports (4.8): hints for when to read, never a sighting.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReportedSightingDoesNotStartTheSilentWait: in peer mode (4.8) a
// worker's report is "a hint for when to read, never a decision: a lying
// or stale report can cost reads and delay, not safety". But Reported
// takes the reported ETag as the key's sighting and its arrival as that
// sighting's first sight (k.seen), which is what "silent" (4.3) measures
// its wait from. The report handler does not check who reports, and on
// S3 an ETag is the MD5 of the body, which for a worker's next renewal is
// known in advance (the same body, seq one higher): a report naming a
// write that has not happened yet starts that write's wait early.
//
// Schedule (core level; era 1, shards a to d, workers w1 and w2 at
// FrequentInterval 1 s, LeaderTimeout 3 s, the coordinator listing every
// LeaderTimeout/2 as in peer mode; every write's ETag is the MD5 of its
// body, as on S3):
//   - the pool runs and balances (w1 leads two shards);
//   - right after w1's renewal at T, a report for w1 arrives naming the
//     ETag of w1's next renewal (computable from w1's object);
//   - at T+1 s w1 renews (that write, sent at T+1 s, gives w1 a lease to
//     T+1 s+2.7 s), and then loses the store (its Work runs on; its writes
//     time out, an unknown outcome, so its lease runs to its end); its
//     honest report of that write changes nothing, the sighting is the
//     same;
//   - the coordinator's read sent at T+3 s returns that same ETag, so w1 is
//     "silent", and its shards go to w2 at once (13.32 s), before w1's
//     lease ends (14.0 s); w2, renewing at 13.6 s, reads that page, lists
//     the shard and starts it at about 13.65 s: two live leaderships for
//     about 0.35 s (up to FrequentInterval − LeaderTimeout/10 in general,
//     the time between the forged report and the write it names).
//
// The listings (every 1.5 s) put a key's sighting back to what they show,
// so the forged report counts only where no listing falls between it and
// the write it names: the schedule is tried with the forged report at
// 10.31 s, 11.31 s and 12.31 s (three phases against the listings' beat).
func TestReportedSightingDoesNotStartTheSilentWait(t *testing.T) {
	for _, lie := range []time.Duration{10310, 11310, 12310} {
		reportedSighting(t, lie*time.Millisecond, false)
	}
}

// TestReportedNonceCountsOnlyForItsWrite: a report's Nonce lets a read
// that shows the write carrying it count that write's wait from the
// report (4.8). The same schedule, every write with a Nonce and every
// honest report naming it; the forged report names a Nonce of its own
// (the next write's cannot be known before it is sent), and w1 loses the
// store right after its last write, before it can report it. The last
// report the coordinator has is the forged one: a coordinator that took a
// report's time without matching its Nonce to the write it reads would
// count w1's last write from the forged report, before it was sent.
func TestReportedNonceCountsOnlyForItsWrite(t *testing.T) {
	for _, lie := range []time.Duration{10310, 11310, 12310} {
		reportedSighting(t, lie*time.Millisecond, true)
	}
}

// reportedSighting runs TestReportedSightingDoesNotStartTheSilentWait's
// schedule with the forged report at lieAt, just after a renewal of w1;
// with nonces, TestReportedNonceCountsOnlyForItsWrite's.
func reportedSighting(t *testing.T, lieAt time.Duration, nonces bool) {
	t.Helper()
	p := newPair(t, nonces, true)
	cut := false // w1 lost the store
	p.watch = func(d time.Duration, e Effect) {
		if e.Op != OpPutPage || e.Key != "w2" || d < lieAt {
			return
		}
		pg, _ := ParsePage(e.Data, e.Key)
		w1 := p.ws["w1"]
		for sh := range pg.Shards {
			if _, ok := w1.s.Leads[sh]; ok && d < p.leaseEnd("w1") {
				// w2 starts it after its next renewal, its page read
				// and a write listing it: about 50 ms after it renews.
				start := p.ws["w2"].renewAt + 50*time.Millisecond
				t.Fatalf("t=%v: the coordinator grants %s (which w1 leads, its lease from a write sent at %v running to %v) to w2, which can lead it from about %v: a forged report started w1's silent wait %v before its last write",
					d, sh, w1.sent, p.leaseEnd("w1"), start, w1.sent-lieAt)
			}
		}
	}
	p.run(20*time.Second, func(d time.Duration) {
		for _, id := range []string{"w1", "w2"} {
			if id == "w1" && cut || !p.due(d, id) {
				continue
			}
			p.renew(d, id)
			last := id == "w1" && d == lieAt+pairFI-10*time.Millisecond
			if !last || !nonces {
				p.report(d, id, Entry{})
			}
			cut = cut || last // w1 loses the store after this write
		}
		if d == lieAt {
			s := p.ws["w1"].s // the ETag of w1's next renewal, as a forger computes it
			s.Seq++
			forged := md5tag(Marshal(s))
			t.Logf("t=%v: a report for w1 names %s, the ETag of its next renewal", d, forged)
			p.report(d, "w1", Entry{Session: forged, Nonce: "a guess"})
		}
	})
	if len(p.ws["w1"].s.Leads) == 0 {
		t.Fatalf("w1 led nothing: the schedule does not test the rule")
	}
}

// TestBogusReportsDoNotStallAnEraStart: anyone who reaches a worker's
// PeerHandler can report any valid ID. A report must not create a key
// the era's start waits to read (4.1, 4.8): a liar reporting a new
// made-up ID faster than a read round trip would keep the era from ever
// granting, and every made-up key would be walked by every event. A
// report for an ID no listing has shown only brings the next listing
// forward.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// no random fault): the coordinator's process is killed; from then on a
// liar reports ID "bogus-<n>" (n = 1, 2, ...) every 10 ms to whichever
// coordinator runs, once it has listed. Every shard must be led again
// within section 6's bound (3 × LeaderTimeout + 3 × FrequentInterval);
// the era keeps no made-up key. (Before the rule: s02 and s05 unled
// after 30 s, era 2 knowing 2,736 keys.)
func TestBogusReportsDoNotStallAnEraStart(t *testing.T) {
	s := calmSim(t, 1, 3, 6)
	h := s.holder
	s.log("attack: the coordinator %s is killed; a liar reports a new ID every 20 ms", h.id)
	s.kill(h)
	n := 0
	var c *Coordinator
	bound := 3*attackTiming.lt + 3*attackTiming.fi
	start := s.now
	ledAt := time.Duration(-1)
	for s.now-start < 30*time.Second {
		s.step(s.now + 10*time.Millisecond)
		if ledAt < 0 && s.allLed() {
			ledAt = s.now - start
		}
		if p := s.holder; p != nil && p.c != nil && p.up {
			c = p.c
			n++
			s.cdo(p, c, c.Reported(p.local(s.now), fmt.Sprintf("bogus-%d", n), Entry{Session: "x"}))
		}
	}
	if c == nil {
		t.Fatal("no coordinator was elected after the kill")
	}
	t.Logf("after 30 s: era %d knows %d keys (%d reports), allRead set: %v, unled: %v", c.term, len(c.keys), n, !c.allRead.IsZero(), s.unled())
	for id := range c.keys {
		if strings.HasPrefix(id, "bogus-") {
			t.Errorf("era %d keeps key %q, which only a report named", c.term, id)
			break
		}
	}
	if ledAt < 0 || ledAt > bound {
		t.Errorf("every shard led again only at %v after the coordinator's kill (-1: not in 30 s); the bound is %v", ledAt, bound)
	}
}

// TestReportOfAKeyTheStoreRefusesDoesNotStallAnEraStart is the
// one-request form of TestBogusReportsDoNotStallAnEraStart: one report,
// sent after the era's first listing, for ID "a\x00b", a key MinIO
// refuses on every GET (400 XMinioInvalidObjectName, measured on the
// pinned MinIO through s3store). The peer handler now refuses such an ID
// (next.CheckID), and the core drops a report for an ID no listing
// showed, so the era's first grant comes as without the report. (Before:
// the failed read was asked again for ever, allRead never set, no grant
// in 60 s.)
//
// Schedule (core level; era 1, shards a to d, workers w1 and w2 at
// FrequentInterval 1 s, LeaderTimeout 3 s; every call answers in 10 ms,
// the refused key's reads with the store's error): the first listing
// shows w1 and w2; one report for "a\x00b" arrives at 5 ms. Without the
// report the first grant is at 3.05 s; with it, it must be within section
// 6's bound.
func TestReportOfAKeyTheStoreRefusesDoesNotStallAnEraStart(t *testing.T) {
	refused := errors.New("s3store: get s3://b/pools/t/workers/a\x00b.json: XMinioInvalidObjectName: Object name contains unsupported characters")
	for _, lie := range []bool{false, true} {
		c := NewCoordinator(CoordConfig{Shards: []string{"a", "b", "c", "d"}, FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second, Mark: "m"}, 1)
		seq := map[string]uint64{"w1": 1, "w2": 1}
		applied := map[string]Ver{}
		type call struct {
			at time.Duration
			e  Effect
		}
		var q []call
		push := func(d time.Duration, fx []Effect) {
			for _, e := range fx {
				if e.Op != OpTimer {
					q = append(q, call{d + 10*time.Millisecond, e})
				}
			}
		}
		push(0, c.Tick(at(0)))
		granted := time.Duration(-1)
		lied := false
		for d := time.Duration(0); d < 60*time.Second && granted < 0; d += 5 * time.Millisecond {
			now := at(d)
			if lie && !lied && c.listed {
				lied = true
				push(d, c.Reported(now, "a\x00b", Entry{Session: "x"}))
			}
			var due []call
			rest := q[:0]
			for _, x := range q {
				if x.at <= d {
					due = append(due, x)
				} else {
					rest = append(rest, x)
				}
			}
			q = rest
			for _, x := range due {
				e := x.e
				switch e.Op {
				case OpGetRoster:
					push(d, c.RosterRead(now, nil, "", nil))
				case OpList:
					push(d, c.Listed(now, map[string]Entry{"w1": {Session: fmt.Sprintf("w1.%d", seq["w1"])}, "w2": {Session: fmt.Sprintf("w2.%d", seq["w2"])}}, nil))
				case OpGetSession:
					if e.Key != "w1" && e.Key != "w2" {
						push(d, c.SessionRead(now, e.Key, nil, "", refused))
						break
					}
					data := Marshal(Session{V: wireVersion, ID: e.Key, Session: "s" + e.Key, Seq: seq[e.Key], TTL: 3000, Applied: applied[e.Key], AppliedBy: "m"})
					push(d, c.SessionRead(now, e.Key, data, fmt.Sprintf("%s.%d", e.Key, seq[e.Key]), nil))
				case OpGetPage:
					if e.Key != "w1" && e.Key != "w2" {
						push(d, c.PageRead(now, e.Key, nil, "", refused))
						break
					}
					push(d, c.PageRead(now, e.Key, nil, "", nil))
				case OpPutPage:
					p, _ := ParsePage(e.Data, e.Key)
					if len(p.Shards) > 0 && granted < 0 {
						granted = d
					}
					push(d, c.PagePut(now, e.Key, fmt.Sprintf("p%d", d), nil))
					seq[e.Key]++
					applied[e.Key] = p.Ver // the worker applies it at once
				case OpPutRoster:
					push(d, c.RosterPut(now, "r", nil))
				}
			}
			push(d, c.Tick(now))
		}
		t.Logf("report of a refused key %v: first grant at %v (-1: none in 60 s); allRead set: %v", lie, granted, !c.allRead.IsZero())
		if granted < 0 || granted > 12*time.Second {
			t.Errorf("with a report for a key the store refuses (%v): first grant at %v (-1: none in 60 s); %s", lie, granted, c.debug(at(60*time.Second)))
		}
	}
}
