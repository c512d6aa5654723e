package pool

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestCrashedCoordinatorsShardsDoNotWaitForAnotherWorkersDrain (sixth
// review, finding 1, at the executor): every Work takes drain to return
// once its context ends. 3 workers, 8 shards; a fourth joins at 10 s and
// the coordinator revokes a shard from each worker above its new target;
// 1.5 s later the coordinator's process loses the store (a crash, as its
// peers see it). Its shards must be led by the live workers within
// section 6's bound (3 × LeaderTimeout + 3 × FrequentInterval = 12 s):
// with a 100 ms drain they are; with 60 s, the new era waits for the
// revoked Works of the other workers to return.
func TestCrashedCoordinatorsShardsDoNotWaitForAnotherWorkersDrain(t *testing.T) {
	for _, drain := range []time.Duration{100 * time.Millisecond, 60 * time.Second} {
		t.Run(fmt.Sprint("drain=", drain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				var shards []string
				for i := range 8 {
					shards = append(shards, fmt.Sprintf("shard-%02d", i))
				}
				var pools []*Pool
				var views []*grayStore
				var stops []context.CancelFunc
				var errs []chan error
				add := func() {
					g := &grayStore{Store: mem}
					cfg := testConfig(g, "pools/t/", fmt.Sprintf("w%d", len(pools)), shards)
					cfg.Work = func(ctx context.Context, shard string, lead *s3lect.Leadership) {
						<-ctx.Done()
						time.Sleep(drain) // a slow shutdown: flush, commit, close
					}
					p, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					ctx, stop := context.WithCancel(context.Background())
					errc := make(chan error, 1)
					go func() { errc <- p.Run(ctx) }()
					pools, views, stops, errs = append(pools, p), append(views, g), append(stops, stop), append(errs, errc)
				}
				for range 3 {
					add()
				}
				time.Sleep(10 * time.Second)
				add()
				time.Sleep(1500 * time.Millisecond)
				c := -1
				var era uint64
				for i, p := range pools {
					if e := p.Stats().Coordinator; e > era {
						c, era = i, e
					}
				}
				mine := pools[c].Leading() // its shards at the crash (not those it drains)
				views[c].mode.Store(2)
				var live []int
				for i := range pools {
					if i != c {
						live = append(live, i)
					}
				}
				ledAt := ledOnceBy(pools, live, mine, 90*time.Second)
				t.Logf("w%d coordinated era %d and crashed; its shards %v led by the live workers %v after %v (0: not within 90 s)", c, era, mine, live, ledAt)
				if ledAt == 0 || ledAt > 12*time.Second {
					t.Errorf("the crashed coordinator's shards were led again %v after its crash (0: not within 90 s); bound 12 s", ledAt)
				}
				views[c].mode.Store(0)
				for i := range pools {
					stops[i]()
					<-errs[i]
				}
			})
		})
	}
}
