package coord

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

// TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags
// (thirteenth review): section 2 says listings "may lag for liveness;
// safety relies on an era's first listing showing every key written
// before it began ... for two things only" (the workers at the era's
// start, and which hold a closed session). Section 5, case 3, relies on a
// third: the gate listing (4.1) must show a hidden session's renewal that
// landed before the listing was sent ("so it landed before the gate
// listing, which shows the key at an ETag no read of the era returned").
// Here the gate listing lags the store by one write (it shows the key as
// the era's first reads did: absent), as section 2 allows: no gate read
// is owed, the era grants, and the hidden session, its last write put
// back, leads on beside the new owners. No schedule here breaks a store
// the pool supports (docs/stores.md: every backend's listing is strongly
// consistent); it shows that section 2's "for two things only" is too
// narrow, and what a lagging listing would cost.
//
// Schedule: TestUnseenSessionPutBackIsNotLedTwice's (V paused right after
// a write, its key deleted, the coordinator resigns; the next era reads
// the key absent; V's last write put back before the era's gate, V
// renews), with every listing that lands within gateLagWindow (2 s) of the
// put-back shown the key as absent.
func TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags(t *testing.T) {
	tm := timing{fi: 1500 * time.Millisecond, lt: 4 * time.Second}
	reached, overlapped := 0, 0
	for off := range *gateLagSeeds {
		s := newSim(uint64(1+off), simConfig{workers: *gateLagWorkers, shards: 2 * *gateLagWorkers, timing: &tm, maxWorkers: *gateLagWorkers, calmFor: time.Minute})
		s.calm, s.keep = true, true
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("not balanced after a cold start")
		}
		s.step(s.now + 2*tm.lt)
		v := s.victim()
		key := "workers/" + v.id
		o := s.store[key]
		data, etag := s.holdAfterWrite(v, o)
		h := s.holder
		s.etags++
		o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
		o.hist = append(o.hist, nil)
		if pg := s.store["assign/"+v.id]; pg != nil && *gateLagPage {
			// Its page too: no page of an earlier era names S, so the
			// next era makes no ghost of it (4.1) and only the gate is
			// left to find it.
			s.etags++
			pg.data, pg.etag = nil, fmt.Sprintf("e%d", s.etags)
			pg.hist = append(pg.hist, nil)
		}
		s.holder, h.c, h.noRunTill = nil, nil, s.now+h.tm.lt
		s.log("attack: %s paused, %s deleted (was %s), and its page; coordinator %s resigns", v.id, key, etag, h.id)
		if !s.putBackBeforeGrants(t, v, key, data, etag) {
			continue
		}
		// Every listing that lands within the window lags: it shows the
		// key as it was before the put-back (absent).
		until := s.now + gateLagWindow
		lagged := 0
		wrapped := map[*event]bool{}
		lag := func() {
			for _, e := range s.q {
				if e.what == "list lands" && !wrapped[e] && e.at < until {
					wrapped[e] = true
					fn := e.fn
					e.fn = func() {
						d, tag := o.data, o.etag
						o.data = nil
						fn()
						o.data, o.etag = d, tag
						lagged++
						s.log("attack: this listing lags: it does not show %s", key)
					}
				}
			}
		}
		var c *Coordinator
		first, last := s.overlap(v, *gateLagFor, func() {
			lag()
			if s.holder != nil && s.holder.c != nil {
				c = s.holder.c
			}
		})
		if lagged == 0 || c == nil {
			continue
		}
		reached++
		if *gateLagLedger {
			t.Logf("seed %d: ledger:\n%s", off+1, from(s.ledger.String(), "attack: put back", 200))
		}
		t.Logf("seed %d: %d listings lagged; era %d; overlap %.3fs-%.3fs", off+1, lagged, c.term, first.Seconds(), last.Seconds())
		if first > 0 || len(s.fails) > 0 {
			if overlapped == 0 {
				t.Logf("seed %d: ledger from the put-back:\n%s", off+1, from(s.ledger.String(), "attack: put back", 120))
			}
			overlapped++
			t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (a hidden session put back; the gate listing lagged by one write); the simulation's own check: %v", off+1, v.id, first.Seconds(), last.Seconds(), s.fails)
		}
	}
	if reached == 0 {
		t.Fatalf("no seed reached a lagging listing after the put-back")
	}
	t.Logf("%d seeds reached it; %d led a shard twice", reached, overlapped)
}

// gateLagWindow: how long after the put-back every listing lags.
const gateLagWindow = 2 * time.Second

var gateLagLedger = flag.Bool("gatelag.ledger", false, "TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags logs each ledger")

var gateLagPage = flag.Bool("gatelag.page", true, "TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags deletes the victim's page with its session")

var (
	gateLagWorkers = flag.Int("gatelag.workers", 6, "TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags's workers (shards: twice as many)")
	gateLagSeeds   = flag.Int("gatelag.seeds", 30, "TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags's seeds")
)

var gateLagFor = flag.Duration("gatelag.for", 12*time.Second, "how long TestHiddenSessionPutBackIsNotLedTwiceWhenTheGateListingLags watches after the put-back")
