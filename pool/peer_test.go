package pool

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestPeerModeWorkersReportInsteadOfReading: three workers in pinned peer
// mode, each serving PeerHandler over HTTPS on loopback with the pool's
// PeerServerTLS (no certificate made by hand). Every shard is led, by one
// worker at a time; once the pool is stable the workers that do not
// coordinate read the store less than storage mode's two reads per
// FrequentInterval (their page, and the election's follower read): their
// renewals are reported to the coordinator instead. On real timers, so
// the bound on reads is loose (a report that fails falls back to a read).
func TestPeerModeWorkersReportInsteadOfReading(t *testing.T) {
	const fi, lt = 100 * time.Millisecond, 600 * time.Millisecond
	shards := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	mem := memstore.New()
	var (
		mu      sync.Mutex
		running = map[string]map[string]bool{} // shard → workers whose Work runs it
		overlap string
	)
	work := func(id string) func(ctx context.Context, shard string, lead *s3lect.Leadership) {
		return func(ctx context.Context, shard string, lead *s3lect.Leadership) {
			mu.Lock()
			if running[shard] == nil {
				running[shard] = map[string]bool{}
			}
			running[shard][id] = true
			if len(running[shard]) > 1 && overlap == "" {
				overlap = fmt.Sprintf("shard %s run by %v at once", shard, running[shard])
			}
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			delete(running[shard], id)
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	counters := map[string]*counting{}
	pools := map[string]*Pool{}
	for _, id := range []string{"a", "b", "c"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := &counting{Store: mem}
		p, err := New(Config{Store: c, Prefix: "peer/", ID: id, Shards: shards, Work: work(id),
			FrequentInterval: fi, LeaderTimeout: lt, PeerMode: true, PeerPinned: true, ServerAddr: ln.Addr().String(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		counters[id], pools[id] = c, p
		wg.Add(2)
		go func() { defer wg.Done(); s3lect.ServePeers(ctx, ln, PeerHandler(p), p.PeerServerTLS()) }()
		go func() {
			defer wg.Done()
			if err := p.Run(ctx); err != nil {
				t.Errorf("worker %s: Run = %v", id, err)
			}
		}()
	}
	led := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ws := range running {
			if len(ws) == 1 {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second) // a liveness limit, not a speed target
	for led() < len(shards) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d shards led 30 s after the start", led(), len(shards))
		}
		time.Sleep(fi)
	}
	time.Sleep(3 * lt) // the last moves and their acknowledgements
	before := map[string]uint64{}
	for id, c := range counters {
		before[id] = c.gets.Load()
	}
	const intervals = 10
	time.Sleep(intervals * fi)
	reported := 0
	for id, p := range pools {
		if p.Stats().Coordinating {
			continue
		}
		gets := counters[id].gets.Load() - before[id]
		t.Logf("worker %s: %d GETs over %d FrequentIntervals", id, gets, intervals)
		if gets < intervals {
			reported++
		}
	}
	if reported == 0 {
		t.Errorf("no worker that does not coordinate read less than storage mode's page read per FrequentInterval: its reports did not reach the coordinator")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap != "" {
		t.Error(overlap)
	}
}
