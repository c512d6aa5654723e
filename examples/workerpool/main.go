// Command workerpool runs a pool of workers over many shards with package
// pool: every worker keeps one session object alive for all the shards it
// leads (one write per FrequentInterval, whatever their number), whoever
// leads a shard does its work under that leadership's context, and one
// worker, elected coordinator, spreads the shards over all. It starts
// every worker at once, prints how many shards each worker leads over
// time, then kills a worker picked at random (its store calls fail from then on, calls
// in flight too, and it never resigns) and shows the survivors take over
// its shards, each its fair share. It ends with the figures: when the
// shards were spread, the longest a shard went without a leader, and the
// store requests per shard.
//
//	go run ./examples/workerpool                       # 4 workers, 40 shards, in memory
//	go run ./examples/workerpool -workers 3 -shards 12 -speed 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

func main() {
	workers := flag.Int("workers", 4, "number of workers")
	shards := flag.Int("shards", 40, "number of shards")
	speed := flag.Int("speed", 10, "divide the default intervals by this")
	flag.Parse()
	if _, err := run(context.Background(), *workers, *shards, *speed, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "workerpool:", err)
		os.Exit(1)
	}
}

// result holds the figures of one run.
type result struct {
	lt          time.Duration
	dead        string         // the worker killed
	spread      time.Duration  // from the start until every worker led its fair share ± 2
	resettled   time.Duration  // from the dead worker's last lease end until the survivors did
	maxGap      time.Duration  // the longest a shard went from one leadership's end to the next's start
	double      int            // times a shard's work started while another worker's leadership was live
	reqsPerSec  float64        // store requests per shard per second while the pool was steady
	settled     map[string]int // shards per worker before the kill
	survivors   map[string]int // shards per worker at the end
	steadyCalls calls          // the store calls of the steady window
}

// calls counts store call attempts, whatever their outcome.
type calls struct{ Gets, Puts, Lists uint64 }

// referee watches every shard's work, as the shards' users would.
type referee struct {
	mu      sync.Mutex
	live    map[string]*lease
	endedAt map[string]time.Time
	maxGap  time.Duration
	double  int
}

type lease struct {
	worker string
	ctx    context.Context
}

func (r *referee) start(shard, worker string, ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.live[shard]; l != nil && l.ctx.Err() == nil {
		r.double++
	}
	if at, ok := r.endedAt[shard]; ok {
		r.maxGap = max(r.maxGap, time.Since(at))
	}
	r.live[shard] = &lease{worker, ctx}
}

func (r *referee) end(shard string, ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.live[shard]; l != nil && l.ctx == ctx {
		r.endedAt[shard] = time.Now()
	}
}

func (r *referee) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, l := range r.live {
		if l.ctx.Err() == nil {
			n[l.worker]++
		}
	}
	return n
}

func run(ctx context.Context, nWorkers, nShards, speed int, w io.Writer) (result, error) {
	if nWorkers < 2 || nShards < 1 || speed < 1 {
		return result{}, errors.New("need at least 2 workers, 1 shard, and a speed of at least 1")
	}
	fi := s3lect.DefaultFrequentInterval / time.Duration(speed)
	lt := s3lect.DefaultLeaderTimeout / time.Duration(speed)
	res := result{lt: lt}
	mem := memstore.New()
	ref := &referee{live: map[string]*lease{}, endedAt: map[string]time.Time{}}
	var names []string
	for i := range nShards {
		names = append(names, fmt.Sprintf("shard-%02d", i))
	}
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(w, "%7.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	ids := make([]string, nWorkers)
	conns := make([]*faultstore.Store, nWorkers)
	pools := make([]*pool.Pool, nWorkers)
	stops := make([]context.CancelFunc, nWorkers)
	var wg sync.WaitGroup
	defer func() {
		// The killed worker stands for a process that is gone; its
		// goroutines still run here, and its Run returns only once it
		// can reach the store again (it closes its session first).
		for i, stop := range stops {
			if stop != nil {
				conns[i].Restore()
				stop()
			}
		}
		wg.Wait()
	}()
	for n := range nWorkers {
		id := fmt.Sprintf("w%d", n+1)
		conn := faultstore.New(mem)
		p, err := pool.New(pool.Config{
			Store: conn, Prefix: "pool/", ID: id, Shards: names,
			FrequentInterval: fi, LeaderTimeout: lt, Logger: slog.New(slog.DiscardHandler),
			Work: func(ctx context.Context, shard string, _ *s3lect.Leadership) {
				ref.start(shard, id, ctx)
				<-ctx.Done() // one shard's work would run here, until ctx ends
				ref.end(shard, ctx)
			},
		})
		if err != nil {
			return result{}, err
		}
		wctx, stop := context.WithCancel(ctx)
		ids[n], conns[n], pools[n], stops[n] = id, conn, p, stop
		wg.Go(func() { p.Run(wctx) })
	}

	fair := func(c map[string]int, workers []string) bool {
		sum := 0
		for _, id := range workers {
			share := nShards / len(workers)
			if c[id] < share-2 || c[id] > share+2+min(nShards%len(workers), 1) {
				return false
			}
			sum += c[id]
		}
		return sum == nShards
	}
	show := func(c map[string]int) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s=%d", id, c[id]))
		}
		return strings.Join(parts, " ")
	}
	// watch prints the spread every LeaderTimeout/2 for d, and returns
	// when it first became fair for workers (0 if it did not).
	watch := func(d time.Duration, workers []string, since time.Time) time.Duration {
		var at time.Duration
		tick := time.NewTicker(lt / 2)
		defer tick.Stop()
		for end := time.Now().Add(d); time.Now().Before(end); {
			<-tick.C
			c := ref.counts()
			if at == 0 && fair(c, workers) {
				at = time.Since(since)
			}
			say("shards per worker  %s", show(c))
		}
		return at
	}

	say("%d workers start together over %d shards (LeaderTimeout %v)", nWorkers, nShards, lt)
	res.spread = watch(4*lt, ids, start)
	res.settled = ref.counts()
	// Each pool's Stats counts its store calls; summed, they are every
	// call the store saw.
	storeCalls := func() (c calls) {
		for _, p := range pools {
			s := p.Stats()
			c.Gets, c.Puts, c.Lists = c.Gets+s.Gets, c.Puts+s.Puts, c.Lists+s.Lists
		}
		return c
	}
	before := storeCalls()
	steady := time.Now()
	watch(2*lt, ids, start)
	now := storeCalls()
	res.steadyCalls = calls{Gets: now.Gets - before.Gets, Puts: now.Puts - before.Puts, Lists: now.Lists - before.Lists}
	res.reqsPerSec = float64(res.steadyCalls.Gets+res.steadyCalls.Puts+res.steadyCalls.Lists) / float64(nShards) / time.Since(steady).Seconds()

	victim := rand.IntN(nWorkers)
	dead := ids[victim]
	res.dead = dead
	say("%s is killed: its store calls fail from now on and it never resigns", dead)
	conns[victim].Cut()
	for ref.counts()[dead] > 0 {
		time.Sleep(lt / 100)
	}
	leaseEnd := time.Now()
	say("%s's last lease has ended", dead)
	survivors := slices.Delete(slices.Clone(ids), victim, victim+1)
	res.resettled = watch(4*lt, survivors, leaseEnd)
	res.survivors = ref.counts()
	ref.mu.Lock()
	res.maxGap, res.double = ref.maxGap, ref.double
	ref.mu.Unlock()

	inLT := func(d time.Duration) string {
		if d == 0 {
			return "never"
		}
		return fmt.Sprintf("%v (%.1f × LeaderTimeout)", d.Round(time.Millisecond), float64(d)/float64(lt))
	}
	say("spread at fair share ± 2 after %s; then %s", inLT(res.spread), show(res.settled))
	say("survivors at fair share ± 2 %s after the dead worker's last lease ended; then %s", inLT(res.resettled), show(res.survivors))
	say("longest a shard went without a leader: %s", inLT(res.maxGap))
	say("shards whose work ran on two workers at once: %d", res.double)
	say("store requests per shard per second while steady: %.3f (%d gets, %d puts, %d listings over %d shards in %v; the coordinator election's own calls not counted)",
		res.reqsPerSec, res.steadyCalls.Gets, res.steadyCalls.Puts, res.steadyCalls.Lists, nShards, (2 * lt).Round(time.Millisecond))
	return res, nil
}
