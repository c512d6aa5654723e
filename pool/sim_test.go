package pool

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

var (
	simSeeds  = flag.Int("sim.seeds", envInt("S3LECT_SIM_SEEDS", 2000), "number of seeds TestShardSimulation runs (default: $S3LECT_SIM_SEEDS, else 2000)")
	simSeed   = flag.Int64("sim.seed", -1, "run TestShardSimulation for this seed only (replay)")
	simFirst  = flag.Int64("sim.first", 0, "the first seed TestShardSimulation runs")
	simMutate = flag.String("sim.mutate", "", "break one rule (margin0, latereply, noreread, nottl) to see TestShardSimulation catch it")
)

// envInt returns the environment variable name as a number, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

var errInjected = errors.New("injected fault")

// TestShardSimulation runs randomized fault schedules against pools of
// workers over 100 to 130 shards in virtual time: store errors, lost
// replies, stalled connections, latency spikes beyond the lease, writes
// that land after their caller gave up, partitions (most right after a
// write lands), workers killed and restarted, paused (every call held,
// then sent late), joining and leaving, every worker's clock at its own
// rate within 5%. It checks that no shard ever has two live leaderships,
// that each shard's terms rise with every new leadership, and that every
// shard is led again once the faults stop. A failing seed replays with
// -sim.seed=N.
func TestShardSimulation(t *testing.T) {
	defer setMutation(t)()
	first, n := *simFirst, int64(*simSeeds)
	if *simSeed >= 0 {
		first, n = *simSeed, 1
	}
	var (
		mu     sync.Mutex
		totals = map[string]int{}
	)
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for seed := first; seed < first+n; seed++ {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Parallel()
				var counts map[string]int
				synctest.Test(t, func(t *testing.T) { counts = simulatePool(t, seed) })
				mu.Lock()
				defer mu.Unlock()
				for k, v := range counts {
					totals[k] += v
				}
			})
		}
	})
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range totals {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, " %s=%d", k, totals[k])
	}
	t.Logf("shards: %d seeds survived in %v:%s", n, time.Since(start).Round(time.Second), b.String())
}

// poolSimParams is one seed's world.
type poolSimParams struct {
	workers, shards   int
	fi, lt            time.Duration
	mixed             bool          // a rolling change of configuration: each incarnation takes one of two
	fi2, lt2          time.Duration // the other configuration
	faultsFor         time.Duration
	calmFor           time.Duration
	errRate, lostRate float64
	hangRate          float64
	latency, spike    time.Duration
	partitions        int
	crashes, pauses   int
	joins, leaves     int
}

func newPoolSimParams(r *rand.Rand) poolSimParams {
	fi := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	lt := fi*2 + time.Duration(r.Int64N(int64(fi*3))) + time.Millisecond
	fi2 := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	lt2 := max(fi2*2+time.Duration(r.Int64N(int64(fi2*4)))+time.Millisecond, lt*2)
	return poolSimParams{
		mixed:      r.IntN(3) == 0,
		fi2:        fi2,
		lt2:        lt2,
		workers:    2 + r.IntN(4),
		shards:     100 + r.IntN(31),
		fi:         fi,
		lt:         lt,
		faultsFor:  15 * time.Second,
		calmFor:    3*max(lt, lt2) + 4*max(fi, fi2) + 2*time.Second,
		errRate:    r.Float64() * 0.1,
		lostRate:   r.Float64() * 0.05,
		hangRate:   r.Float64() * 0.02,
		latency:    time.Duration(r.Int64N(int64(fi/4))) * time.Duration(r.IntN(2)), // none in half the worlds
		spike:      lt + time.Duration(r.Int64N(int64(lt))),
		partitions: r.IntN(5),
		crashes:    r.IntN(4),
		pauses:     r.IntN(3),
		joins:      r.IntN(3),
		leaves:     r.IntN(2),
	}
}

// simStore is one worker incarnation's view of the shared store, with
// faults. A call sent before its caller gave up may still land.
type simStore struct {
	mem    store.Store
	p      *poolSimParams
	counts *tally

	mu          sync.Mutex
	r           *rand.Rand
	faulty      bool
	down        bool      // crashed or partitioned: new calls never arrive
	crashed     bool      // for good
	cutNext     bool      // partition right after the next write lands
	pausedUntil time.Time // the process is stopped: nothing is sent or received before
}

type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *tally) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k]++
}

func (s *simStore) roll() (fail, lost, hang bool, before, after time.Duration, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false, false, false, 0, 0, true
	}
	if !s.faulty {
		return
	}
	fail = s.r.Float64() < s.p.errRate
	lost = s.r.Float64() < s.p.lostRate
	hang = s.r.Float64() < s.p.hangRate
	if s.p.latency > 0 {
		before = time.Duration(s.r.Int64N(int64(s.p.latency)))
		after = time.Duration(s.r.Int64N(int64(s.p.latency)))
	}
	if s.r.Float64() < 0.005 {
		before += s.p.spike
		s.counts.add("latency spike")
	}
	return
}

// resume waits while the process is paused.
func (s *simStore) resume() {
	for {
		s.mu.Lock()
		d := time.Until(s.pausedUntil)
		s.mu.Unlock()
		if d <= 0 {
			return
		}
		time.Sleep(d)
	}
}

func call[T any](ctx context.Context, s *simStore, op func() (T, error)) (T, error) {
	var zero T
	s.resume()
	fail, lost, hang, before, after, down := s.roll()
	if down || hang {
		<-ctx.Done()
		return zero, ctx.Err()
	}
	if fail {
		return zero, errInjected
	}
	if before == 0 && after == 0 && !lost {
		v, err := op() // at once: the common case, without a goroutine
		s.resume()
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		time.Sleep(before)
		v, err := op()
		time.Sleep(after)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		s.resume() // a paused process reads the reply when it runs again
		if lost {
			return zero, fmt.Errorf("reply lost: %w", errInjected)
		}
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (s *simStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	type got struct {
		data []byte
		etag string
	}
	g, err := call(ctx, s, func() (got, error) {
		d, e, err := s.mem.Get(context.Background(), key)
		return got{d, e}, err
	})
	return g.data, g.etag, err
}

func (s *simStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return call(ctx, s, func() (string, error) {
		tag, err := s.mem.PutIfMatch(context.Background(), key, data, etag)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil && s.cutNext {
			s.cutNext, s.down = false, true
		}
		return tag, err
	})
}

// tenure is one leadership of a shard as the checker sees it.
type tenure struct {
	worker     string
	term       uint64
	start, end time.Time // end is zero while live
}

type simWorker struct {
	id     string
	st     *simStore
	p      *Pool
	cancel context.CancelFunc
	done   chan struct{}
}

func simulatePool(t *testing.T, seed int64) map[string]int {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5ade))
	p := newPoolSimParams(r)
	mem := memstore.New()
	counts := &tally{m: map[string]int{}}
	var shards []string
	for i := range p.shards {
		shards = append(shards, fmt.Sprintf("s%03d", i))
	}
	var (
		mu      sync.Mutex
		tenures = map[string][]*tenure{}
		runErrs []string // Run's errors: every worker has an ID of its own
		wmu     sync.Mutex
		workers = map[string]*simWorker{}
		all     []*simWorker
		nextID  = p.workers
	)
	t0 := time.Now()
	faultsEnd := t0.Add(p.faultsFor)
	faulty := func() bool { return time.Now().Before(faultsEnd) }

	start := func(id string, incarnation int) *simWorker {
		wr := rand.New(rand.NewPCG(uint64(seed), uint64(len(id)*7919+incarnation*104729+int(id[1]))))
		st := &simStore{mem: mem, p: &p, r: wr, faulty: faulty(), counts: counts}
		w := &simWorker{id: id, st: st, done: make(chan struct{})}
		fi, lt := p.fi, p.lt
		if p.mixed && wr.IntN(2) == 0 {
			fi, lt = p.fi2, p.lt2
		}
		pl, err := New(Config{Store: st, Prefix: "sim/", ID: id, Shards: shards, Logger: quiet,
			FrequentInterval: fi, LeaderTimeout: lt,
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
				tn := &tenure{worker: id, term: l.Term(), start: time.Now()}
				mu.Lock()
				tenures[shard] = append(tenures[shard], tn)
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				if tn.end.IsZero() {
					tn.end = time.Now()
				}
				mu.Unlock()
			}})
		if err != nil {
			t.Fatalf("seed %d: New() = %v", seed, err)
		}
		// Each incarnation's clock runs at its own rate within 5%, a third
		// of them at either bound, where the margin matters most.
		pl.rate = []float64{0.95, 1.05, 0.95 + 0.1*wr.Float64()}[wr.IntN(3)]
		w.p = pl
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go func() {
			defer close(w.done)
			if err := pl.Run(ctx); err != nil {
				mu.Lock()
				runErrs = append(runErrs, fmt.Sprintf("%s: %v", id, err))
				mu.Unlock()
			}
		}()
		all = append(all, w)
		return w
	}
	incarnations := map[string]int{}
	wmu.Lock()
	for i := range p.workers {
		id := fmt.Sprintf("w%d", i)
		workers[id] = start(id, 0)
	}
	wmu.Unlock()

	// kill stops w abruptly: its leaderships end now as far as the world
	// is concerned, and it never reaches the store again.
	kill := func(w *simWorker) {
		w.st.mu.Lock()
		w.st.down, w.st.crashed = true, true
		w.st.mu.Unlock()
		mu.Lock()
		now := time.Now()
		for _, ts := range tenures {
			for _, tn := range ts {
				if tn.worker == w.id && tn.end.IsZero() {
					tn.end = now
				}
			}
		}
		mu.Unlock()
		w.cancel() // reaps its goroutines; its calls go nowhere
	}
	pick := func() *simWorker {
		wmu.Lock()
		defer wmu.Unlock()
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range workers {
				if !yield(id) {
					return
				}
			}
		})
		if len(ids) == 0 {
			return nil
		}
		return workers[ids[r.IntN(len(ids))]]
	}

	type event struct {
		at time.Duration
		fn func()
	}
	var events []event
	at := func() time.Duration { return time.Duration(r.Int64N(int64(p.faultsFor - 3*time.Second))) }
	for range p.partitions {
		when, d, afterWrite := at(), time.Duration(r.Int64N(int64(3*p.lt))), r.IntN(3) > 0
		var cut *simWorker
		events = append(events, event{when, func() {
			if cut = pick(); cut == nil {
				return
			}
			counts.add("partition")
			cut.st.mu.Lock()
			if afterWrite {
				cut.st.cutNext = true
			} else {
				cut.st.down = true
			}
			cut.st.mu.Unlock()
		}}, event{when + d, func() {
			if cut != nil {
				cut.st.mu.Lock()
				cut.st.down, cut.st.cutNext = cut.st.crashed, false
				cut.st.mu.Unlock()
			}
		}})
	}
	for range p.crashes {
		when, d := at(), time.Duration(r.Int64N(int64(10*time.Second)))
		events = append(events, event{when, func() {
			w := pick()
			if w == nil {
				return
			}
			counts.add("kill")
			kill(w)
			time.AfterFunc(d, func() {
				wmu.Lock()
				defer wmu.Unlock()
				if workers[w.id] == w {
					counts.add("restart")
					incarnations[w.id]++
					workers[w.id] = start(w.id, incarnations[w.id])
				}
			})
		}})
	}
	for range p.pauses {
		when, d := at(), p.lt/2+time.Duration(r.Int64N(int64(2*p.lt)))
		events = append(events, event{when, func() {
			if w := pick(); w != nil {
				counts.add("pause")
				w.st.mu.Lock()
				w.st.pausedUntil = time.Now().Add(d)
				w.st.mu.Unlock()
			}
		}})
	}
	for range p.joins {
		events = append(events, event{at(), func() {
			wmu.Lock()
			defer wmu.Unlock()
			counts.add("join")
			id := fmt.Sprintf("w%d", nextID)
			nextID++
			workers[id] = start(id, 0)
		}})
	}
	for range p.leaves {
		events = append(events, event{at(), func() {
			w := pick()
			wmu.Lock()
			if w == nil || len(workers) < 2 {
				wmu.Unlock()
				return
			}
			delete(workers, w.id)
			wmu.Unlock()
			counts.add("leave")
			w.cancel()
		}})
	}
	slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })
	for _, ev := range events {
		time.Sleep(t0.Add(ev.at).Sub(time.Now()))
		ev.fn()
	}
	time.Sleep(faultsEnd.Sub(time.Now()))

	// Faults stop: heal partitions, restart the killed, end random faults.
	wmu.Lock()
	for id, w := range workers {
		w.st.mu.Lock()
		crashed := w.st.crashed
		w.st.down, w.st.faulty, w.st.cutNext = crashed, false, false
		w.st.mu.Unlock()
		if crashed {
			incarnations[id]++
			workers[id] = start(id, incarnations[id])
		}
	}
	wmu.Unlock()
	time.Sleep(p.calmFor)
	synctest.Wait()

	mu.Lock()
	snap := map[string][]tenure{}
	for s, ts := range tenures {
		for _, tn := range ts {
			snap[s] = append(snap[s], *tn)
		}
	}
	mu.Unlock()
	wmu.Lock()
	final := slices.Clone(all)
	wmu.Unlock()
	for _, w := range final {
		w.cancel()
	}
	for _, w := range final {
		<-w.done
	}
	synctest.Wait()
	if len(runErrs) > 0 {
		t.Errorf("seed %d: Run returned errors: %v", seed, runErrs)
	}
	if err := checkTenures(shards, snap); err != nil {
		t.Errorf("seed %d: %v\nparams %+v\nreplay with -run 'TestShardSimulation' -sim.seed=%d", seed, err, p, seed)
	}
	return counts.m
}

// checkTenures reports a shard with two overlapping leaderships, a term
// that does not exceed the one before it, or no live leader at the end.
func checkTenures(shards []string, tenures map[string][]tenure) error {
	for _, s := range shards {
		ts := tenures[s]
		slices.SortFunc(ts, func(a, b tenure) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ts); i++ {
			prev, cur := ts[i-1], ts[i]
			if prev.end.IsZero() || prev.end.After(cur.start) {
				return fmt.Errorf("shard %s: %s term %d (from %v) overlaps %s term %d (from %v)", s, prev.worker, prev.term,
					prev.start.Format("05.000"), cur.worker, cur.term, cur.start.Format("05.000"))
			}
			if cur.term <= prev.term {
				return fmt.Errorf("shard %s: term %d (%s) after term %d (%s)", s, cur.term, cur.worker, prev.term, prev.worker)
			}
		}
		if len(ts) == 0 || !ts[len(ts)-1].end.IsZero() {
			return fmt.Errorf("shard %s: no live leader once the faults had stopped for long", s)
		}
	}
	return nil
}
