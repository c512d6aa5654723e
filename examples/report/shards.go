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
	"time"

	"github.com/s3lect/s3lect"
	shardpool "github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// shardResult is what one store's row of the shard table shows.
type shardResult struct {
	putsPerFI, getsPerFI float64         // steady state, all workers together, per FrequentInterval
	ledAgain             []time.Duration // per trial: kill → every shard of the killed worker led again, sorted
	goroutines           float64         // per shard, steady state (Work's goroutine included)
	heapBytes            float64         // per shard
	stackBytes           float64         // per shard
	handovers            uint64          // shards handed over during the start (none expected)
	disturbed            int             // trials run again: a survivor lost its session
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
	id   string
	conn *faultstore.Store // cut when the worker is killed
	p    *shardpool.Pool
	stop context.CancelFunc
	done chan struct{}
}

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
func shardTrial(ctx context.Context, newStore func() store.Store, workers, n, k int, measure func(counts func() calls, ws []*shardWorker) error) (time.Duration, error) {
	fi, _, lt := scaled(k)
	var ws []*shardWorker
	counts := func() (sum calls) { // every store call attempt of every worker
		for _, w := range ws {
			s := w.p.Stats()
			sum.gets, sum.puts = sum.gets+s.Gets, sum.puts+s.Puts
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
		}
	}()
	for i := range workers {
		w := &shardWorker{id: fmt.Sprintf("worker-%02d", i), conn: faultstore.New(newStore()), done: make(chan struct{})}
		p, err := shardpool.New(shardpool.Config{Store: w.conn, Prefix: prefix, ID: w.id, Shards: names,
			FrequentInterval: fi, LeaderTimeout: lt, Logger: shardLog,
			Work: func(ctx context.Context, shard string, _ *s3lect.Leadership) {
				ref.start(shard, w.id, ctx)
				<-ctx.Done()
			}})
		if err != nil {
			return 0, err
		}
		w.p = p
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
			return 0, fmt.Errorf("the shards did not spread over %d workers (their share ± 1) within 40 × LeaderTimeout", workers)
		}
	}
	if measure != nil {
		if err := measure(counts, ws); err != nil {
			return 0, err
		}
	}
	time.Sleep(time.Duration(rand.Int64N(int64(fi))))
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
func shards(ctx context.Context, newStore func() store.Store, workers, n, k, trials int, window time.Duration) (shardResult, error) {
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
		intervals := float64(elapsed) / float64(fi)
		r.putsPerFI = float64(c1.puts-c0.puts) / intervals
		r.getsPerFI = float64(c1.gets-c0.gets) / intervals
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
		d, err := shardTrial(ctx, newStore, workers, n, k, m)
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
