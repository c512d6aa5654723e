package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// cuttable is a worker's store that can be cut off: every call fails at
// once, as a process that died would stop calling (the others see no
// goodbye).
type cuttable struct {
	store.Store
	cut atomic.Bool
}

var errCut = errors.New("cut off")

func (c *cuttable) Get(ctx context.Context, key string) ([]byte, string, error) {
	if c.cut.Load() {
		return nil, "", errCut
	}
	return c.Store.Get(ctx, key)
}

func (c *cuttable) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if c.cut.Load() {
		return "", errCut
	}
	return c.Store.PutIfMatch(ctx, key, data, etag)
}

func (c *cuttable) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.Store.(store.Lister).List(ctx, prefix)
}

// TestPoolOnMinIO runs 10 workers over 100 shards on a real MinIO
// (FrequentInterval 1 s, LeaderTimeout 3 s): the shards spread evenly, a
// worker cut off the store has its shards led again elsewhere, and no
// shard is ever led twice at once (Work counts its runs). It logs the
// times it measures; they depend on the machine's load.
// S3LECT_POOL_MINIO=100x10000@5s runs 100 workers over 10,000 shards at
// FrequentInterval 5 s (LeaderTimeout three times that) instead.
func TestPoolOnMinIO(t *testing.T) {
	s3test.Endpoint(t)
	base := s3store.New(s3test.NewClient(t, nil, "", ""), s3test.Bucket(t))
	prefix := fmt.Sprintf("pools/minio-%d/", time.Now().UnixNano())
	workers, nshards, fi := 10, 100, time.Second
	if v := os.Getenv("S3LECT_POOL_MINIO"); v != "" {
		var secs int
		if _, err := fmt.Sscanf(v, "%dx%d@%ds", &workers, &nshards, &secs); err != nil {
			t.Fatalf("S3LECT_POOL_MINIO=%q: want WORKERSxSHARDS@FREQUENTs, such as 100x10000@5s", v)
		}
		fi = time.Duration(secs) * time.Second
	}
	lt := 3 * fi
	var shards []string
	for i := range nshards {
		shards = append(shards, fmt.Sprintf("shard-%05d", i))
	}
	running := make([]atomic.Int32, nshards)
	var overlaps atomic.Int32
	work := func(ctx context.Context, shard string, lead *s3lect.Leadership) {
		var i int
		fmt.Sscanf(shard, "shard-%05d", &i)
		if running[i].Add(1) > 1 {
			overlaps.Add(1)
		}
		<-ctx.Done()
		running[i].Add(-1)
	}
	var pools []*Pool
	var stores []*cuttable
	var stops []context.CancelFunc
	errs := make(chan error, workers)
	start := time.Now()
	for i := range workers {
		st := &cuttable{Store: base}
		p, err := New(Config{Store: st, Prefix: prefix, ID: fmt.Sprintf("w%02d", i), Shards: shards, Work: work,
			FrequentInterval: fi, LeaderTimeout: lt, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		go func() { errs <- p.Run(ctx) }()
		pools, stores, stops = append(pools, p), append(stores, st), append(stops, stop)
	}
	balanced := func(live []int) bool {
		n := 0
		for _, i := range live {
			l := len(pools[i].Leading())
			if l < nshards/len(live) || l > (nshards+len(live)-1)/len(live) {
				return false
			}
			n += l
		}
		return n == nshards
	}
	waitFor := func(what string, live []int) time.Duration {
		t.Helper()
		from := time.Now()
		for !balanced(live) {
			if time.Since(from) > 20*lt {
				var counts []string
				for _, i := range live {
					st := pools[i].Stats()
					counts = append(counts, fmt.Sprintf("%s:%d/s%d/c%d", st.Worker, st.Owned, st.Sessions, st.Coordinator))
				}
				t.Fatalf("%s: not balanced after %v: %v", what, 20*lt, counts)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(from)
	}
	var all []int
	for i := range workers {
		all = append(all, i)
	}
	waitFor("cold start", all)
	t.Logf("cold start of %d workers over %d shards: balanced %v after the first Run", workers, nshards, time.Since(start))
	time.Sleep(2 * fi)
	before := make([]Stats, workers)
	for i, p := range pools {
		before[i] = p.Stats()
	}
	time.Sleep(5 * fi)
	var puts, gets uint64
	for i, p := range pools {
		s := p.Stats()
		if s.Coordinator != 0 {
			t.Logf("coordinator %s: %d lists, %d gets, %d puts in 5 intervals", s.Worker, s.Lists-before[i].Lists, s.Gets-before[i].Gets, s.Puts-before[i].Puts)
			continue
		}
		puts += s.Puts - before[i].Puts
		gets += s.Gets - before[i].Gets
	}
	t.Logf("steady state, per worker per interval (the others): %.2f PUT, %.2f GET (the election's own reads, counted by the Elector, not included)",
		float64(puts)/float64(workers-1)/5, float64(gets)/float64(workers-1)/5)
	var sessions uint64
	for _, p := range pools {
		sessions += p.Stats().Sessions
	}
	t.Logf("sessions opened: %d by %d workers", sessions, workers)
	victim := 0
	if pools[0].Stats().Coordinator != 0 {
		victim = 1
	}
	stores[victim].cut.Store(true)
	cutAt := time.Now()
	var live []int
	for _, i := range all {
		if i != victim {
			live = append(live, i)
		}
	}
	waitFor("after a cut", live)
	t.Logf("a worker cut off the store: its shards led elsewhere, balanced, %v later (LeaderTimeout %v)", time.Since(cutAt), lt)
	stores[victim].cut.Store(false)
	for _, stop := range stops {
		stop()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times a shard's Work ran twice at once", n)
	}
}
