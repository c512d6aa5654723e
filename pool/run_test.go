package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// testConfig is a worker's Config: FrequentInterval 1 s, LeaderTimeout
// 3 s, no log, and Work that runs until its leadership ends.
func testConfig(st store.Store, prefix, id string, shards []string) Config {
	return Config{Store: st, Prefix: prefix, ID: id, Shards: shards, FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Work:   func(ctx context.Context, shard string, lead *s3lect.Leadership) { <-ctx.Done() }}
}

type fixture struct {
	t      *testing.T
	st     *memstore.Store
	shards []string
	pools  []*Pool
	stops  []context.CancelFunc
	errs   []chan error
}

func newFixture(t *testing.T, workers, shards int) *fixture {
	t.Helper()
	f := &fixture{t: t, st: memstore.New()}
	for i := range shards {
		f.shards = append(f.shards, fmt.Sprintf("shard-%03d", i))
	}
	for range workers {
		f.add()
	}
	return f
}

func (f *fixture) add() int {
	f.t.Helper()
	p, err := New(testConfig(f.st, "pools/t/", fmt.Sprintf("w%d", len(f.pools)), f.shards))
	if err != nil {
		f.t.Fatalf("New() = %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	f.pools, f.stops, f.errs = append(f.pools, p), append(f.stops, stop), append(f.errs, errc)
	return len(f.pools) - 1
}

// led returns how many live workers lead each shard, and each worker's count.
func (f *fixture) led(live []int) (map[string]int, []int) {
	by := map[string]int{}
	var counts []int
	for _, i := range live {
		l := f.pools[i].Leading()
		counts = append(counts, len(l))
		for _, s := range l {
			by[s]++
		}
	}
	return by, counts
}

func (f *fixture) checkSpread(live []int) {
	f.t.Helper()
	by, counts := f.led(live)
	for _, s := range f.shards {
		if by[s] != 1 {
			f.t.Errorf("shard %s led by %d workers; want 1", s, by[s])
		}
	}
	lo, hi := len(f.shards)/len(live), (len(f.shards)+len(live)-1)/len(live)
	for i, n := range counts {
		if n < lo || n > hi {
			f.t.Errorf("worker %d leads %d shards; want %d to %d (counts %v)", live[i], n, lo, hi, counts)
		}
	}
}

func (f *fixture) stop(i int) {
	f.t.Helper()
	f.stops[i]()
	if err := <-f.errs[i]; err != nil {
		f.t.Errorf("Run() of worker %d = %v; want nil", i, err)
	}
}

// A leaving coordinator's shards are led elsewhere 3 s (three intervals)
// after its Run returns: it coordinates on after closing its session. A
// new era would first wait a lease (3 s) after its election.
func TestPoolSpreadsShardsAndHandsThemOverOnLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 3, 12)
		time.Sleep(10 * time.Second)
		f.checkSpread([]int{0, 1, 2})
		c, others := -1, []int{}
		for i, p := range f.pools {
			if p.Stats().Coordinator != 0 {
				c = i
			} else {
				others = append(others, i)
			}
		}
		if c < 0 || len(others) != 2 {
			t.Fatalf("not one coordinator among the three workers")
		}
		f.stop(c) // the coordinator leaves: it hands its own shards over first
		time.Sleep(3 * time.Second)
		f.checkSpread(others)
		i := f.add()
		time.Sleep(8 * time.Second)
		f.checkSpread(append(others, i))
		for _, j := range append(others, i) {
			f.stop(j)
		}
	})
}

func TestRunRefusesTheOldPoolsObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		st.Set("pools/t/members.json", []byte(`{"members":[]}`))
		p, err := New(testConfig(st, "pools/t/", "w0", []string{"a"}))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(context.Background()); !errors.Is(err, ErrOldPool) {
			t.Fatalf("Run() = %v; want ErrOldPool", err)
		}
	})
}

func TestTwoWorkersOfOneIDEndWithErrDuplicateID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 2, 8)
		time.Sleep(8 * time.Second)
		twin, err := New(testConfig(f.st, "pools/t/", "w1", f.shards))
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		twinErr := make(chan error, 1)
		go func() { twinErr <- twin.Run(ctx) }()
		var got error
		twinDone := false
		select {
		case got = <-twinErr:
			twinDone = true
		case got = <-f.errs[1]:
			f.errs[1] <- nil // the original found the duplicate: stop() expects nil
		case <-time.After(time.Minute):
			t.Fatal("two workers of ID w1 ran side by side for a minute")
		}
		if !errors.Is(got, ErrDuplicateID) {
			t.Fatalf("Run() of a duplicate = %v; want ErrDuplicateID", got)
		}
		stop()
		if !twinDone {
			<-twinErr
		}
		f.stop(0)
		f.stop(1)
	})
}
