package pool

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestStrayClaimIsReleased: a claim whose write landed but whose every
// reply was lost, with the reads that could have adopted it failing too,
// leaves a record naming the claimer's live session at a term it does not
// lead. No other worker can clear that record while the session lives (it
// names the session; docs/pool-protocol.md, "Claims and takeovers"), and
// the claimer, at its share once another worker joins, never looks at the
// shard again: the shard stays unled for as long as the session lives
// unless the claimer releases it (found by TestShardSimulation, seed 115).
func TestStrayClaimIsReleased(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		fp := newFaultPools(t, []string{"s0", "s1", "s2"}, func(worker, shard string) string { return worker + "/" + shard })
		fp.blindKey = "pool/shards/s2.json"
		defer fp.stop()
		fp.start("w1")
		w1 := fp.stores["w1"]
		w1.lose.Store(true)
		time.Sleep(2 * testLT) // w1 leads s0 and s1; its claims of s2 land unseen
		if _, etag, _ := fp.mem.Get(t.Context(), fp.blindKey); etag == "" {
			t.Fatalf("no record of s2 after 2 × LeaderTimeout: the lost claim never landed")
		}
		fp.start("w2") // w1 (2 of 3) is now at its share, w2 below it
		time.Sleep(2 * testFI)
		w1.lose.Store(false)
		w1.blind.Store(false)

		end := time.Now()
		deadline := time.After(4 * testLT)
		for {
			select {
			case s := <-fp.leads:
				if s.id == "w1/s2" && !time.Now().Before(end) {
					t.Fatalf("w1 took s2 back (term %d) %v after the faults ended; want it released to w2, below its share", s.term, time.Since(end))
				}
				if s.id != "w2/s2" {
					continue
				}
				if d := time.Since(end); d > 2*testFI {
					t.Errorf("w2 took s2 %v after the faults ended; want within 2 × FrequentInterval (w1 releases it at its next tick)", d)
				}
				return
			case <-deadline:
				t.Fatalf("s2 not led by w2 4 × LeaderTimeout after the faults ended")
			}
		}
	})
}
