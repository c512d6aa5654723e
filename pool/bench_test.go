package pool

import (
	"testing"
	"time"
)

// BenchmarkPool runs 4 workers over 40 shards in real time, with the
// default intervals divided by 20 (LeaderTimeout 750ms), kills one worker
// and reports, in LeaderTimeouts: when the shards first stood at 10 ± 2
// per worker after a common start, when the survivors first stood at
// 13–14 ± 2 after the dead worker's last lease ended, and the longest a
// shard went without a leader; and the store requests per shard per
// LeaderTimeout while the pool was steady (the same at any speed).
//
//	go test -run '^$' -bench Pool -benchtime 3x ./pool
func BenchmarkPool(b *testing.B) {
	const speed = 20
	lt := testLT / speed
	var spreadAt, resettle, gap, reqs float64
	for range b.N {
		g := newGroupAt(b, 4, 40, speed)
		ids := []string{"w1", "w2", "w3", "w4"}
		start := time.Now()
		first := func(ids []string, lo, hi int, since time.Time) float64 {
			for end := time.Now().Add(4 * lt); time.Now().Before(end); time.Sleep(lt / 50) {
				if within(g.counts(), ids, lo, hi, 40) {
					return float64(time.Since(since)) / float64(lt)
				}
			}
			b.Fatalf("not within %d–%d after 4 × LeaderTimeout: %s", lo, hi, spread(g.counts()))
			return 0
		}
		spreadAt += first(ids, 8, 12, start)
		time.Sleep(2 * lt) // let followers settle into infrequent reads
		before, from := g.counter.Counts(), time.Now()
		time.Sleep(4 * lt)
		after := g.counter.Counts()
		reqs += float64(after.Gets+after.Puts-before.Gets-before.Puts) / 40 / (float64(time.Since(from)) / float64(lt))

		g.workers[3].st.dead.Store(true)
		for g.counts()["w4"] > 0 {
			time.Sleep(lt / 100)
		}
		resettle += first(ids[:3], 11, 16, time.Now())
		time.Sleep(lt)
		g.stop()
		g.mu.Lock()
		gap += float64(g.maxGap) / float64(lt)
		if len(g.double) > 0 {
			b.Errorf("shards led twice: %v", g.double)
		}
		g.mu.Unlock()
	}
	n := float64(b.N)
	b.ReportMetric(spreadAt/n, "spread-LT")
	b.ReportMetric(resettle/n, "resettle-LT")
	b.ReportMetric(gap/n, "maxgap-LT")
	b.ReportMetric(reqs/n, "req/shard/LT")
	b.ReportMetric(0, "ns/op")
}
