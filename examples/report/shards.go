package main

// What package pool's multiplexed shard lease costs and how fast it fails
// over: store requests per FrequentInterval with 1,000 shards on 10
// workers, the time from killing a worker to every one of its shards led
// again, and goroutines and memory per shard.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
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
	handovers  uint64          // leaderships ended by a move during the start (none expected)
	disturbed  int             // trials run again: a survivor lost its session

	// Per trial, sorted: the time to the even spread (every live worker
	// at ⌊N/W⌋ or ⌈N/W⌉, ± 1, every shard led) from the workers' start,
	// from the kill, and from a new worker's start after it; and how many
	// deaths and joins did not spread within 10 × LeaderTimeout (counted
	// at that bound).
	coldSpread, deathSpread, joinSpread []time.Duration
	spreadMissed                        int
}

// shardReferee follows every shard's Work, as the shards' users would.
type shardReferee struct {
	mu   sync.Mutex
	live map[string]shardHolder
	dead map[string]bool // workers killed: their Work no longer counts
	// starts are, per shard, the last Work starts, for the report's
	// account of a shard left unled (progress).
	starts map[string][]string
}

type shardHolder struct {
	worker string
	ctx    context.Context
}

// start records that worker's Work for shard began. The pool calls Work
// on a goroutine of its own, which a busy machine may run late: after the
// leadership has ended and the next owner's Work has begun. Such a late
// start must not hide the next owner (a shard that looks unled while it is
// led), so a start whose context has ended records nothing. Checked under
// the lock, that is enough: a context live now means the next owner's
// leadership has not begun (no two leaderships of a shard overlap), so
// its start comes after this one.
func (r *shardReferee) start(shard, worker string, ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.starts != nil {
		h := append(r.starts[shard], fmt.Sprintf("%s %s (ended: %v)", time.Now().Format("15:04:05.000"), worker, ctx.Err() != nil))
		r.starts[shard] = h[max(0, len(h)-6):]
	}
	if ctx.Err() != nil {
		return
	}
	r.live[shard] = shardHolder{worker, ctx}
}

// unled reports whether a shard of shards has no live worker running it.
// It reads only those shards: the crash trial calls it every millisecond,
// and a copy of every owner (owners) would cost a core's share with
// 10,000 shards.
func (r *shardReferee) unled(shards []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range shards {
		if h, ok := r.live[s]; !ok || h.ctx.Err() != nil || r.dead[h.worker] {
			return true
		}
	}
	return false
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
	lists *callCounter      // what the pool is given: conn, every call counted (the coordinator election's too)
	peer  *shardPeer        // with -shard-peer: its peer server and client (shardpeer.go)
	p     *shardpool.Pool
	stop  context.CancelFunc
	done  chan struct{}
	log   *logRing // its pool's last log lines (Info and above), printed when the pool does not spread
}

// callCounter counts every call attempt a worker makes on the store: the
// pool's own (which pool.Stats counts) and its coordinator election's
// (which it does not).
type callCounter struct {
	store.Store
	gets, puts, lists atomic.Uint64
}

func (c *callCounter) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *callCounter) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	c.puts.Add(1)
	return c.Store.PutIfMatch(ctx, key, data, etag)
}

func (c *callCounter) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.lists.Add(1)
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
var errNoSpread = errors.New("the shards did not spread over the workers (their share ± 1) within the cold start's wait")

// coldSpreadWait is how long a cold start may take to spread, in
// LeaderTimeouts (-shard-spread-wait).
var coldSpreadWait = 40

// settleIntervals is how many FrequentIntervals after the spread the shard
// tables wait before their measurement window opens: after a spread every
// worker still looks (reading every member's session object) 1, 2, 4...
// intervals on, until two looks in a row find the same counts, and with
// 100 workers those looks are most of what a short window counts.
var settleIntervals = 2

// errSurvivorLost marks a trial in which a worker other than the one killed
// lost its session (a store or a machine too slow for the scaled lease):
// it measures that, not a crash, so it is run again.
var errSurvivorLost = errors.New("a survivor's session was lost during the trial")

// trialTimes are what one crash trial measures.
type trialTimes struct {
	coldSpread  time.Duration // the workers' start → the even spread
	ledAgain    time.Duration // the kill → every shard of the killed worker led again
	deathSpread time.Duration // the kill → the even spread over the survivors
	joinSpread  time.Duration // a new worker's start, after the death → the even spread with it
	missed      int           // of the last two, those not reached within 10 × LeaderTimeout (given as that bound)
}

// shardTrial starts workers, stagger apart, over n shards under a prefix
// of its own, runs them until
// they have spread, calls measure, kills one worker at a random point of
// its renewal cycle, and measures how long until every shard it ran was
// run by another and until the survivors had their even shares; then
// starts one more worker and measures how long until the shares are even
// again with it.
//
// Each worker gets a store of its own from newStore, as a process would
// (on S3, its own client and connections), and all are counted together.
// Without kill, it returns once measure has.
func shardTrial(ctx context.Context, newStore func() store.Store, workers, n, k int, ii, stagger time.Duration, kill bool, measure func(counts func() calls, ws []*shardWorker) error) (trialTimes, error) {
	var tt trialTimes
	fi, _, lt := scaled(k)
	poll := max(lt/100, time.Millisecond) // how often the spread is counted (n shards each time)
	ii /= time.Duration(k)
	var ws []*shardWorker
	counts := func() (sum calls) { // every store call attempt of every worker
		for _, w := range ws {
			c := w.lists
			sum.gets, sum.puts, sum.lists = sum.gets+c.gets.Load(), sum.puts+c.puts.Load(), sum.lists+c.lists.Load()
			sum.hub += w.peer.requests()
		}
		return sum
	}
	prefix := fmt.Sprintf("measure/shards-%d/", time.Now().UnixNano())
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%04d", i)
	}
	ref := &shardReferee{live: map[string]shardHolder{}, dead: map[string]bool{}, starts: map[string][]string{}}
	defer func() {
		for _, w := range ws {
			w.conn.Restore() // a killed worker's Run returns only once it reaches the store (it closes its session)
			w.stop()
		}
		for _, w := range ws {
			<-w.done
			w.peer.close()
		}
	}()
	startWorker := func(i int) error {
		w := &shardWorker{id: fmt.Sprintf("worker-%02d", i), conn: faultstore.New(newStore()), done: make(chan struct{}), log: &logRing{}}
		w.lists = &callCounter{Store: w.conn}
		cfg := shardpool.Config{Store: w.lists, Prefix: prefix, ID: w.id, Shards: names,
			FrequentInterval: fi, InfrequentInterval: ii, LeaderTimeout: lt, Logger: slog.New(slog.NewJSONHandler(w.log, &slog.HandlerOptions{Level: shardLogLevel()})),
			Work: func(ctx context.Context, shard string, _ *s3lect.Leadership) {
				ref.start(shard, w.id, ctx)
				<-ctx.Done()
			}}
		var err error
		if w.peer, err = shardPeersOf(ctx).start(&cfg); err != nil {
			return err
		}
		p, err := shardpool.New(cfg)
		if err != nil {
			w.peer.close()
			return err
		}
		w.p = p
		w.peer.serve(p)
		wctx, stop := context.WithCancel(ctx)
		w.stop = stop
		go func() { defer close(w.done); p.Run(wctx) }()
		ws = append(ws, w)
		return nil
	}
	for i := range workers {
		if i > 0 {
			time.Sleep(stagger)
		}
		if err := startWorker(i); err != nil {
			return tt, err
		}
	}
	started := time.Now() // the last worker's start
	// where says how the shards stand over alive: how many are led, the
	// fewest and most a worker of alive runs, and how many of alive are
	// outside their share ± 1.
	type where struct{ led, fewest, most, outside int }
	state := func(alive []*shardWorker) (s where) {
		c := map[string]int{}
		for _, w := range ref.owners() {
			c[w]++
		}
		s.fewest = n
		for _, w := range alive {
			if c[w.id] < n/len(alive)-1 || c[w.id] > (n+len(alive)-1)/len(alive)+1 {
				s.outside++
			}
			s.led += c[w.id]
			s.fewest, s.most = min(s.fewest, c[w.id]), max(s.most, c[w.id])
		}
		return s
	}
	spread := func(alive []*shardWorker) bool {
		s := state(alive)
		return s.outside == 0 && s.led == n
	}
	// A pool that takes long to spread says how far it got, on stderr
	// (the report is stdout), every 10 × LeaderTimeout.
	progress := func(what string, t0 time.Time, alive []*shardWorker) {
		s := state(alive)
		var st shardpool.Stats // the counters, summed over every worker
		for _, w := range ws {
			c := w.p.Stats()
			st.Sessions, st.Claims, st.Releases = st.Sessions+c.Sessions, st.Claims+c.Claims, st.Releases+c.Releases
		}
		fmt.Fprintf(os.Stderr, "report: %s, %v in: %d of %d shards led; per worker %d to %d (share %d or %d, ± 1); %d of %d workers outside it; "+
			"in all %d sessions opened by %d workers, %d leaderships started, %d ended by a move\n",
			what, time.Since(t0).Round(time.Second), s.led, n, s.fewest, s.most, n/len(alive), (n+len(alive)-1)/len(alive), s.outside, len(alive),
			st.Sessions, len(ws), st.Claims, st.Releases)
		if s.led < n {
			explainUnled(ctx, ref, alive, names, prefix)
		}
	}
	for deadline, next := time.Now().Add(time.Duration(coldSpreadWait)*lt), time.Now().Add(10*lt); !spread(ws); time.Sleep(poll) {
		if time.Now().After(next) {
			progress("cold start", started, ws)
			next = next.Add(10 * lt)
		}
		if time.Now().After(deadline) {
			s := state(ws)
			return tt, fmt.Errorf("%d workers: %w, %d × LeaderTimeout (%d of %d shards led; per worker %d to %d; %d workers outside their share)", workers, errNoSpread, coldSpreadWait, s.led, n, s.fewest, s.most, s.outside)
		}
	}
	tt.coldSpread = time.Since(started)
	if measure != nil {
		if err := measure(counts, ws); err != nil {
			return tt, err
		}
	}
	if !kill {
		return tt, nil
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
	for deadline := killed.Add(10 * lt); ref.unled(orphans); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return tt, fmt.Errorf("the killed worker's shards were not all led again within 10 × LeaderTimeout")
		}
	}
	tt.ledAgain = time.Since(killed)
	if sessions() != before {
		return tt, errSurvivorLost
	}
	// The even spread over the survivors, then over them and a joiner:
	// each waited for up to 10 × LeaderTimeout, and given as that bound
	// (and counted) when not reached.
	alive := slices.DeleteFunc(slices.Clone(ws), func(w *shardWorker) bool { return w == victim })
	spreadSince := func(t0 time.Time) time.Duration {
		for deadline := t0.Add(10 * lt); !spread(alive); time.Sleep(poll) {
			if time.Now().After(deadline) {
				tt.missed++
				return 10 * lt
			}
		}
		return time.Since(t0)
	}
	tt.deathSpread = spreadSince(killed)
	joined := time.Now()
	if err := startWorker(workers); err != nil {
		return tt, err
	}
	alive = append(alive, ws[len(ws)-1])
	tt.joinSpread = spreadSince(joined)
	return tt, nil
}

// shards measures the shard table's row for one store: trials kills, the
// first after a steady window in which requests, goroutines and memory
// are counted.
func shards(ctx context.Context, newStore func() store.Store, workers, n, k int, ii, stagger time.Duration, trials int, window time.Duration) (shardResult, error) {
	fi, _, _ := scaled(k)
	var r shardResult
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	measure := func(counts func() calls, ws []*shardWorker) error {
		time.Sleep(time.Duration(settleIntervals) * fi) // the early renewals of the last claims are over
		c0, t0 := counts(), time.Now()
		time.Sleep(window)
		c1, elapsed := counts(), time.Since(t0)
		r.perWorker = rate(c1.minus(c0), workers, elapsed, fi)
		if shardLogLevel() == slog.LevelDebug {
			// Why they looked: each worker's last lines, Debug included.
			for _, w := range ws {
				fmt.Fprintf(os.Stderr, "report: after the window, %s's last log lines:\n%s", w.id, w.log.last(40))
			}
		}
		r.goroutines = float64(runtime.NumGoroutine()-g0) / float64(n)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		r.heapBytes = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		r.stackBytes = float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n)
		for _, w := range ws {
			r.handovers += w.p.Stats().Releases
		}
		return nil
	}
	for len(r.ledAgain) < trials {
		m := measure
		if len(r.ledAgain) > 0 || r.disturbed > 0 {
			m = nil
		}
		tt, err := shardTrial(ctx, newStore, workers, n, k, ii, stagger, true, m)
		switch {
		case errors.Is(err, errSurvivorLost) && r.disturbed < 2*trials:
			r.disturbed++
			continue
		case err != nil:
			return r, err
		}
		r.ledAgain = append(r.ledAgain, tt.ledAgain)
		r.coldSpread = append(r.coldSpread, tt.coldSpread)
		r.deathSpread = append(r.deathSpread, tt.deathSpread)
		r.joinSpread = append(r.joinSpread, tt.joinSpread)
		r.spreadMissed += tt.missed
	}
	for _, ds := range [][]time.Duration{r.ledAgain, r.coldSpread, r.deathSpread, r.joinSpread} {
		slices.Sort(ds)
	}
	return r, nil
}

// explainUnled says on stderr why a pool has not spread: the workers
// below their share, with their last log lines; up to five shards with
// no Work running, with the last Work starts the referee saw, the workers
// whose pools say they lead them (Leading: a shard a pool leads but whose
// Work the referee does not see is the report's fault, not the pool's),
// the shard's record and its owner's session object.
func explainUnled(ctx context.Context, ref *shardReferee, alive []*shardWorker, names []string, prefix string) {
	n := len(names)
	owners := ref.owners()
	held := map[string]int{}
	for _, w := range owners {
		held[w]++
	}
	for _, w := range alive {
		if held[w.id] < n/len(alive) {
			fmt.Fprintf(os.Stderr, "report: %s runs %d shards; its pool leads %v; its last log lines:\n%s", w.id, held[w.id], w.p.Leading(), w.log.last(60))
		}
	}
	var unled []string
	for _, name := range names {
		if owners[name] == "" {
			if unled = append(unled, name); len(unled) == 5 {
				break
			}
		}
	}
	for _, name := range unled {
		var by []string
		for _, w := range alive {
			if slices.Contains(w.p.Leading(), name) {
				by = append(by, w.id)
			}
		}
		ref.mu.Lock()
		starts := slices.Clone(ref.starts[name])
		ref.mu.Unlock()
		fmt.Fprintf(os.Stderr, "report: %s has no Work running (its last Work starts: %v); the pools that say they lead it: %v\n", name, starts, by)
	}
	for _, w := range alive {
		page, etag, err := alive[0].conn.Get(ctx, prefix+"assign/"+w.id+".json")
		fmt.Fprintf(os.Stderr, "report: %s's page %s (%v): %s\n", w.id, etag, err, page)
	}
}

// shardLogLevel is the level of the workers' logs the report keeps:
// Info, or Debug with S3LECT_REPORT_DEBUG=1 (every claim and handover;
// it costs CPU beside the figures).
func shardLogLevel() slog.Level {
	if os.Getenv("S3LECT_REPORT_DEBUG") == "1" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// logRing keeps the last lines a worker's pool logged: when a pool does
// not spread, the report prints those of the workers below their share.
type logRing struct {
	mu    sync.Mutex
	lines [][]byte
	next  int
}

const logRingLines = 200

func (r *logRing) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := slices.Clone(b)
	if len(r.lines) < logRingLines {
		r.lines = append(r.lines, line)
	} else {
		r.lines[r.next] = line
		r.next = (r.next + 1) % logRingLines
	}
	return len(b), nil
}

// last returns up to n of the last lines, oldest first.
func (r *logRing) last(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(slices.Clone(r.lines[r.next:]), r.lines[:r.next]...)
	return bytes.Join(all[max(0, len(all)-n):], nil)
}

// shardCost runs workers over n shards at 1/k of the default intervals
// until they have spread, and returns their requests per worker per
// FrequentInterval over window, in steady state.
func shardCost(ctx context.Context, newStore func() store.Store, workers, n, k int, ii, stagger, window time.Duration) (perFI, error) {
	fi, _, _ := scaled(k)
	var r perFI
	_, err := shardTrial(ctx, newStore, workers, n, k, ii, stagger, false, func(counts func() calls, _ []*shardWorker) error {
		time.Sleep(time.Duration(settleIntervals) * fi) // the early renewals of the last claims are over
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
