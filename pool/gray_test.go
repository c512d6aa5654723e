package pool

// The executor under a coordinator's gray failure (found passing by the
// adversarial review of the coordinator-decided pool).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// grayStore is one worker's view of a shared store: mode 1 fails every
// call but those on the coordinator's lockfile and term object (a gray
// failure: the election works, the pool's objects do not), mode 2 fails
// every call (a crash, as the worker's peers see it).
type grayStore struct {
	*memstore.Store
	mode atomic.Int32
}

var errUnreachable = errors.New("gray: unreachable")

func (g *grayStore) fails(key string) bool {
	switch g.mode.Load() {
	case 1:
		return !strings.Contains(key, "coordinator.json")
	case 2:
		return true
	}
	return false
}

func (g *grayStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if g.fails(key) {
		return nil, "", errUnreachable
	}
	return g.Store.Get(ctx, key)
}

func (g *grayStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if g.fails(key) {
		return "", errUnreachable
	}
	return g.Store.PutIfMatch(ctx, key, data, etag)
}

func (g *grayStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if g.fails(prefix) {
		return nil, errUnreachable
	}
	return g.Store.List(ctx, prefix)
}

// TestGrayCoordinatorIsReplaced: the coordinator can renew its
// lockfile but not reach the pool's objects (a gray failure the issue
// names), and another worker crashes. The core steps down after a lease
// of failed calls; the executor resigns and stands out of the election
// for a lease (as the simulation's procs do, noRunTill), so the gray
// worker does not coordinate again while gray. Does the pool get a
// working coordinator, and the crashed worker's shards led again, while
// the gray failure lasts?
func TestGrayCoordinatorIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		shards := []string{}
		for i := range 12 {
			shards = append(shards, fmt.Sprintf("shard-%02d", i))
		}
		var pools []*Pool
		var views []*grayStore
		var stops []context.CancelFunc
		var errs []chan error
		for i := range 4 {
			g := &grayStore{Store: mem}
			p, err := New(testConfig(g, "pools/t/", fmt.Sprintf("w%d", i), shards))
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			pools, views, stops, errs = append(pools, p), append(views, g), append(stops, stop), append(errs, errc)
		}
		time.Sleep(10 * time.Second)
		c := -1
		var era uint64
		for i, p := range pools {
			if e := p.Stats().Coordinator; e > era {
				c, era = i, e
			}
		}
		v := (c + 1) % 4
		views[c].mode.Store(1)
		views[v].mode.Store(2)
		t.Logf("w%d coordinates (era %d) and goes gray; w%d crashes", c, era, v)
		healthy := []int{}
		for i := range pools {
			if i != c && i != v {
				healthy = append(healthy, i)
			}
		}
		ledAt := ledOnceBy(pools, healthy, shards, 60*time.Second)
		eras := map[int]uint64{}
		for i, p := range pools {
			eras[i] = p.Stats().Coordinator
		}
		t.Logf("last era coordinated by each worker: %v; every shard led by the healthy workers after %v", eras, ledAt)
		if eras[c] != era {
			t.Errorf("the gray worker w%d coordinated era %d after stepping down from era %d: it campaigned again within a lease", c, eras[c], era)
		}
		if ledAt == 0 {
			t.Errorf("with w%d gray and w%d crashed, the healthy workers %v did not lead every shard within 60 s (20 leases)", c, v, healthy)
		}
		for _, g := range views {
			g.mode.Store(0)
		}
		for i := range pools {
			stops[i]()
			<-errs[i]
		}
	})
}

// ledOnceBy polls every 100 ms, up to limit, until each of shards is led
// by exactly one of pools[i] for i in by, and returns how long that took
// (0: not within limit). Meant for synctest bubbles: the time is virtual.
func ledOnceBy(pools []*Pool, by []int, shards []string, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		time.Sleep(100 * time.Millisecond)
		count := map[string]int{}
		for _, i := range by {
			for _, s := range pools[i].Leading() {
				count[s]++
			}
		}
		all := true
		for _, s := range shards {
			all = all && count[s] == 1
		}
		if all {
			return time.Since(start)
		}
	}
	return 0
}
