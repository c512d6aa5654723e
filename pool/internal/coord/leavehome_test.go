package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestLeavingWorkerShardsGoBackHomeWhenOneDrainsSlowly (seventh review,
// finding 1): 4.4 promises that a rolling deploy moves a shard away and
// back, not on: a shard granted away from a worker whose session was over
// has it as home. Since a leaving session's target is 0, its shards are
// granted away as each one's Work returns, while the session is still
// live (leaving, draining the slow ones), so grant sets no home for them;
// when the worker comes back with its ID, the others give it shards by
// rank, not its own. With every drain quick the leaving session closes
// before the coordinator reads a write without them, and home is set.
// Schedule (FrequentInterval 1 s, LeaderTimeout 3 s, 12 shards, w0 to w3
// and era 1 from 0 s): at 10 s w1 leaves; one of its shards drains in
// 8 s, the others in 100 ms; once w1 has closed and every shard is led,
// w1 starts again; 15 s later it must lead the shards it led before.
func TestLeavingWorkerShardsGoBackHomeWhenOneDrainsSlowly(t *testing.T) {
	for _, slow := range []time.Duration{100 * time.Millisecond, 8 * time.Second} {
		t.Run(fmt.Sprint("drain=", slow), func(t *testing.T) {
			const fi, lt = time.Second, 3 * time.Second
			var shards []string
			for i := range 12 {
				shards = append(shards, fmt.Sprintf("s%02d", i))
			}
			h := newScript(t, fi, lt, shards)
			quick := func(string, error) time.Duration { return 100 * time.Millisecond }
			for i := range 4 {
				h.addWorker(fmt.Sprintf("w%d", i), quick)
			}
			h.elect(1)
			h.run(10 * time.Second)
			w1 := h.ws["w1"]
			before := w1.running()
			if len(h.led()) != 12 || len(before) != 3 {
				t.Fatalf("10 s: %d shards led, w1 leads %v; want 12 and 3 (the schedule does not hold)", len(h.led()), before)
			}
			slowOne := sortedKeys(before)[0]
			w1.drain = func(sh string, _ error) time.Duration {
				if sh == slowOne {
					return slow
				}
				return 100 * time.Millisecond
			}
			h.wdo(w1, w1.w.Leave(h.local()))
			closed := time.Duration(-1)
			for d := h.now; d < 60*time.Second && closed < 0; d += 100 * time.Millisecond {
				h.run(d)
				if w1.w.st == wDone && len(h.led()) == 12 {
					closed = d
				}
			}
			if closed < 0 {
				t.Fatal("w1 did not close, or its shards were not led again, within 60 s")
			}
			// w1 starts again with its ID: a new process, a new Worker.
			w1.up = false
			n := 0
			nw := &scriptWorker{id: "w1", up: true, leads: map[string]*scriptLead{}, drain: quick}
			nw.w = NewWorker(WorkerConfig{ID: "w1", FrequentInterval: fi, LeaderTimeout: lt,
				NewSession: func() string { n++; return fmt.Sprintf("w1.r%d", n) }})
			h.ws["w1"] = nw
			h.wdo(nw, nw.w.Start(h.local()))
			h.run(closed + 15*time.Second)
			after := nw.running()
			for sh := range before {
				if _, ok := after[sh]; !ok {
					t.Errorf("w1 led %v before it left, %v after it came back: %s was handed on, not back (4.4, home)", sortedKeys(before), sortedKeys(after), sh)
					break
				}
			}
			for _, f := range h.fails {
				t.Error(f)
			}
		})
	}
}
