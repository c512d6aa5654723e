package main

// What package pool's multiplexed shard lease costs and how fast it fails
// over: store requests per FrequentInterval with 1,000 shards on 10
// workers, the time from killing a worker to every one of its shards led
// again, and goroutines and memory per shard.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3lect/s3lect"
	shardpool "github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// shardResult is what one store's row of the shard table shows.
type shardResult struct {
	perWorker  perFI           // steady state, per worker per FrequentInterval
	ledAgain   []time.Duration // per trial: kill → every shard of the killed worker led again, sorted
	goroutines float64         // per shard, steady state (Work's goroutine included)
	heapBytes  float64         // per shard
	stackBytes float64         // per shard
	handovers  uint64          // shards handed over during the start (none expected)
	disturbed  int             // trials run again: a survivor lost its session
}

// shardReferee follows every shard's Work, as the shards' users would.
type shardReferee struct {
	mu   sync.Mutex
	live map[string]shardHolder
	dead map[string]bool // workers killed: their Work no longer counts
}

type shardHolder struct {
	worker string
	ctx    context.Context
}

func (r *shardReferee) start(shard, worker string, ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[shard] = shardHolder{worker, ctx}
}

// owners returns, per shard, the live worker that runs it ("" if none).
func (r *shardReferee) owners() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for s, h := range r.live {
		if h.ctx.Err() == nil && !r.dead[h.worker] {
			out[s] = h.worker
		}
	}
	return out
}

// shardWorker is one worker process of the pool.
type shardWorker struct {
	id    string
	conn  *faultstore.Store // cut when the worker is killed
	lists *listCounter      // what the pool is given: conn, its listings counted
	peer  *shardPeer        // with -shard-peer: its peer server and client (shardpeer.go)
	p     *shardpool.Pool
	stop  context.CancelFunc
	done  chan struct{}
}

// listCounter counts the listings a worker's pool makes (every attempt,
// as pool.Stats counts gets and puts), until pool.Stats counts them too.
type listCounter struct {
	store.Store
	n atomic.Uint64
}

func (c *listCounter) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.n.Add(1)
	return c.Store.(store.Lister).List(ctx, prefix) // a faultstore: it always lists
}

// perFI is requests per worker per FrequentInterval.
type perFI struct{ puts, gets, lists, hub float64 }

// rate turns the calls of workers over elapsed into requests per worker
// per FrequentInterval fi.
func rate(c calls, workers int, elapsed, fi time.Duration) perFI {
	d := float64(workers) * float64(elapsed) / float64(fi)
	return perFI{puts: float64(c.puts) / d, gets: float64(c.gets) / d, lists: float64(c.lists) / d, hub: float64(c.hub) / d}
}

func (c calls) minus(o calls) calls {
	return calls{gets: c.gets - o.gets, puts: c.puts - o.puts, lists: c.lists - o.lists, hub: c.hub - o.hub}
}

// errNoSpread marks a pool whose workers did not reach their shares.
var errNoSpread = errors.New("the shards did not spread over the workers (their share ± 1) within 40 × LeaderTimeout")

// errSurvivorLost marks a trial in which a worker other than the one killed
// lost its session (a store or a machine too slow for the scaled lease):
// it measures that, not a crash, so it is run again.
var errSurvivorLost = errors.New("a survivor's session was lost during the trial")

// shardTrial runs workers over n shards under a prefix of its own until
// they have spread, calls measure, kills one worker at a random point of
// its renewal cycle, and returns how long until every shard it ran was
// run by another.
//
// Each worker gets a store of its own from newStore, as a process would
// (on S3, its own client and connections), and all are counted together.
// Without kill, it returns once measure has.
func shardTrial(ctx context.Context, newStore func() store.Store, workers, n, k int, ii time.Duration, kill bool, measure func(counts func() calls, ws []*shardWorker) error) (time.Duration, error) {
	fi, _, lt := scaled(k)
	ii /= time.Duration(k)
	var ws []*shardWorker
	counts := func() (sum calls) { // every store call attempt of every worker
		for _, w := range ws {
			s := w.p.Stats()
			sum.gets, sum.puts, sum.lists = sum.gets+s.Gets, sum.puts+s.Puts, sum.lists+w.lists.n.Load()
			sum.hub += w.peer.requests()
		}
		return sum
	}
	prefix := fmt.Sprintf("measure/shards-%d/", time.Now().UnixNano())
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%04d", i)
	}
	ref := &shardReferee{live: map[string]shardHolder{}, dead: map[string]bool{}}
	defer func() {
		for _, w := range ws {
			w.stop()
		}
		for _, w := range ws {
			<-w.done
			w.peer.close()
		}
	}()
	for i := range workers {
		w := &shardWorker{id: fmt.Sprintf("worker-%02d", i), conn: faultstore.New(newStore()), done: make(chan struct{})}
		w.lists = &listCounter{Store: w.conn}
		cfg := shardpool.Config{Store: w.lists, Prefix: prefix, ID: w.id, Shards: names,
			FrequentInterval: fi, InfrequentInterval: ii, LeaderTimeout: lt, Logger: shardLog,
			Work: func(ctx context.Context, shard string, _ *s3lect.Leadership) {
				ref.start(shard, w.id, ctx)
				<-ctx.Done()
			}}
		var err error
		if w.peer, err = shardPeersOf(ctx).start(&cfg); err != nil {
			return 0, err
		}
		p, err := shardpool.New(cfg)
		if err != nil {
			w.peer.close()
			return 0, err
		}
		w.p = p
		w.peer.serve(p)
		wctx, stop := context.WithCancel(ctx)
		w.stop = stop
		go func() { defer close(w.done); p.Run(wctx) }()
		ws = append(ws, w)
	}
	spread := func(alive []*shardWorker) bool {
		c := map[string]int{}
		for _, w := range ref.owners() {
			c[w]++
		}
		sum := 0
		for _, w := range alive {
			if c[w.id] < n/len(alive)-1 || c[w.id] > (n+len(alive)-1)/len(alive)+1 {
				return false
			}
			sum += c[w.id]
		}
		return sum == n
	}
	for deadline := time.Now().Add(40 * lt); !spread(ws); time.Sleep(fi / 10) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d workers: %w", workers, errNoSpread)
		}
	}
	if measure != nil {
		if err := measure(counts, ws); err != nil {
			return 0, err
		}
	}
	if !kill {
		return 0, nil
	}
	// A crash of a steady pool: the spread is reached while the last
	// claims' early renewals and the looks after them still go on, so the
	// kill waits two leases more (the first trial's measure waited longer).
	if measure == nil {
		time.Sleep(2 * lt)
	}
	// At a random point of the watch's cycle: the renewals', or a stable
	// pool's InfrequentInterval (its ticks fall on the wall clock's
	// multiples of it, and the spread is often reached at one of them).
	time.Sleep(time.Duration(rand.Int64N(int64(max(fi, ii)))))
	victim := ws[rand.IntN(len(ws))]
	var orphans []string
	for s, w := range ref.owners() {
		if w == victim.id {
			orphans = append(orphans, s)
		}
	}
	sessions := func() (n uint64) {
		for _, w := range ws {
			if w != victim {
				n += w.p.Stats().Sessions
			}
		}
		return n
	}
	before := sessions()
	victim.conn.Cut() // killed: every call fails from now on, calls in flight too; no goodbye
	// With -shard-peer, its peer connections are reset, its listener closed.
	victim.peer.kill()
	killed := time.Now()
	ref.mu.Lock()
	ref.dead[victim.id] = true
	ref.mu.Unlock()
	for deadline := killed.Add(10 * lt); ; time.Sleep(time.Millisecond) {
		owners := ref.owners()
		if !slices.ContainsFunc(orphans, func(s string) bool { return owners[s] == "" }) {
			d := time.Since(killed)
			if sessions() != before {
				return 0, errSurvivorLost
			}
			return d, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the killed worker's shards were not all led again within 10 × LeaderTimeout")
		}
	}
}

// shards measures the shard table's row for one store: trials kills, the
// first after a steady window in which requests, goroutines and memory
// are counted.
func shards(ctx context.Context, newStore func() store.Store, workers, n, k int, ii time.Duration, trials int, window time.Duration) (shardResult, error) {
	fi, _, _ := scaled(k)
	var r shardResult
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	measure := func(counts func() calls, ws []*shardWorker) error {
		time.Sleep(2 * fi) // the early renewals of the last claims are over
		c0, t0 := counts(), time.Now()
		time.Sleep(window)
		c1, elapsed := counts(), time.Since(t0)
		r.perWorker = rate(c1.minus(c0), workers, elapsed, fi)
		r.goroutines = float64(runtime.NumGoroutine()-g0) / float64(n)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		r.heapBytes = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		r.stackBytes = float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n)
		for _, w := range ws {
			r.handovers += w.p.Stats().Handovers
		}
		return nil
	}
	for len(r.ledAgain) < trials {
		m := measure
		if len(r.ledAgain) > 0 || r.disturbed > 0 {
			m = nil
		}
		d, err := shardTrial(ctx, newStore, workers, n, k, ii, true, m)
		switch {
		case errors.Is(err, errSurvivorLost) && r.disturbed < 2*trials:
			r.disturbed++
			continue
		case err != nil:
			return r, err
		}
		r.ledAgain = append(r.ledAgain, d)
	}
	slices.Sort(r.ledAgain)
	return r, nil
}

// shardLog receives the workers' logs (discarded; a debugging aid).
var shardLog = slog.New(slog.DiscardHandler)

// shardCost runs workers over n shards at 1/k of the default intervals
// until they have spread, and returns their requests per worker per
// FrequentInterval over window, in steady state.
func shardCost(ctx context.Context, newStore func() store.Store, workers, n, k int, ii, window time.Duration) (perFI, error) {
	fi, _, _ := scaled(k)
	var r perFI
	_, err := shardTrial(ctx, newStore, workers, n, k, ii, false, func(counts func() calls, _ []*shardWorker) error {
		time.Sleep(2 * fi) // the early renewals of the last claims are over
		c0, t0 := counts(), time.Now()
		time.Sleep(window)
		r = rate(counts().minus(c0), workers, time.Since(t0), fi)
		return nil
	})
	return r, err
}

// cloud is one object store's request prices, in dollars per request.
type cloud struct {
	name           string
	put, get, list float64
}

// clouds are the request prices of the cost table (docs/shards.md says
// where and when they were read): S3 Standard in us-east-1 (LIST is
// priced as PUT), GCS Standard in a region (writes and objects.list are
// Class A, reads Class B), Azure Blob Hot LRS in East US (List Blobs is a
// "list and create container" operation, priced as a write).
var clouds = []cloud{
	{"S3 Standard", 0.005 / 1000, 0.0004 / 1000, 0.005 / 1000},
	{"GCS Standard", 0.005 / 1000, 0.0004 / 1000, 0.005 / 1000},
	{"Azure Blob Hot", 0.065 / 10000, 0.005 / 10000, 0.065 / 10000},
}

// monthly returns what a pool of workers making r requests each per
// FrequentInterval costs a month on c, at the default FrequentInterval.
func (c cloud) monthly(r perFI, workers int) float64 {
	intervals := float64(hoursPerMonth*time.Hour) / float64(s3lect.DefaultFrequentInterval)
	return float64(workers) * intervals * (r.puts*c.put + r.gets*c.get + r.lists*c.list)
}
