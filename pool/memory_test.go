package pool

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store/memstore"
)

var memPool = flag.Int("pool.memshards", 1000, "TestMemoryPerLedShard's larger pool: this many shards, 1,000 per worker (10000: 10 workers)")

// footprint is what a settled pool holds, over what the process held
// before it started: the live heap (after a GC) and the goroutines.
type footprint struct {
	heap, stack uint64
	goroutines  int
	led         int
}

// settle runs workers over shards on the in-memory store in a synctest
// bubble until every shard is led and three intervals more have passed,
// and measures the footprint then.
func settle(t *testing.T, workers, shards int) (f footprint) {
	synctest.Test(t, func(t *testing.T) {
		names := make([]string, shards)
		for i := range names {
			names[i] = fmt.Sprintf("shard-%05d", i)
		}
		st := memstore.New()
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		var pools []*Pool
		var stops []context.CancelFunc
		errs := make(chan error, workers)
		for i := range workers {
			p, err := New(testConfig(st, "pools/m/", fmt.Sprintf("w%02d", i), names))
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			go func() { errs <- p.Run(ctx) }()
			pools, stops = append(pools, p), append(stops, stop)
		}
		led := func() (n int) {
			for _, p := range pools {
				n += len(p.Leading())
			}
			return n
		}
		for start := time.Now(); led() < shards; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > time.Minute {
				t.Fatalf("%d workers: %d of %d shards led after a minute", workers, led(), shards)
			}
		}
		time.Sleep(3 * time.Second)
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		f = footprint{heap: after.HeapAlloc - before.HeapAlloc, stack: after.StackInuse - before.StackInuse,
			goroutines: runtime.NumGoroutine() - g0, led: led()}
		for _, stop := range stops {
			stop()
		}
		for range workers {
			if err := <-errs; err != nil {
				t.Errorf("Run() = %v", err)
			}
		}
	})
	return f
}

// TestMemoryPerLedShard: a led shard costs at most 4 KiB of heap and one
// goroutine (its Work), beyond a constant per worker. It measures a
// pool at 100 and at 1,000 shards per worker (the store's copies of the
// session and page objects, and the coordinator's state, which one of
// the workers holds, included) and divides the difference by the shards
// it adds: the per-worker constant cancels out. -pool.memshards 10000
// measures 10 workers over 10,000 shards against 10 over 1,000.
func TestMemoryPerLedShard(t *testing.T) {
	workers := max(1, *memPool/1000)
	small, large := settle(t, workers, *memPool/10), settle(t, workers, *memPool)
	shards := float64(large.led - small.led)
	heap := (float64(large.heap) - float64(small.heap)) / shards
	stack := (float64(large.stack) - float64(small.stack)) / shards
	gor := float64(large.goroutines-small.goroutines) / shards
	t.Logf("%d workers: %d shards led: heap %d KiB, stacks %d KiB, %d goroutines; %d shards: heap %d KiB, stacks %d KiB, %d goroutines",
		workers, small.led, small.heap>>10, small.stack>>10, small.goroutines, large.led, large.heap>>10, large.stack>>10, large.goroutines)
	t.Logf("per led shard beyond the first %d: %.0f bytes of heap, %.0f bytes of stacks, %.3f goroutines; per worker at %d shards: %.1f goroutines beyond its shards'",
		small.led, heap, stack, gor, small.led, float64(small.goroutines-small.led)/float64(workers))
	if heap > 4096 {
		t.Errorf("a led shard costs %.0f bytes of heap; want at most 4 KiB", heap)
	}
	if gor < 0.99 || gor > 1.01 {
		t.Errorf("a led shard costs %.3f goroutines; want one (its Work)", gor)
	}
}
