package pool

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

var heapPool = flag.String("pool.heap", "10x1000", "WORKERSxSHARDS: the pool TestHeapPerShard runs")

// TestHeapPerShard runs a whole pool in one process, in virtual time on
// the in-memory store, from a common start until it has been settled for
// a while, checks that every shard is led, and holds the heap growth and
// the goroutines divided by the number of shards (the store's objects,
// every led shard's Leadership and Work included) to issue 28's targets:
// at most 4 KiB of heap per shard, and one goroutine per led shard plus
// a constant per worker. 10 workers × 1,000 shards by default; others
// with -pool.heap:
//
//	go test -run TestHeapPerShard ./pool -pool.heap=100x10000 -v
func TestHeapPerShard(t *testing.T) {
	var w, n int
	if _, err := fmt.Sscanf(*heapPool, "%dx%d", &w, &n); err != nil || w < 1 || n < 1 {
		t.Fatalf("-pool.heap=%q: want WORKERSxSHARDS, such as 30x3000", *heapPool)
	}
	synctest.Test(t, func(t *testing.T) {
		shards := make([]string, n)
		for i := range shards {
			shards[i] = fmt.Sprintf("shard-%05d", i)
		}
		mem := memstore.New()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, w)
		ps := make([]*Pool, w)
		for i := range ps {
			p, err := New(Config{Store: mem, Prefix: "p/", ID: fmt.Sprintf("w%03d", i), Shards: shards, Logger: quiet,
				Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
			go func() { done <- p.Run(ctx) }()
		}
		time.Sleep(40 * testLT)
		synctest.Wait()
		led := 0
		for _, p := range ps {
			led += len(p.Leading())
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		goroutines := runtime.NumGoroutine() - g0
		cancel()
		for range ps {
			if err := <-done; err != nil {
				t.Errorf("Run = %v; want nil", err)
			}
		}
		if led != n {
			t.Fatalf("%d workers × %d shards: %d shards led after 40 × LeaderTimeout; want all", w, n, led)
		}
		heap := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		t.Logf("%d workers × %d shards: heap %.0f bytes per shard, %.2f goroutines per shard", w, n, heap, float64(goroutines)/float64(n))
		if heap > 4096 {
			t.Errorf("%d workers × %d shards: %.0f bytes of heap per shard; want at most 4 KiB", w, n, heap)
		}
		// Each worker runs a constant few goroutines of its own (its
		// loop, heartbeat and the like); allow 8.
		if limit := n + 8*w; goroutines > limit {
			t.Errorf("%d workers × %d shards: %d goroutines; want at most one per led shard plus 8 per worker (%d)", w, n, goroutines, limit)
		}
	})
}
