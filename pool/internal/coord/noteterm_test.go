package coord

import (
	"testing"
	"time"
)

// TestSessionWriteNamesTheEraItSaysApplied (seventeenth review, rev17b,
// 4.6: "every worker that applies a page hands that era to its
// Elector"). The executor hands the era to the election from the
// session write that says the page is applied. A page that revokes a
// running shard is applied only once that shard's Work has drained,
// maybe long after the page was read (in peer mode no page read may
// follow): the write made then must name the page's era, and the writes
// before it the era applied before.
func TestSessionWriteNamesTheEraItSaysApplied(t *testing.T) {
	ms := func(d int) time.Time { return at(time.Duration(d) * time.Millisecond) }
	w := liveWorker(t)
	sess, _ := w.Session()
	w.PageRead(ms(100), page(sess, Ver{1, 1}, map[string]uint64{"a": 1<<32 | 1}), "p1", nil)
	w.SessionPut(ms(110), ms(100), "e2", nil)
	if _, v := w.Session(); v != (Ver{1, 1}) {
		t.Fatalf("applied %v after the first page; want {1 1}", v)
	}
	// Era 5's page revokes a: its Work drains, so the page is taken, not applied.
	fx := w.PageRead(ms(200), page(sess, Ver{5, 1}, nil), "p2", nil)
	if _, ok := find(fx, OpStop); !ok {
		t.Fatalf("effects %v; want a's Work stopped", ops(fx))
	}
	e, ok := find(fx, OpPutSession)
	if !ok || e.Term != 1 {
		t.Fatalf("the write after taking era 5's page: %v, Term %d; want a write naming era 1 (a still drains)", ops(fx), e.Term)
	}
	w.SessionPut(ms(210), ms(200), "e3", nil)
	// a's Work returns: the page is applied, and the write that says so names era 5.
	fx = w.WorkDone(ms(300), "a")
	if e, ok := find(fx, OpPutSession); !ok || e.Term != 5 {
		t.Fatalf("the write once a drained: %v, Term %d; want a write naming era 5", ops(fx), e.Term)
	}
}
