package pool

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestCutOffWorkerStopsWithinItsLease: a worker leading 40 shards whose
// connections to the store hang (an outage, a partition) is stopped (a
// SIGTERM): its Run returns within its lease (LeaderTimeout minus a
// tenth), its releases written
// in parallel under one deadline. Before, it released the shards one at
// a time, each with the full retry schedule, and took minutes (mutation
// serialrelease).
func TestCutOffWorkerStopsWithinItsLease(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, 40)
		defer g.stop()
		time.Sleep(2 * testLT)
		w := g.workers[0]
		if got := len(w.p.Leading()); got != 40 {
			t.Fatalf("a lone worker leads %d of 40 shards after 2 × LeaderTimeout; want 40", got)
		}
		w.st.cut.Store(true)
		time.Sleep(testFI / 3)
		stopped := time.Now()
		w.cancel()
		select {
		case <-w.done:
			d := time.Since(stopped)
			t.Logf("Run returned %v after its context ended", d)
			if lease := testLT - testLT/10; d > lease {
				t.Errorf("Run returned %v after its context ended, cut off from the store; want within its lease (%v)", d, lease)
			}
		case <-time.After(time.Hour):
			t.Fatalf("Run did not return within an hour of its context's end, cut off from the store")
		}
		g.check(t)
	})
}
