package pool

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// A cold start of many workers at once on a store that takes a few
// milliseconds per call, in virtual time (a measurement, not a check: it
// runs only with -coldstart):
//
//	go test -run TestColdStartUnderLatency -v ./pool -coldstart -coldstart.delay=5ms
//
// On 2026-11-28, the pool code of 1a6df15: 100 workers over 1,000 shards, the default
// intervals, spread (share ± 1) 0.70 × LeaderTimeout after the start with
// 0 ms, and with 5 ms per call when started 5 ms or 50 ms apart (from the
// last start); 9.75 × LeaderTimeout with 5 ms per call when all start at
// once (no shard led for the first 8 LeaderTimeouts); 30 workers over
// 3,000 shards at once, 5 ms per call: 4.05 × (MinIO in real time, 30
// workers: 4.21 ×, docs/shards.md). Likely why: a worker claims nothing
// before it has read itself on the member list, and a worker whose
// conditional write of the list lost tries again FrequentInterval/4 later,
// at the same instant as the other losers: workers started at once join
// the list about one per FrequentInterval/4 (100: 25 intervals, 8.3 ×
// LeaderTimeout).
var (
	coldStart        = flag.Bool("coldstart", false, "run TestColdStartUnderLatency")
	coldStartDelay   = flag.Duration("coldstart.delay", 5*time.Millisecond, "added to every store call")
	coldStartWorkers = flag.Int("coldstart.workers", 100, "workers")
	coldStartShards  = flag.Int("coldstart.shards", 1000, "shards")
	coldStartStagger = flag.Duration("coldstart.stagger", 0, "between the workers' starts")
)

type slowCalls struct {
	store.Store
	d time.Duration
}

func (s slowCalls) Get(ctx context.Context, k string) ([]byte, string, error) {
	time.Sleep(s.d)
	return s.Store.Get(ctx, k)
}

func (s slowCalls) PutIfMatch(ctx context.Context, k string, b []byte, etag string) (string, error) {
	time.Sleep(s.d)
	return s.Store.PutIfMatch(ctx, k, b, etag)
}

func (s slowCalls) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	time.Sleep(s.d)
	return s.Store.(store.Lister).List(ctx, prefix)
}

func TestColdStartUnderLatency(t *testing.T) {
	if !*coldStart {
		t.Skip("a measurement: run with -coldstart")
	}
	n, w := *coldStartShards, *coldStartWorkers
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 0, n)
		g.wrap = func(_ string, st store.Store) store.Store { return slowCalls{st, *coldStartDelay} }
		for i := range w {
			if i > 0 {
				time.Sleep(*coldStartStagger)
			}
			g.add(fmt.Sprintf("w%d", i+1))
		}
		defer g.stop()
		t0 := time.Now()
		for step := 1; ; step++ {
			time.Sleep(testLT / 20)
			c := g.counts()
			if within(c, g.ids(nil), n/w-1, (n+w-1)/w+1, n) {
				t.Logf("spread (share ± 1) %v after the last start: %.2f × LeaderTimeout", time.Since(t0), float64(time.Since(t0))/float64(testLT))
				break
			}
			if step%40 == 0 {
				led, lo, hi := 0, n, 0
				for _, id := range g.ids(nil) {
					led += c[id]
					lo, hi = min(lo, c[id]), max(hi, c[id])
				}
				t.Logf("%v: %d of %d shards led, %d to %d per worker", time.Since(t0), led, n, lo, hi)
			}
			if time.Since(t0) > 40*testLT {
				t.Fatalf("not spread within 40 × LeaderTimeout")
			}
		}
		g.check(t)
	})
}
