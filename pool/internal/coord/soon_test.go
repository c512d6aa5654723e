package coord

import (
	"testing"
	"time"
)

// TestEraFirstPagesSaySoonAndGrantsDoNot: an era's first page to each
// live session says Soon (its grants come within a lease, at the gate);
// a page that grants does not.
func TestEraFirstPagesSaySoonAndGrantsDoNot(t *testing.T) {
	c := NewCoordinator(CoordConfig{Shards: []string{"a", "b", "c", "d"}, FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second}, 1)
	c.Tick(at(0))
	c.RosterRead(at(0), nil, "", nil)
	c.Listed(at(0), map[string]Entry{"w1": {Session: "e1"}, "w2": {Session: "e2"}}, nil)
	first := map[string]Page{}
	for _, id := range []string{"w1", "w2"} {
		c.PageRead(at(0), id, nil, "", nil)
		for _, e := range c.SessionRead(at(0), id, session(id, "s"+id[1:], 1, Ver{}, nil), "e"+id[1:], nil) {
			if e.Op == OpPutPage {
				p, err := ParsePage(e.Data, e.Key)
				if err != nil {
					t.Fatal(err)
				}
				first[e.Key] = p
			}
		}
	}
	for _, id := range []string{"w1", "w2"} {
		if p, ok := first[id]; !ok || !p.Soon {
			t.Errorf("the era's first page to %s = %+v (written: %v); want one that says Soon", id, p, ok)
		}
		c.PagePut(at(100*time.Millisecond), id, "p"+id, nil)
		c.SessionRead(at(time.Second), id, session(id, "s"+id[1:], 2, Ver{1, 2}, nil), "f"+id, nil)
	}
	n := 0
	for _, e := range gateListing(c, at(3*time.Second)) {
		if e.Op != OpPutPage {
			continue
		}
		n++
		if p, _ := ParsePage(e.Data, e.Key); p.Soon || len(p.Shards) == 0 {
			t.Errorf("grant page to %s = %+v; want shards, not Soon", e.Key, p)
		}
	}
	if n != 2 {
		t.Errorf("the gate wrote %d pages; want a grant to each worker", n)
	}
}

// TestSoonPageIsReadEveryQuarterIntervalForALease: a worker that takes a
// page saying Soon reads its page every quarter FrequentInterval for
// LeaderTimeout + FrequentInterval, then once per interval again, after
// its renewals, as before (3).
func TestSoonPageIsReadEveryQuarterIntervalForALease(t *testing.T) {
	w := liveWorker(t) // FrequentInterval 1 s, LeaderTimeout 3 s
	soon := Marshal(Page{V: wireVersion, Ver: Ver{1, 1}, ID: "w1", Session: "s1", Soon: true})
	var reads []time.Duration
	var queue []func() []Effect
	next := time.Duration(0)
	do := func(now time.Duration, fx []Effect) {
		for _, e := range fx {
			switch e.Op {
			case OpTimer:
				next = e.At.Sub(t0)
			case OpPutSession:
				queue = append(queue, func() []Effect { return w.SessionPut(at(now+time.Millisecond), at(now), "e", nil) })
			case OpGetPage:
				reads = append(reads, now)
				queue = append(queue, func() []Effect { return w.PageRead(at(now+time.Millisecond), soon, "p1", nil) })
			}
		}
	}
	do(20*time.Millisecond, w.PageRead(at(20*time.Millisecond), soon, "p1", nil))
	for next < 12*time.Second {
		now := next
		do(now, w.Tick(at(now)))
		for len(queue) > 0 {
			f := queue[0]
			queue = queue[1:]
			do(now, f())
		}
	}
	count := func(from, to time.Duration) int {
		n := 0
		for _, r := range reads {
			if r >= from && r < to {
				n++
			}
		}
		return n
	}
	// From 20 ms to 4.02 s: every 250 ms (16), the reads after renewals
	// falling in with them or beside them.
	if n := count(20*time.Millisecond, 4*time.Second); n < 15 {
		t.Errorf("%d page reads in the 4 s after a Soon page; want one every quarter second (reads at %v)", n, reads)
	}
	if n := count(6*time.Second, 12*time.Second); n != 6 {
		t.Errorf("%d page reads from 6 s to 12 s; want one per interval (reads at %v)", n, reads)
	}
}
