package pool

// The sixth pool review's finding 3 at the executor (docs/findings-pool.md,
// "Sixth review").

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store/memstore"
)

// pageGrayStore is grayStore whose page writes can fail alone (pages): the
// coordinator's listings, reads and election go on.
type pageGrayStore struct {
	*grayStore
	pages atomic.Bool
}

func (g *pageGrayStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if g.pages.Load() && strings.Contains(key, "/assign/") {
		return "", errUnreachable
	}
	return g.grayStore.PutIfMatch(ctx, key, data, etag)
}

// TestCoordinatorWhosePageWritesFailIsReplaced: as TestGrayCoordinatorIsReplaced,
// but only the coordinator's page writes fail (a path that drops large
// bodies, a policy without PutObject on assign/): its listings and reads
// succeed, so the core never counts a LeaderTimeout without a success
// (4.5), and the crashed worker's shards stay unled while it coordinates.
func TestCoordinatorWhosePageWritesFailIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		var shards []string
		for i := range 12 {
			shards = append(shards, fmt.Sprintf("shard-%02d", i))
		}
		var pools []*Pool
		var views []*pageGrayStore
		var stops []context.CancelFunc
		var errs []chan error
		for i := range 4 {
			g := &pageGrayStore{grayStore: &grayStore{Store: mem}}
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
		views[c].pages.Store(true)
		views[v].mode.Store(2)
		t.Logf("w%d coordinates (era %d) and its page writes fail; w%d crashes", c, era, v)
		var live []int
		for i := range pools {
			if i != v {
				live = append(live, i)
			}
		}
		ledAt := ledOnceBy(pools, live, shards, 60*time.Second)
		eras := map[int]uint64{}
		for i, p := range pools {
			eras[i] = p.Stats().Coordinator
		}
		if ledAt == 0 {
			t.Errorf("with w%d's page writes failing and w%d crashed, the live workers %v did not lead every shard within 60 s (bound 3 × LeaderTimeout + 3 × FrequentInterval = 12 s); last era coordinated by each worker: %v",
				c, v, live, eras)
		}
		for _, g := range views {
			g.mode.Store(0)
			g.pages.Store(false)
		}
		for i := range pools {
			stops[i]()
			<-errs[i]
		}
	})
}
