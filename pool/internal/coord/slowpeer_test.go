package coord

// Seventeenth review (rev17b): section 6's bound in peer mode (4.8: the
// coordinator lists every LeaderTimeout/2 and reads a key on a report),
// with the coordinator's calls answering within half a FrequentInterval,
// as section 6 states its bound for. The schedule is slowreadwithin_test.go's
// (3 workers over 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s, no
// fault but the restart of the coordinating worker; the coordinator's
// listing replies, or listing and session-read replies, held 0.5 s after
// they land), in peer mode. Bound: 3 x 3 s + 3 x 1 s = 12 s.

import (
	"flag"
	"testing"
	"time"
)

var slowPeerTook = flag.Duration("slowpeer.took", 500*time.Millisecond, "TestPeerSlowCallsExplore: reply delay after landing")
var slowPeerWhat = flag.String("slowpeer.what", "both", "TestPeerSlowCallsExplore: reads, lists or both")
var slowPeerHolder = flag.Bool("slowpeer.holder", false, "TestPeerSlowCallsExplore: restart the coordinating worker")
var slowPeerSeeds = flag.Int("slowpeer.seeds", 5, "TestPeerSlowCallsExplore: seeds")
var slowPeerFirst = flag.Int("slowpeer.first", 1, "TestPeerSlowCallsExplore: first seed")
var slowPeerTrace = flag.String("slowpeer.trace", "", "log each read of this key after the restart")
var slowPeerStorage = flag.Bool("slowpeer.storage", false, "TestPeerSlowCallsExplore: control, storage mode")

// TestPeerRestartedWorkersShardsAreLedAgainWhileListingsAnswerLate
// (liveness, section 6: "for good"; a regression of f7d5d22, which
// dropped 19fffc0's stale-listing rule). Peer mode, listing replies held
// 0.2 s after they land (a fifth of an interval), no other fault; w1 (not
// the coordinator) restarts at about 15.7 s. Its old session is a ghost,
// so each report of w1's renewals makes the era read w1's key
// (haunted). Every other listing (LeaderTimeout/2 apart, against
// renewals an interval apart) lands just before a renewal of w1 lands;
// the report-triggered read returns that renewal (e81 at 18.96 s) before
// the listing's reply (19.08 s), which shows the renewal before it (e78,
// which a read returned at 17.96 s). entry() takes e78 for a write no
// read returned (sight, listed, listedSent); the next read returns e81
// with n = 1 against s.Seq - base = 1, the count excuse (n < s.Seq -
// base) fails, readGhosts moves the ghosts' waits (one of them holding
// every shard) a lease on, and the pattern recurs every ~3.1 s: w1's
// shards are never granted (40 s judged). 4.3 extends a ghost's wait for
// "writes listed that no read returned"; e78 was returned.
//
// Seeds 1-100 of this schedule (TestPeerSlowCallsExplore -slowpeer.what
// lists): at 0.1 s 0 past the bound; 0.2 s 8 past, 2 never led (seeds 1,
// 90); 0.3 s 16 past, 6 never; 0.5 s 43 past, 13 never. At 4d87339 (the
// parent of f7d5d22) at 0.5 s: 0 of 100 past (worst 4.9 s). Storage mode
// (listing every interval) at 0.5 s: 0 of 100 (worst 5.5 s).
func TestPeerRestartedWorkersShardsAreLedAgainWhileListingsAnswerLate(t *testing.T) {
	slowPeer(t, 1, 1, "lists", false, false, 200*time.Millisecond)
}

// TestPeerCoordinatorsOwnKeyIsNotHauntedForGoodByListingsWithinHalfAnInterval
// (liveness, section 6; a regression of f7d5d22, which dropped 19fffc0's
// stale-listing rule). Seed 16, peer mode, listing replies 0.5 s after
// landing, the coordinating worker w0 restarts at 16.42 s; w2 is elected
// (term 2). Its era start leaves a ghost holding every shard (all) on
// its own key w2. From then on, about every other listing lands at the
// store just before w2's own renewal lands; w2's report of that renewal
// makes the era read its key (haunted), and the read returns (e135 at
// 34.36 s) before the listing's reply (34.43 s), which shows the renewal
// before it (e132, which a read had returned at 33.32 s). entry() takes
// e132 for a new write (sight, listed, listedSent), the next read returns
// e135 with n = 1 and s.Seq - base = 1, so the count excuse (n < s.Seq -
// base) fails, readGhosts moves the all-ghost's wait a lease on, and
// Ready stays false: w0's shards s02 and s05 are never granted (40 s
// judged). 4.3 counts "writes listed that no read returned"; e132 was
// returned. At 4d87339 (before f7d5d22) seeds 1-30 of this schedule are
// all led within 7.5 s; at main seed 16 never is. Storage mode (listing
// every interval): 0 of 30 past the bound (worst 7.1 s).
func TestPeerCoordinatorsOwnKeyIsNotHauntedForGoodByListingsWithinHalfAnInterval(t *testing.T) {
	slowPeer(t, 16, 1, "lists", true, false, 500*time.Millisecond)
}

// TestPeerEraStartsWithinSection6sBoundWhenCallsAnswerWithinHalfAnInterval
// (liveness, section 6, marginal): the same schedule with listing and
// session-read replies both 0.5 s after landing. Seeds 1-30: 13 past
// 12 s (12.26-14.85 s; seed 24 worst), the same at 4d87339; after the
// seventeenth review's mends (a first page waits for the era's reads;
// the stale listing of a write of the session in view) 4 of 30, and in
// seeds 1-2,500 at most 13.9 s (seed 1283; at 0.4 s 12.0 s in 1,000, at
// 0.3 s 8.6 s in 300). Section 6 now gives peer mode a LeaderTimeout
// more (15 s here): its listings come LeaderTimeout/2 apart, and an
// era's start waits on several of them. Storage mode
// 0 of 30 (worst 9.8 s), with no slow call 0 of 30 (worst 6.4 s), at 0.3
// s 0 of 30 (worst 9.4 s). Section 6 states its bound for calls within
// half a FrequentInterval, in both modes. In seed 24 the new era's first
// pages go out at 20.08 s and w0's shards only at 31.12 s: the old
// session's ghost and the era's all-ghosts wait while every renewal a
// report names is read and every listing, LeaderTimeout/2 apart, comes
// in 0.5 s late.
func TestPeerEraStartsWithinSection6sBoundWhenCallsAnswerWithinHalfAnInterval(t *testing.T) {
	slowPeer(t, 1, 30, "both", true, false, 500*time.Millisecond)
}

// TestPeerSlowCallsExplore runs the schedule with the flags above (by
// default 5 seeds of a restarted worker that does not coordinate, listing
// and read replies 0.5 s late), each held to section 6's peer-mode bound.
func TestPeerSlowCallsExplore(t *testing.T) {
	slowPeer(t, *slowPeerFirst, *slowPeerSeeds, *slowPeerWhat, *slowPeerHolder, *slowPeerStorage, *slowPeerTook)
}

func slowPeer(t *testing.T, first, seeds int, what string, holder, storage bool, took time.Duration) {
	t.Helper()
	tm := attackTiming
	bound := 3*tm.lt + 3*tm.fi
	if !storage {
		bound += tm.lt // section 6: peer mode's listings are LeaderTimeout/2 apart
	}
	late := 0
	worst := time.Duration(0)
	for seed := uint64(first); seed < uint64(first+seeds); seed++ {
		s := newSim(seed, simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute, peer: !storage})
		s.calm, s.keep = true, true
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Logf("seed %d: not balanced after a cold start", seed)
			continue
		}
		s.step(s.now + 2*tm.lt)
		slow := s.slowCalls(what, took)
		for end := s.now + 2*tm.lt; s.now < end; {
			s.step(s.now + time.Millisecond)
			slow()
		}
		if !s.balanced() {
			t.Logf("seed %d: not balanced before the restart", seed)
			continue
		}
		v := s.victim()
		if holder {
			v = s.holder
		}
		if v == nil {
			t.Logf("seed %d: no victim", seed)
			continue
		}
		s.log("attack: %s restarts (calls %v slower)", v.id, took)
		s.kill(v)
		s.start(v)
		at := s.now
		var lastRead time.Time
		lastSight := ""
		for s.now < at+40*time.Second && !s.allLed() {
			s.step(s.now + time.Millisecond)
			slow()
			if h := s.holder; *slowPeerTrace != "" && h != nil && h.c != nil && h.c.keys[*slowPeerTrace] != nil {
				k := h.c.keys[*slowPeerTrace]
				all := 0
				for _, g := range h.c.ghosts {
					if g.all {
						all++
					}
				}
				if k.sight != lastSight {
					lastSight = k.sight
					t.Logf("%v: %s sight %q (listing out %v)", s.now, *slowPeerTrace, k.sight, h.c.listing)
				}
				if k.getAt != lastRead && !k.getting {
					lastRead = k.getAt
					seq := uint64(0)
					if k.cur != nil {
						seq = k.cur.seq
					}
					t.Logf("%v: read of %s sent %v returned %q (view seq %d); listed %q at %v (listing sent %v), unread %d, listedSeq %d; all-ghosts %d, listing out %v", s.now, *slowPeerTrace, h.realAt(k.getAt), k.readTag, seq, k.listed, h.realAt(k.listedAt), h.realAt(k.listedSent), k.unread, k.listedSeq, all, h.c.listing)
				}
			}
		}
		d := s.now - at
		worst = max(worst, d)
		if d > bound {
			late++
			if late == 1 {
				t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 400))
			}
			if h := s.holder; h != nil && h.c != nil {
				t.Logf("seed %d: coordinator %s at the end: %s", seed, h.id, h.c.debug(h.local(s.now)))
				for _, g := range h.c.ghosts {
					t.Logf("  ghost on %s all=%v", g.id, g.all)
				}
				for _, id := range sortedKeys(h.c.keys) {
					k := h.c.keys[id]
					t.Logf("  %s: sight %q listed %q unread %d listedSent %v readTag %q", id, k.sight, k.listed, k.unread, h.realAt(k.listedSent), k.readTag)
				}
			}
			t.Errorf("seed %d: every shard led %.3fs after %s restarted; section 6 bounds it by %v", seed, d.Seconds(), v.id, bound)
		} else {
			t.Logf("seed %d: every shard led %.3fs after the restart", seed, d.Seconds())
		}
		if len(s.fails) > 0 {
			t.Errorf("seed %d: %s", seed, s.fails[0])
		}
	}
	t.Logf("%d of %d seeds past the bound; worst %v", late, seeds, worst)
}
