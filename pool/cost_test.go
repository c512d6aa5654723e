package pool

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

var costWorkers = flag.String("pool.cost", "10", "TestSteadyStateCostPerWorker's pool sizes, in workers (for the figures of docs/pool-evidence.md: -pool.cost 10,100)")

// counting counts every call a worker makes on the store, the
// coordinator election's included.
type counting struct {
	store.Store
	gets, puts, lists atomic.Uint64
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *counting) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	c.puts.Add(1)
	return c.Store.PutIfMatch(ctx, key, data, etag)
}

func (c *counting) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.lists.Add(1)
	return c.Store.(store.Lister).List(ctx, prefix)
}

// TestSteadyStateCostPerWorker: a settled pool costs each worker one PUT
// and at most 1⅓ reads per FrequentInterval (its page, and every third
// interval the coordinator election's follower read of the lockfile),
// whatever the number of workers; the coordinator adds its two listings
// (workers/ and news/). Every store call is counted at the store, over 20
// intervals. It then kills a worker, then the coordinator, each at a phase
// drawn from the pool's size, and logs how long until their shards were
// led elsewhere. At 10 workers by default; -pool.cost 10,100 adds 100
// (the figures of docs/pool-evidence.md).
func TestSteadyStateCostPerWorker(t *testing.T) {
	var sizes []int
	for _, f := range strings.Split(*costWorkers, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 2 {
			t.Fatalf("-pool.cost %q: want worker counts of at least 2, comma-separated", *costWorkers)
		}
		sizes = append(sizes, n)
	}
	for _, workers := range sizes {
		t.Run(fmt.Sprintf("%dWorkers", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { steadyCost(t, workers, 10*workers) })
		})
	}
}

func steadyCost(t *testing.T, workers, shards int) {
	g := newGroup(t, 0, shards)
	counters := map[string]*counting{}
	g.wrap = func(id string, s store.Store) store.Store {
		c := &counting{Store: s}
		counters[id] = c
		return c
	}
	for i := range workers {
		g.add(fmt.Sprintf("w%03d", i+1))
	}
	defer g.stopAll()
	took := g.waitEven(g.workers, 4*testLT, "cold start")
	time.Sleep(3 * testFI) // the last grants' acknowledgements
	sum := func(ws []*worker) (gets, puts, lists uint64) {
		for _, w := range ws {
			c := counters[w.id]
			gets, puts, lists = gets+c.gets.Load(), puts+c.puts.Load(), lists+c.lists.Load()
		}
		return
	}
	c := g.coordinator(g.workers)
	others := without(g.workers, c)
	const window = 20
	g0, p0, l0 := sum(others)
	cg0, cp0, cl0 := sum([]*worker{c})
	time.Sleep(window * testFI)
	g1, p1, l1 := sum(others)
	cg1, cp1, cl1 := sum([]*worker{c})
	per := float64(len(others) * window)
	puts, reads := float64(p1-p0)/per, float64(g1-g0+l1-l0)/per
	t.Logf("%d workers × %d shards: balanced %v after a cold start; per worker per FrequentInterval %.2f PUT, %.2f GET, %.2f LIST; the coordinator %.2f PUT, %.2f GET, %.2f LIST",
		workers, shards, took, puts, float64(g1-g0)/per, float64(l1-l0)/per,
		float64(cp1-cp0)/window, float64(cg1-cg0)/window, float64(cl1-cl0)/window)
	// The window's edges fall between a worker's calls of one interval:
	// each counter may hold one call more per worker than the intervals.
	// Its page every interval, the election's lockfile every third
	// (InfrequentInterval = 3 × FrequentInterval).
	if puts > 1+1.0/window || reads > 1+1.0/3+2.0/window {
		t.Errorf("a settled pool's worker made %.2f PUTs and %.2f reads per FrequentInterval; want 1 PUT and at most 1⅓ reads", puts, reads)
	}
	if cl := float64(cl1-cl0) / window; cl > 2+2.0/window {
		t.Errorf("the coordinator made %.2f LIST requests per FrequentInterval; want 2 (its listing of workers/ and news/)", cl)
	}
	// A kill at a phase of the renewal cycle drawn from the pool's size.
	time.Sleep(time.Duration(workers%10) * testFI / 10)
	victim := others[workers%len(others)]
	orphans := victim.p.Leading()
	victim.fs.Cut()
	killed := time.Now()
	for {
		led := map[string]bool{}
		for _, w := range without(g.workers, victim) {
			for _, s := range w.p.Leading() {
				led[s] = true
			}
		}
		if !slices.ContainsFunc(orphans, func(s string) bool { return !led[s] }) {
			break
		}
		if time.Since(killed) > 3*testLT+3*testFI {
			t.Fatalf("the killed worker's shards not all led again within 3 × LeaderTimeout + 3 × FrequentInterval")
		}
		time.Sleep(testFI / 100)
	}
	d := time.Since(killed)
	t.Logf("a killed worker's %d shards led again %v (%.2f × LeaderTimeout) after the kill", len(orphans), d.Round(time.Millisecond), float64(d)/float64(testLT))
	// Then the coordinator, at a phase drawn from the pool's size: its
	// shards wait for the election's takeover and the new era's wait.
	alive := without(g.workers, victim)
	g.waitEven(alive, 4*testLT, "after the kill")
	time.Sleep(time.Duration(workers%7) * testFI / 7)
	c = g.coordinator(alive)
	orphans = c.p.Leading()
	c.fs.Cut()
	killed = time.Now()
	for {
		led := map[string]bool{}
		for _, w := range without(alive, c) {
			for _, s := range w.p.Leading() {
				led[s] = true
			}
		}
		if !slices.ContainsFunc(orphans, func(s string) bool { return !led[s] }) {
			break
		}
		if time.Since(killed) > 4*testLT+3*testFI {
			t.Fatalf("the killed coordinator's shards not all led again within 4 × LeaderTimeout + 3 × FrequentInterval")
		}
		time.Sleep(testFI / 100)
	}
	d = time.Since(killed)
	t.Logf("the killed coordinator's %d shards led again %v (%.2f × LeaderTimeout) after the kill", len(orphans), d.Round(time.Millisecond), float64(d)/float64(testLT))
}
