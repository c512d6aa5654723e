package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
)

// spread formats counts by worker, in worker order.
func spread(c map[string]int) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "%s:%d ", id, c[id])
	}
	return strings.TrimSpace(b.String())
}

// within reports whether every worker in ids runs between lo and hi shards
// and together they run all of them.
func within(c map[string]int, ids []string, lo, hi, total int) bool {
	sum := 0
	for _, id := range ids {
		if c[id] < lo || c[id] > hi {
			return false
		}
		sum += c[id]
	}
	return sum == total
}

func TestPoolBalancesAndFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 4, 40)
		defer g.stop()
		ids := []string{"w1", "w2", "w3", "w4"}

		time.Sleep(3 * testLT)
		if c := g.counts(); !within(c, ids, 8, 12, 40) {
			t.Fatalf("3 × LeaderTimeout after a common start: %s; want 10 ± 2 each, 40 in all", spread(c))
		}
		time.Sleep(3 * testLT)
		settled := g.counts()
		t.Logf("settled: %s", spread(settled))

		// w4 crashes: its calls fail from now on, its leases run out.
		dead := g.workers[3]
		dead.st.dead.Store(true)
		for g.counts()["w4"] > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		leaseEnd := time.Now()
		time.Sleep(3 * testLT)
		c := g.counts()
		if !within(c, ids[:3], 11, 16, 40) {
			t.Errorf("3 × LeaderTimeout after w4's leases ended: %s; want 13–14 ± 2 on each survivor, 40 in all", spread(c))
		}
		t.Logf("after the crash: %s; reached %v after w4's last lease ended", spread(c), time.Since(leaseEnd))

		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.double) > 0 {
			t.Errorf("shards led twice at once: %v", g.double)
		}
		// A shard waits for the lease to run out on the followers' clocks
		// (LeaderTimeout after they last saw it change, which a follower
		// in infrequent mode learns on its next read), then for the
		// pool's turn.
		if limit := testLT + testII; g.maxGap > limit {
			t.Errorf("a shard was leaderless for %v; want at most LeaderTimeout + InfrequentInterval = %v", g.maxGap, limit)
		}
		t.Logf("longest leaderless gap: %v", g.maxGap)
	})
}

func TestPoolWorkReturningEarlyResigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, 1)
		defer g.stop()
		ran := make(chan string, 4)
		p, err := New(Config{
			Shards: []string{"only"},
			Elector: func(shard string) s3lect.ElectorConfig {
				return s3lect.ElectorConfig{Store: g.counter, LockfilePath: "other/" + shard + ".json", ServerID: "quick", Logger: quiet}
			},
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) { ran <- shard },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		<-ran
		<-ran // the first leadership was resigned, so the shard fell vacant and was taken again
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	work := func(context.Context, string, *s3lect.Leadership) {}
	g := newGroup(t, 0, 0)
	cfg := func(shard string) s3lect.ElectorConfig {
		return s3lect.ElectorConfig{Store: g.counter, LockfilePath: "x/" + shard, ServerID: "a"}
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"NoShards", Config{Elector: cfg, Work: work}, "Shards is empty"},
		{"NoElector", Config{Shards: []string{"a"}, Work: work}, "Elector is nil"},
		{"NoWork", Config{Shards: []string{"a"}, Elector: cfg}, "Work is nil"},
		{"Duplicate", Config{Shards: []string{"a", "a"}, Elector: cfg, Work: work}, `shard "a" twice`},
		{"SharedPath", Config{Shards: []string{"a", "b"}, Work: work, Elector: func(string) s3lect.ElectorConfig {
			return s3lect.ElectorConfig{Store: g.counter, LockfilePath: "same", ServerID: "a"}
		}}, "share LockfilePath"},
		{"MixedIDs", Config{Shards: []string{"a", "b"}, Work: work, Elector: func(s string) s3lect.ElectorConfig {
			return s3lect.ElectorConfig{Store: g.counter, LockfilePath: s, ServerID: s}
		}}, "same non-empty ServerID"},
		{"BadElector", Config{Shards: []string{"a"}, Work: work, Elector: func(s string) s3lect.ElectorConfig {
			return s3lect.ElectorConfig{LockfilePath: s, ServerID: "a"}
		}}, `shard "a": s3lect: invalid config`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v; want one saying %q", err, tc.want)
			}
		})
	}
}
