package coord

// When a coordinator steps down (4.5, 4.6), and what the next election
// starts from.

import (
	"errors"
	"testing"
	"time"
)

// TestOneFailedListingDoesNotDeposeAPeerModeCoordinator: in peer mode the
// coordinator lists every LeaderTimeout/2 (4.8) and, in a stable pool,
// makes no other store call: the workers' reports change each session's
// sighting at every renewal, so no wait runs out and nothing is read
// beyond the listing's one key in turn. Its rule "a coordinator whose
// store calls have all failed for LeaderTimeout steps down" (4.5) then
// fires on one failed listing: the next one returns just after
// LeaderTimeout without a success, and any report in between finds the
// gap over LeaderTimeout. One listing that fails (in the executor, after
// its retries at 0, 100 ms and 1 s: a store blip of a second or two) ends
// the era: a new election, a new era's reads of every session and
// page, and a lease's wait before it grants again (a worker that dies
// meanwhile waits that much longer). Liveness and cost, not safety.
//
// Schedule (core level; era 1, shards a to d, workers w1 and w2 at
// FrequentInterval 1 s, LeaderTimeout 3 s, listing every 1.5 s, reports
// after every renewal; listings take 40 ms, reads and writes 20 ms): the
// pool balances; the listing sent at 13 s fails; the next, sent at
// 14.5 s, takes 150 ms (a slower LIST), and the coordinator's tick at
// 14.57 s finds no success since the read that followed the listing of
// 11.5 s (at 11.56 s): it steps down. (Since reports no longer move a
// key's sighting, the listings' phase differs, and the reads of keys whose
// wait ran out since the last good listing return exactly LeaderTimeout
// after that listing's read at equal latencies: the reads too are slower
// after the failure, 60 ms, as the listings are.) It must not: one failed call of a
// healthy store is not "all calls failed for LeaderTimeout". (In storage
// mode the listings come every FrequentInterval and the gap is two of
// them; the rule bites there only where LeaderTimeout < 2 ×
// FrequentInterval plus a LIST's latency.)
func TestOneFailedListingDoesNotDeposeAPeerModeCoordinator(t *testing.T) {
	p := newPair(t, false, false)
	failed := false
	p.store = func(d time.Duration, e Effect) (time.Duration, error) {
		switch e.Op {
		case OpList:
			if d >= 12*time.Second && !failed {
				failed = true
				t.Logf("t=%v: this listing fails", d)
				return 40 * time.Millisecond, errors.New("503 Slow Down")
			}
			if failed {
				return 150 * time.Millisecond, nil // the listings after the failure are slower
			}
			return 40 * time.Millisecond, nil
		case OpGetSession:
			if failed {
				return 60 * time.Millisecond, nil // the store is slower after the failure
			}
			return 20 * time.Millisecond, nil
		case OpGetPage, OpPutPage:
			return 20 * time.Millisecond, nil
		}
		return 0, nil
	}
	p.watch = func(d time.Duration, e Effect) {
		if e.Op != OpStepDown {
			return
		}
		if !failed {
			t.Fatalf("t=%v: stepped down before the listing failed: %v", d, e.Err)
		}
		t.Fatalf("t=%v: one failed listing deposed the coordinator: %v", d, e.Err)
	}
	p.run(20*time.Second, func(d time.Duration) {
		for _, id := range []string{"w1", "w2"} {
			if p.due(d, id) {
				p.renew(d, id)
				p.report(d, id, Entry{})
			}
		}
	})
	if !failed {
		t.Fatalf("no listing after 12 s: the schedule does not test the rule")
	}
	if w1, w2 := p.ws["w1"].s.Leads, p.ws["w2"].s.Leads; len(w1)+len(w2) != 4 {
		t.Fatalf("the pool did not balance: %v %v", w1, w2)
	}
}

// TestElectionTermPutBackDoesNotStallThePool: the issue counts the
// coordinator's lockfile and term object put back to an earlier version
// among the operator's acts the pool must survive. Then the election's
// next terms may lie below the eras the pool's pages and sessions show
// (docs/protocol.md 1.1: a restored term object, with electors that have
// not seen the later terms, e.g. after a restart). Each era below the
// highest one shown steps down on its first read (4.6), and the next
// election takes only one term more: the pool has no deciding coordinator
// for as many elections as the terms went back, and shards that must move
// (a dead worker's) stay unled that long, far past the bound of section 6
// (3 × LeaderTimeout + 3 × FrequentInterval) after the faults stopped.
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout
// 3 s; no random fault): the pool runs at era 101 (the first era resigns
// at once and the election's term is set to 100); it balances; the
// operator puts the election's objects back to term 1, and the
// coordinator's process is killed (its shards must move). The other two
// must lead every shard within the bound. Today: eras 2 to 31 are elected
// in the next 60 s, each steps down on its first read ("worker w1 shows a
// page of era 101, after this era"), and the dead coordinator's shards
// are still unled after 60 s (about 2 s an era in the simulation, whose
// stepped-down process waits a lease before it campaigns again; the
// executor campaigns again at once).
func TestElectionTermPutBackDoesNotStallThePool(t *testing.T) {
	tm := attackTiming
	s := newSim(1, simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute})
	s.calm, s.keep = true, true
	// The first era (elected in newSim) resigns at once; the next is 101.
	s.term = 100
	if h := s.holder; h != nil {
		s.holder, h.c, h.noRunTill = nil, nil, s.now+h.tm.lt
	}
	if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
		t.Fatalf("not balanced after a cold start")
	}
	s.step(s.now + 2*tm.lt)
	h := s.holder
	era := s.term
	s.term = 1
	s.log("attack: the election's lockfile and term object put back to term 1 (era was %d); %s (the coordinator) killed", era, h.id)
	s.kill(h)
	took, ok := s.waitFor(60*time.Second, s.allLed)
	eras := s.term - 1
	if !ok || took > ledBound() || len(s.fails) > 0 {
		t.Logf("ledger tail:\n%s", tail(s.ledger.String(), 40))
		t.Fatalf("after the term went back from %d to 1 and the coordinator died: every shard led after %v (ok=%v; bound %v), %d eras elected meanwhile; the simulation's own check: %v",
			era, took, ok, ledBound(), eras, s.fails)
	}
}
