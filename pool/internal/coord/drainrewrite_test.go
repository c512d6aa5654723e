package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestDrainingWorkersPageIsNotRewrittenEveryTwoIntervals (sixth review,
// finding 2): while a worker drains a revoked shard's Work, its session
// renews without acknowledging the revoking page (W3 waits for the
// drain), which 4.5's "renews but does not apply its page within two
// FrequentIntervals" takes for a lost page: the coordinator reads the page
// and writes it again, every two or three intervals for as long as the
// drain lasts, and keeps every rewrite among the unacknowledged pages
// (hist), which plan's holds walk at every change of that key. Schedule
// (FrequentInterval 1 s, LeaderTimeout 3 s, 8 shards, 3 workers; w3 joins
// at 10 s and two shards are revoked; their Work takes an hour to shut
// down): 110 s into the drain each draining worker has 40
// unacknowledged pages and the coordinator has written 72 pages (a GET
// and a PUT each, and in peer mode a page read by the worker), where 2
// and none would do; both grow with the drain, without bound.
func TestDrainingWorkersPageIsNotRewrittenEveryTwoIntervals(t *testing.T) {
	const fi, lt = time.Second, 3 * time.Second
	var shards []string
	for i := range 8 {
		shards = append(shards, fmt.Sprintf("s%d", i))
	}
	h := newScript(t, fi, lt, shards)
	drain := func(shard string, cause error) time.Duration {
		if cause == nil {
			return time.Hour // a revocation: the Work shuts down slowly
		}
		return 100 * time.Millisecond
	}
	for i := range 3 {
		h.addWorker(fmt.Sprintf("w%d", i), drain)
	}
	h.elect(1)
	h.run(10 * time.Second)
	h.addWorker("w3", drain)
	h.run(20 * time.Second)
	before := h.c.n
	h.run(130 * time.Second)
	for _, id := range h.order {
		if n := len(h.c.keys[id].page.hist); n > 2 {
			t.Errorf("%s: %d unacknowledged pages kept after a drain of 2 minutes; want at most 2 (the revoking page and one written again)", id, n)
		}
	}
	if n := h.c.n - before; n > 10 {
		t.Errorf("%d page writes in the 110 s of the drain, with no change in the pool; want a handful", n)
	}
	for _, f := range h.fails {
		t.Error(f)
	}
}
