package s3lect

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// BenchmarkThousandElectors starts 1,000 electors on distinct lockfiles in
// one process, as a worker pool with one elector per shard would, and
// reports what each costs at steady state. Each elector leads its own
// lockfile, the most expensive role. Timings are scaled down tenfold
// (FrequentInterval 500 ms); store calls per second scale with them.
func BenchmarkThousandElectors(b *testing.B) {
	const n = 1000
	for range b.N {
		mem := memstore.New()
		counter := store.NewCounter(mem)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		goroutinesBefore := runtime.NumGoroutine()

		electors := make([]*Elector, n)
		for i := range electors {
			e, err := New(ElectorConfig{
				Store: counter, LockfilePath: fmt.Sprintf("shards/%d.json", i), ServerID: "worker-1",
				FrequentInterval: 500 * time.Millisecond, InfrequentInterval: 3 * time.Second, LeaderTimeout: 1500 * time.Millisecond,
				Logger: quietLogger,
			})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Campaign(b.Context()); err != nil {
				b.Fatal(err)
			}
			electors[i] = e
		}
		time.Sleep(time.Second) // settle
		start, c0 := time.Now(), counter.Counts()
		time.Sleep(3 * time.Second)
		elapsed, c1 := time.Since(start), counter.Counts()

		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutinesBefore)/n, "goroutines/elector")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/elector")
		b.ReportMetric(float64(c1.Gets+c1.Puts-c0.Gets-c0.Puts)/elapsed.Seconds(), "store-ops/s")
		if f := c1.Failures - c0.Failures + c1.PreconditionFailed - c0.PreconditionFailed; f != 0 {
			b.Errorf("%d store calls failed at steady state", f)
		}
		for _, e := range electors {
			e.Close()
		}
	}
}
