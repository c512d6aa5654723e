package s3lect

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

var (
	simSeeds = flag.Int("sim.seeds", 2000, "number of seeds TestSafetySimulation runs")
	simSeed  = flag.Int64("sim.seed", -1, "run TestSafetySimulation for this seed only (replay)")
)

// TestSafetySimulation runs randomized fault schedules against groups of
// electors in virtual time and checks that live leadership contexts never
// overlap, that terms only rise, and that a leader exists soon after the
// faults stop. A failing seed replays with -sim.seed=N.
func TestSafetySimulation(t *testing.T) {
	first, n := int64(0), int64(*simSeeds)
	if *simSeed >= 0 {
		first, n = *simSeed, 1
	}
	var (
		mu     sync.Mutex
		totals = map[string]int{}
	)
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			var counts map[string]int
			synctest.Test(t, func(t *testing.T) { counts = simulate(t, seed) })
			mu.Lock()
			defer mu.Unlock()
			for k, v := range counts {
				totals[k] += v
			}
		})
	}
	t.Cleanup(func() {
		keys := make([]string, 0, len(totals))
		for k := range totals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, totals[k])
		}
		t.Logf("%d seeds survived:%s", n, b.String())
	})
}

// simParams is one seed's world.
type simParams struct {
	nodes              int
	fi, ii, lt         time.Duration
	faultsFor          time.Duration // faults stop after this
	calmFor            time.Duration // then the group runs fault-free this long
	errRate, lostRate  float64       // per store call
	hangRate           float64       // per store call: the connection stalls until the caller gives up
	latency, spike     time.Duration // usual latency bound; rare spikes beyond the lease
	partitions, crashs int
}

func newSimParams(r *rand.Rand) simParams {
	fi := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	lt := fi*2 + time.Duration(r.Int64N(int64(fi*3))) + time.Millisecond
	return simParams{
		nodes:      2 + r.IntN(4),
		fi:         fi,
		ii:         fi * time.Duration(1+r.IntN(3)),
		lt:         lt,
		faultsFor:  40 * time.Second,
		calmFor:    30 * time.Second,
		errRate:    r.Float64() * 0.2,
		lostRate:   r.Float64() * 0.1,
		hangRate:   r.Float64() * 0.05,
		latency:    time.Duration(r.Int64N(int64(fi / 2))),
		spike:      lt + time.Duration(r.Int64N(int64(lt))),
		partitions: 1 + r.IntN(8),
		crashs:     r.IntN(4),
	}
}

// simStore is one node incarnation's view of the shared store, with faults.
// A write that was sent before the caller gave up may still land.
type simStore struct {
	mem store.Store
	p   *simParams

	mu      sync.Mutex
	r       *rand.Rand
	down    bool // crashed or partitioned: new calls never reach the store
	cutNext bool // partition this node right after its next write lands
	crashed bool // crashed: calls hang forever from the caller's view
	faulty  bool // the random faults apply
	counts  *tally
}

// tally counts the faults a seed injected.
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
	if s.r.Float64() < 0.01 {
		before += s.p.spike
	}
	switch {
	case fail:
		s.counts.add("error")
	case lost:
		s.counts.add("lost reply")
	case hang:
		s.counts.add("stalled connection")
	}
	if before > s.p.lt {
		s.counts.add("latency spike")
	}
	return
}

// do runs op as a remote call: it reaches the store after a delay and its
// reply comes back after another, unless the caller gives up first, in
// which case the op may still land.
func do[T any](ctx context.Context, s *simStore, op func() (T, error)) (T, error) {
	var zero T
	fail, lost, hang, before, after, down := s.roll()
	if down || hang {
		<-ctx.Done()
		return zero, ctx.Err()
	}
	if fail {
		return zero, errInjected
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
	g, err := do(ctx, s, func() (got, error) {
		d, e, err := s.mem.Get(context.Background(), key)
		return got{d, e}, err
	})
	return g.data, g.etag, err
}

func (s *simStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return do(ctx, s, func() (string, error) {
		tag, err := s.mem.PutIfMatch(context.Background(), key, data, etag)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil && s.cutNext {
			// The most dangerous moment for a partition: the write has
			// landed, so followers may see it at once, while its writer's
			// lease still runs from before it was sent.
			s.cutNext, s.down = false, true
		}
		return tag, err
	})
}

// interval is one leadership as the checker sees it.
type interval struct {
	node       string
	term       uint64
	start, end time.Time // end is zero while live
}

type simNode struct {
	id     string
	st     *simStore
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{}
}

func simulate(t *testing.T, seed int64) map[string]int {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5133c7))
	p := newSimParams(r)
	mem := memstore.New()
	counts := &tally{m: map[string]int{}}
	var (
		mu        sync.Mutex
		intervals []*interval
	)
	t0 := time.Now()
	faultsEnd := t0.Add(p.faultsFor)
	faulty := func() bool { return time.Now().Before(faultsEnd) }

	// start runs one incarnation of node i: campaign, hold for a while,
	// resign or lose, campaign again.
	start := func(i, incarnation int) *simNode {
		id := fmt.Sprintf("n%d", i)
		st := &simStore{mem: mem, p: &p, r: rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation))), faulty: faulty(), counts: counts}
		cfg := ElectorConfig{Store: st, LockfilePath: testKey, ServerID: id, ServerAddr: id + ":1",
			FrequentInterval: p.fi, InfrequentInterval: p.ii, LeaderTimeout: p.lt, Logger: quietLogger}
		e, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: New() = %v", seed, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := &simNode{id: id, st: st, e: e, cancel: cancel, done: make(chan struct{})}
		hr := rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation+500)))
		go func() {
			defer close(n.done)
			for {
				l, err := e.Campaign(ctx)
				if err != nil {
					return
				}
				iv := &interval{node: id, term: l.Term(), start: time.Now()}
				mu.Lock()
				intervals = append(intervals, iv)
				mu.Unlock()
				context.AfterFunc(l.Context(), func() {
					cause := context.Cause(l.Context())
					switch {
					case errors.Is(cause, ErrLeaseExpired):
						counts.add("ended: lease expired")
					case errors.Is(cause, ErrLeadershipLost):
						counts.add("ended: lost")
					case errors.Is(cause, ErrResigned):
						counts.add("ended: resigned")
					}
					mu.Lock()
					defer mu.Unlock()
					if iv.end.IsZero() {
						iv.end = time.Now()
					}
				})
				hold := time.NewTimer(time.Duration(hr.Int64N(int64(20 * time.Second))))
				select {
				case <-l.Done():
				case <-ctx.Done():
				case <-hold.C:
					if faulty() && hr.IntN(2) == 0 {
						l.Resign(ctx)
					} else {
						<-l.Done() // hold until lost or stopped
					}
				}
				hold.Stop()
				<-l.exited
				if ctx.Err() != nil {
					return
				}
			}
		}()
		return n
	}
	// crash stops n abruptly: its live leadership ends now as far as the
	// world is concerned, and it never reaches the store again.
	crash := func(n *simNode) {
		n.st.mu.Lock()
		n.st.down, n.st.crashed = true, true
		n.st.mu.Unlock()
		mu.Lock()
		for _, iv := range intervals {
			if iv.node == n.id && iv.end.IsZero() {
				iv.end = time.Now()
			}
		}
		mu.Unlock()
		n.cancel()
		go n.e.Close() // reaps its goroutines; its calls go nowhere
	}

	nodes := make([]*simNode, p.nodes)
	incarnations := make([]int, p.nodes)
	for i := range nodes {
		nodes[i] = start(i, 0)
	}

	type event struct {
		at time.Duration
		fn func()
	}
	var events []event
	// leaderOr returns the index of the node that leads now, or i if none.
	leaderOr := func(i int) int {
		mu.Lock()
		defer mu.Unlock()
		for _, iv := range intervals {
			if iv.end.IsZero() {
				return int(iv.node[1] - '0')
			}
		}
		return i
	}
	for range p.partitions {
		i := r.IntN(p.nodes)
		targetLeader := r.IntN(3) > 0 // most partitions cut off whoever leads
		at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
		d := time.Duration(r.Int64N(int64(3 * p.lt)))
		events = append(events,
			event{at, func() {
				if targetLeader {
					i = leaderOr(i)
				}
				counts.add("partition")
				nodes[i].st.mu.Lock()
				if targetLeader {
					nodes[i].st.cutNext = true
				} else {
					nodes[i].st.down = true
				}
				nodes[i].st.mu.Unlock()
			}},
			event{at + d, func() {
				nodes[i].st.mu.Lock()
				nodes[i].st.down, nodes[i].st.cutNext = nodes[i].st.crashed, false
				nodes[i].st.mu.Unlock()
			}})
	}
	for range p.crashs {
		i := r.IntN(p.nodes)
		at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
		d := time.Duration(r.Int64N(int64(10 * time.Second)))
		events = append(events,
			event{at, func() { counts.add("crash"); crash(nodes[i]) }},
			event{at + d, func() {
				if nodes[i].st.crashed {
					counts.add("restart")
					incarnations[i]++
					nodes[i] = start(i, incarnations[i])
				}
			}})
	}
	slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })
	for _, ev := range events {
		time.Sleep(t0.Add(ev.at).Sub(time.Now()))
		ev.fn()
	}
	time.Sleep(faultsEnd.Sub(time.Now()))

	// Faults stop: heal partitions, restart the crashed, end random faults.
	for i, n := range nodes {
		n.st.mu.Lock()
		crashed := n.st.crashed
		n.st.down, n.st.faulty, n.st.cutNext = crashed, false, false
		n.st.mu.Unlock()
		if crashed {
			incarnations[i]++
			nodes[i] = start(i, incarnations[i])
		}
	}
	time.Sleep(p.calmFor)
	synctest.Wait()

	mu.Lock()
	ivs := make([]*interval, len(intervals))
	for i, iv := range intervals {
		snapshot := *iv // Close below ends the live ones
		ivs[i] = &snapshot
	}
	mu.Unlock()
	for _, n := range nodes {
		n.cancel()
		n.e.Close()
		<-n.done
	}
	synctest.Wait() // the crashed incarnations' Close calls
	if err := checkIntervals(p, ivs, faultsEnd); err != nil {
		t.Errorf("seed %d: %v\nparams %+v\nreplay with -sim.seed=%d", seed, err, p, seed)
	}
	return counts.m
}

// checkIntervals reports overlapping leaderships, a term that does not
// rise, or no steady leader within the liveness bound after the faults
// stop at healed.
func checkIntervals(p simParams, ivs []*interval, healed time.Time) error {
	slices.SortFunc(ivs, func(a, b *interval) int { return a.start.Compare(b.start) })
	var b strings.Builder
	for _, iv := range ivs {
		end := "live"
		if !iv.end.IsZero() {
			end = iv.end.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "\n  %s term %d: %s - %s", iv.node, iv.term, iv.start.Format("15:04:05.000"), end)
	}
	for i := 1; i < len(ivs); i++ {
		prev, cur := ivs[i-1], ivs[i]
		if prev.end.IsZero() || prev.end.After(cur.start) {
			return fmt.Errorf("%s term %d overlaps %s term %d:%s", prev.node, prev.term, cur.node, cur.term, b.String())
		}
		if cur.term <= prev.term {
			return fmt.Errorf("term went from %d (%s) to %d (%s):%s", prev.term, prev.node, cur.term, cur.node, b.String())
		}
	}
	// Liveness: once faults stop, a leader must appear within LeaderTimeout
	// + FrequentInterval + the retry budget (three attempts of at most
	// FrequentInterval and 1.1 s of waits), and then keep leading.
	bound := p.lt + p.fi + 3*p.fi + 1100*time.Millisecond
	if len(ivs) == 0 {
		return errors.New("no leader ever")
	}
	if last := ivs[len(ivs)-1]; !last.end.IsZero() || last.start.After(healed.Add(bound)) {
		return fmt.Errorf("no steady leader within %v of the faults stopping at %s:%s", bound, healed.Format("15:04:05.000"), b.String())
	}
	return nil
}
