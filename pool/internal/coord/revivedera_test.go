package coord

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var revivedEraSeeds = flag.Int("revivedera.seeds", 10, "TestSessionLeadingBesideItsNewOwnersAtAnErasStartIsNotLedTwiceForGood: seeds")

var revivedEraDebug = flag.Bool("revivedera.debug", false, "TestSessionLeadingBesideItsNewOwnersAtAnErasStartIsNotLedTwiceForGood: log each seed's ledger")

// TestSessionLeadingBesideItsNewOwnersAtAnErasStartIsNotLedTwiceForGood
// (seventeenth review, rev17a). Section 7's fourth exception: "A session
// taken to be over whose own writes are put back twice: it leads beside
// new owners until its next page drops them (two intervals)". The page
// that drops them is the era's revival page (4.3: a revived session holds
// every shard until it takes a page written after the read; firstPages
// leaves out what this era gave another live session). Here the era
// that gave the shards away resigns before it reads the revived session;
// the next era finds both owners live at its start, both early (4.1),
// and gives each its first page naming what it lists: the victim's page
// names the shards at their old terms, the new owners' pages name the
// same shards (grantedElsewhere only knows this era's grants). Nothing
// drops them afterwards unless a target trims them: two live owners far
// past the exception's bound, for good where the targets keep them.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// calm; an exact-bytes put-back keeps its ETag; no twin):
//  1. V paused after a write W0 the era read;
//  2. late in W0's lease V renews (W1) and is cut off the store; the
//     operator puts W0 back at once (section 7's second exception);
//  3. the era's read at W0's sighting + lease shows W0: V's session is
//     over, and its shards go to the other workers, who start them;
//  4. the coordinator resigns; the operator puts W1 back and V is back on
//     the store: V renews on W1 and goes on (the two put-backs of the
//     fourth exception);
//  5. the next era reads every session at its start: V and the new
//     owners, all early; its first pages name V's old shards to both.
//
// Judged from two FrequentIntervals after W1's lease (the bound the
// sixteenth review's tests give the fourth exception) for four leases.
// Found at b588ea1: seeds 1-10, 6 reach step 4 and all 6 lead a shard
// twice for the whole 12 s judged, and still at its end (seeds 1-30,
// -revivedera.seeds 30: 16 of 16; e.g. seed 2:
// era 2, ready, every session has taken its page; V's page names s00 at
// era 1's term beside w0's page naming s00 at 4294967303, and V's s04
// beside w2's; s01 and s02 are on no page, unled: section 6 fails too).
// It needs the fourth exception's two put-backs of V's own writes and a
// pause, plus an ordinary change of coordinator; no twin, no slow call.
// It breaks section 5 (no shard has two live leaderships) past the
// fourth exception's bound ("until its next page drops them"): the next
// era's first page does not drop them, and nothing later does. The
// overlap is the exception's; that it never ends is not.
//
// Mended (b950610, fdbf0df, a7644ff): a first page leaves out a shard
// another live session lists at a term as high as its own, any page of
// this era names for another, or a ghost holds; an era's first pages wait
// until its first listing's keys are all read. V's first page drops the
// new owners' shards (their terms are higher); V holds every shard until
// it takes that page.
func TestSessionLeadingBesideItsNewOwnersAtAnErasStartIsNotLedTwiceForGood(t *testing.T) {
	var ta tally
	forGood := 0
	for seed := uint64(1); seed <= uint64(*revivedEraSeeds); seed++ {
		a := newAttack(t, seed, 3, 6)
		v, k := a.v, a.k
		// 1.
		a.keepOnceRead()
		a.log("attack: %s paused at %s", v.id, a.etag)
		// 2.
		a.stepUntil(a.lease-*stalePutBack, func() bool { return false })
		if k.cur == nil || k.cur.session != a.sess {
			t.Logf("seed %d: V's session not in view before its renewal", seed)
			continue
		}
		if a.renewOnPutBack(a.now) == "" {
			t.Logf("seed %d: V did not renew", seed)
			continue
		}
		w1Data, w1Tag := a.o.data, a.o.etag
		a.restore(a.o, a.data, a.etag)
		a.log("attack: %s put back to W0 %s at once", a.key, a.etag)
		a.step(a.now + 150*time.Millisecond) // V's reply
		w1Lease := a.leaseEnd(v)
		// 3.
		if !a.stepUntil(w1Lease-300*time.Millisecond, func() bool { return k.over(a.sess) }) {
			t.Logf("seed %d: V's session not over before W1's lease (%.3fs)", seed, w1Lease.Seconds())
			continue
		}
		if !a.resignAndRenewOnW1(&ta, w1Data, w1Tag, w1Lease, &forGood) {
			continue
		}
	}
	ta.end(t, "V renewing on W1 put back beside its new owners as the era resigns")
	t.Logf("%d seeds still led twice at the end of the judged time", forGood)
}

// resignAndRenewOnW1 is steps 4 and 5 of both schedules, once V's
// session is over (or a ghost ended) while W1's lease runs: it waits for
// a new owner to start one of V's shards, then the coordinator resigns,
// W1 is put back and V is back on the store; once V has renewed on it,
// the overlap is judged from two FrequentIntervals after W1's lease for
// four leases. It reports false, having said why, when the seed did not
// get there.
func (a *attack) resignAndRenewOnW1(ta *tally, w1Data []byte, w1Tag string, w1Lease time.Duration, forGood *int) bool {
	t, v, seed, tm := a.t, a.v, a.seed, attackTiming
	twice := func() bool { // some shard of V's led by another worker too
		for _, sh := range sortedKeys(v.ls) {
			if l := v.ls[sh]; !a.live(v, l) {
				continue
			}
			for _, q := range a.procs {
				if l := q.ls[sh]; q != v && l != nil && a.live(q, l) {
					return true
				}
			}
		}
		return false
	}
	if !a.stepUntil(w1Lease-150*time.Millisecond, twice) {
		t.Logf("seed %d: no new owner started V's shards before W1's lease (%.3fs)", seed, w1Lease.Seconds())
		return false
	}
	a.step(a.now + 50*time.Millisecond)
	// 4.
	old := a.resign()
	a.restore(a.o, w1Data, w1Tag)
	v.cutTill = a.now
	a.log("attack: coordinator %s resigns; %s put back to W1 %s; %s back on the store", old.id, a.key, w1Tag, v.id)
	if !a.stepUntil(w1Lease, func() bool { return a.o.etag != w1Tag }) {
		t.Logf("seed %d: V did not renew on W1 put back", seed)
		return false
	}
	ta.reached++
	// 5.
	a.step(w1Lease + 2*tm.fi)
	first, last := a.overlap(v, 4*tm.lt, func() {})
	if *revivedEraDebug {
		t.Logf("seed %d: ledger tail:\n%s", seed, tail(a.ledger.String(), 400))
	}
	if last >= a.now-100*time.Millisecond {
		*forGood++
	}
	era := "no era"
	if a.holder != nil && a.holder.c != nil {
		c := a.holder.c
		era = fmt.Sprintf("era %d (%s, was %s), ready %v", c.term, a.holder.id, old.id, c.Ready(a.holder.local(a.now)))
		for _, id := range sortedKeys(c.keys) {
			if kk := c.keys[id]; kk.cur != nil {
				era += fmt.Sprintf("; %s took %v page %v", id, kk.cur.took, kk.page.shards)
			}
		}
	}
	if first > 0 {
		ta.overlapped++
		t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (W1's lease till %.3fs; %s)", seed, v.id, first.Seconds(), last.Seconds(), w1Lease.Seconds(), era)
	}
	return true
}

// TestGhostLeadingBesideItsNewOwnersAtAnErasStartIsNotLedTwiceForGood
// (seventeenth review, rev17a): the same through a ghost (4.3, "written
// over") rather than "silent": the schedule of
// TestGhostRenewingOnItsWritePutBackAfterItsWaitIsNotLedTwice, with the
// coordinator resigning before W1 is put back.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// calm; an exact-bytes put-back keeps its ETag; no twin):
//  1. V paused after a write W0 the era read; the operator deletes V's
//     key; the era reads the absence: V's session S is a ghost;
//  2. late in W0's lease the operator puts W0 back; V renews on it (W1)
//     and is cut off the store; the operator deletes the key at once;
//  3. the ghost's deciding read shows the absence and ends it; V's
//     shards go to the other workers, who start them;
//  4. the coordinator resigns; the operator puts W1 back and V is back on
//     the store: V renews on W1 and goes on;
//  5. the next era's first pages name V's old shards to V and to their
//     new owners.
//
// Found at b588ea1: seeds 1-10, 1 reaches step 4 (seeds 1-30: 3), and
// every one leads a shard twice for the whole 12 s judged and at its end.
func TestGhostLeadingBesideItsNewOwnersAtAnErasStartIsNotLedTwiceForGood(t *testing.T) {
	var ta tally
	forGood := 0
	for seed := uint64(1); seed <= uint64(*revivedEraSeeds); seed++ {
		a := newAttack(t, seed, 3, 6)
		// 1-3 (ghostafterend_test.go).
		w1Data, w1Tag, w1Lease, _, ok := a.ghostEndedOverW1()
		if !ok {
			continue
		}
		if !a.resignAndRenewOnW1(&ta, w1Data, w1Tag, w1Lease, &forGood) {
			continue
		}
	}
	ta.end(t, "V renewing on W1 put back beside its new owners as the era resigns (a ghost)")
	t.Logf("%d seeds still led twice at the end of the judged time", forGood)
}
