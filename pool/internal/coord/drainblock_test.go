package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestDrainingWorkerDoesNotHoldBackANewErasGrants (sixth review, finding
// 1): a worker that drains a revoked shard's Work when a new era begins is
// early in that era (4.1) and acknowledges the era's first page only once
// its drain ends (W3), so Ready is false and the era grants nothing, to
// anyone, for that long: the crashed coordinator's own shards stay unled
// for the drain time of another worker's Work, without bound if that Work
// does not return. Schedule (FrequentInterval 1 s, LeaderTimeout 3 s, 8
// shards): w0, w1, w2 and era 1 at 0 s; w3 joins at 10 s, era 1 revokes a
// shard from each worker over its target; once they drain, the worker
// that drains nothing (the coordinator's process) is killed with era 1;
// era 2 begins a lease later. The killed worker's shards must be led again
// within section 6's bound, 3 × LeaderTimeout + 3 × FrequentInterval
// (shards.md promises 2 × LeaderTimeout for the coordinator's own). With
// a drain of 100 ms they are; with 60 s they are not.
func TestDrainingWorkerDoesNotHoldBackANewErasGrants(t *testing.T) {
	for _, slow := range []time.Duration{100 * time.Millisecond, 60 * time.Second} {
		t.Run(fmt.Sprint("drain=", slow), func(t *testing.T) {
			const fi, lt = time.Second, 3 * time.Second
			var shards []string
			for i := range 8 {
				shards = append(shards, fmt.Sprintf("s%d", i))
			}
			h := newScript(t, fi, lt, shards)
			drain := func(shard string, cause error) time.Duration {
				if cause == nil {
					return slow // a revocation: the Work shuts down in its own time
				}
				return 100 * time.Millisecond
			}
			for i := range 3 {
				h.addWorker(fmt.Sprintf("w%d", i), drain)
			}
			h.elect(1)
			h.run(10 * time.Second)
			if n := len(h.led()); n != 8 {
				t.Fatalf("10 s: %d shards led; want 8 (the schedule does not hold)", n)
			}
			h.addWorker("w3", drain)
			// Wait until a revocation is draining somewhere.
			var draining, victim *scriptWorker
			for d := 10 * time.Second; d < 20*time.Second && draining == nil; d += 10 * time.Millisecond {
				h.run(d)
				for _, id := range h.order[:3] {
					w := h.ws[id]
					if len(w.w.stopping) > 0 {
						draining = w
					}
				}
			}
			if draining == nil {
				t.Fatal("no revocation after the join: the schedule does not hold")
			}
			for _, id := range h.order[:3] {
				if w := h.ws[id]; len(w.w.stopping) == 0 && len(w.w.running) > 0 {
					victim = w
				}
			}
			if victim == nil {
				t.Fatal("every worker drains: the schedule does not hold")
			}
			victimShards := victim.running()
			crash := h.now
			t.Logf("t=%v: %s drains %v; %s (the coordinator's process) is killed, leading %v", crash, draining.id, keysOf(draining.w.stopping), victim.id, victimShards)
			h.kill(victim)
			h.depose()
			h.run(crash + lt) // the election's lease runs out
			h.elect(2)
			bound := crash + 3*lt + 3*fi
			h.run(bound)
			if unled := h.unled(victimShards); len(unled) > 0 {
				ready := h.c.Ready(h.local())
				again := h.ledAgain(victimShards, crash, crash+5*time.Minute)
				t.Errorf("shards %v of the crashed coordinator's process are unled %v after the crash (section 6's bound; era 2 Ready: %v, while %s drains); led again %v after the crash",
					unled, bound-crash, ready, draining.id, again)
			}
			for _, f := range h.fails {
				t.Error(f)
			}
		})
	}
}

func keysOf[V any](m map[string]V) []string { return sortedKeys(m) }

// TestLeavingWorkerDoesNotHoldBackANewErasGrants (sixth review, finding
// 1, the leave): a worker whose Run's context ended (SIGTERM) reads no
// page (W6; PageRead returns at once while leaving) and renews until its
// Work has drained; a new era that begins meanwhile finds it early (4.1)
// and grants nothing until it has closed. Schedule (FrequentInterval 1
// s, LeaderTimeout 3 s, 6 shards, w0 to w2 and era 1 from 0 s): at 10 s
// w1 is asked to leave and its Work takes 60 s to shut down; at 10.5 s
// w0, the coordinator's process, is killed; era 2 begins at 13.5 s. w0's
// shards must be led within section 6's bound of the crash.
func TestLeavingWorkerDoesNotHoldBackANewErasGrants(t *testing.T) {
	for _, slow := range []time.Duration{100 * time.Millisecond, 60 * time.Second} {
		t.Run(fmt.Sprint("drain=", slow), func(t *testing.T) {
			const fi, lt = time.Second, 3 * time.Second
			h := threeWorkers(t, fi, lt)
			h.elect(1)
			h.runUntilLed(t, 10*time.Second)
			w0, w1 := h.ws["w0"], h.ws["w1"]
			w1.drain = func(string, error) time.Duration { return slow }
			h.wdo(w1, w1.w.Leave(h.local()))
			h.run(10500 * time.Millisecond)
			victimShards := w0.running()
			crash := h.now
			h.kill(w0)
			h.depose()
			h.run(crash + lt)
			h.elect(2)
			bound := crash + 3*lt + 3*fi
			h.run(bound)
			if unled := h.unled(victimShards); len(unled) > 0 {
				ready := h.c.Ready(h.local())
				again := h.ledAgain(victimShards, crash, crash+5*time.Minute)
				t.Errorf("shards %v of the crashed coordinator's process are unled %v after the crash (section 6's bound; era 2 Ready: %v, while w1 leaves); led again %v after the crash",
					unled, bound-crash, ready, again)
			}
			for _, f := range h.fails {
				t.Error(f)
			}
		})
	}
}
