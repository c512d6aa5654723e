package fence

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// simStore is the simulation's shared store. Even seeds run on memstore,
// whose ETag is a hash of the body, as S3's is: writing the same bytes
// twice gives the same ETag. Odd seeds run on a simStore with revisions:
// a new tag per write, as GCS generations, Azure ETags and NATS revisions.
// With headerFree it hashes only what follows the fence's header line, as
// if the term were kept in object metadata, which S3 leaves out of the
// ETag: the design the fence must not use (TestMetadataTermIsUnsafe).
type simStore struct {
	mu         sync.Mutex
	objs       map[string][]byte
	tags       map[string]string
	revisions  bool
	rev        int
	headerFree bool
}

func (h *simStore) etag(body []byte) string {
	if h.headerFree {
		if _, rest, ok := bytes.Cut(body, []byte("\n")); ok && bytes.HasPrefix(body, []byte(magic)) {
			body = rest
		}
	}
	sum := md5.Sum(body)
	return hex.EncodeToString(sum[:])
}

func (h *simStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.objs[key]
	if !ok {
		return nil, "", store.ErrNotFound
	}
	return bytes.Clone(b), h.tags[key], nil
}

func (h *simStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.objs[key]
	if (etag == "" && ok) || (etag != "" && (!ok || h.tags[key] != etag)) {
		return "", store.ErrPreconditionFailed
	}
	tag := h.etag(data)
	if h.revisions {
		h.rev++
		tag = fmt.Sprint(h.rev)
	}
	h.objs[key] = bytes.Clone(data)
	h.tags[key] = tag
	return tag, nil
}

// TestFenceSimulation runs zombie writers against the fence in virtual
// time and checks, on every key, that the terms of the writes that land
// never decrease. Two families of worlds:
//
//   - leases: one leadership at a time, as an election gives them: term k
//     on one of three nodes, from its start until its lease ends, the
//     next starting once it has; each leader seals the keys and writes
//     counters. The nemesis cuts a node off the store, stalls it, loses
//     its replies, and pauses a leader past its lease, after which it
//     resumes and writes as if it still led. (The election's own timing,
//     with real Electors, is the root package's simulation.)
//   - adversary: writers of arbitrary overlapping terms (successors
//     sealing at once, a term's several goroutines), which is what the
//     fence must withstand whatever the election does.
//
// In both, a PUT can lose its reply and land long after (up to three
// leases later), or never. Every goroutine of a world acts on the store
// and on shared counters in steps that one scheduler orders by the seed
// (simworld.Sched), so a seed replays the same history: each seed's
// ledger hash is logged with -v, a failing seed prints the end of its
// ledger, and -sim.seed=N replays it.
func TestFenceSimulation(t *testing.T) {
	defer setMutation(t)()
	for _, variant := range []string{"leases", "adversary"} {
		t.Run(variant, func(t *testing.T) {
			first, n := simworld.SeedRange()
			var total simStats
			for seed := first; seed < first+n; seed++ {
				var st simStats
				// A failing seed logs its ledger and how to replay it, and
				// ends the test (synctest.Test fails t with it).
				synctest.Test(t, func(t *testing.T) {
					st = simulate(t, variant, seed, false)
				})
				if n == 1 {
					t.Logf("seed %d: ledger hash %016x, %d steps", seed, st.hash, st.steps)
				}
				total.add(st)
			}
			t.Logf("%s: %d seeds survived: %s", variant, n, total)
		})
	}
}

// TestFenceSimulationReplays runs one seed of each variant 20 times and
// wants one ledger hash.
func TestFenceSimulationReplays(t *testing.T) {
	for _, variant := range []string{"leases", "adversary"} {
		hashes := map[uint64]int{}
		for range 20 {
			synctest.Test(t, func(t *testing.T) {
				hashes[simulate(t, variant, 7, false).hash]++
			})
		}
		if len(hashes) != 1 {
			t.Errorf("%s seed 7, 20 runs: %d different ledger hashes %v; want 1", variant, len(hashes), hashes)
		}
		for h := range hashes {
			t.Logf("%s seed 7: ledger hash %016x in 20 runs of 20", variant, h)
		}
	}
}

type simStats struct {
	attempted, landedOK, fenced, unknown, failed, landed, late, lateLanded, violations, terms int

	hash  uint64 // the seed's ledger, for one seed
	steps int
}

func (s *simStats) add(o simStats) {
	s.attempted += o.attempted
	s.landedOK += o.landedOK
	s.fenced += o.fenced
	s.unknown += o.unknown
	s.failed += o.failed
	s.landed += o.landed
	s.late += o.late
	s.lateLanded += o.lateLanded
	s.violations += o.violations
	s.terms += o.terms
	s.steps += o.steps
}

func (s simStats) String() string {
	return fmt.Sprintf("%d writes attempted, %d acknowledged, %d refused as fenced, %d outcome unknown, %d failed before sending; %d landed in the store (%d of %d late PUTs); %d leaderships or terms; %d violations; %d scheduled steps",
		s.attempted, s.landedOK, s.fenced, s.unknown, s.failed, s.landed, s.lateLanded, s.late, s.terms, s.violations, s.steps)
}

// history is the store every node shares: it records, per key, the term
// of every write that lands, and counts a violation when one is lower
// than the key's last. Its calls run inside the scheduler's steps
// (stepped), one at a time.
type history struct {
	store.Store
	t     *testing.T
	sched *simworld.Sched
	// quiet counts violations without failing the test.
	quiet bool
	st    *simStats
	// last is the term of the key's last landed fenced write.
	last map[string]uint64
}

func (h *history) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	tag, err := h.Store.PutIfMatch(ctx, key, data, etag)
	if err != nil || !isFenceKey(key) {
		return tag, err
	}
	v, derr := decode(data)
	if derr != nil || !v.fenced {
		h.t.Errorf("key %q: landed a body the fence did not write: %q", key, data)
		return tag, err
	}
	h.st.landed++
	h.sched.Record("landed %s term %d deleted %v %q", key, v.term, v.deleted, v.data)
	if v.term < h.last[key] {
		h.st.violations++
		if !h.quiet {
			h.t.Errorf("key %q: a write of term %d landed after one of term %d", key, v.term, h.last[key])
		}
	}
	h.last[key] = v.term
	return tag, err
}

func isFenceKey(key string) bool { return len(key) > 4 && key[:4] == "job/" }

// stepped is one goroutine's way into the shared store: each call is a
// step of the scheduler.
type stepped struct {
	store.Store
	w    *world
	name string
}

func (s stepped) Get(ctx context.Context, key string) (data []byte, etag string, err error) {
	s.w.sched.Step(s.name, func() { data, etag, err = s.Store.Get(ctx, key) })
	return data, etag, err
}

func (s stepped) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (tag string, err error) {
	s.w.sched.Step(s.name, func() { tag, err = s.Store.PutIfMatch(ctx, key, data, etag) })
	return tag, err
}

// late is one node's link to the store: now and then a PUT's reply is
// lost and the PUT itself lands (or fails its condition) much later, from
// a goroutine of its own.
type late struct {
	w     *world
	name  string
	rng   *rand.Rand // the node's own
	delay time.Duration
	p     float64
	n     int // late PUTs so far
}

var errLate = errors.New("sim: reply lost; the PUT is still on its way")

func (l *late) Get(ctx context.Context, key string) ([]byte, string, error) {
	return stepped{l.w.hist, l.w, l.name}.Get(ctx, key)
}

func (l *late) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if !isFenceKey(key) || l.rng.Float64() >= l.p {
		return stepped{l.w.hist, l.w, l.name}.PutIfMatch(ctx, key, data, etag)
	}
	d := time.Duration(l.rng.Int64N(int64(l.delay)))
	l.n++
	name := fmt.Sprintf("%s/late-%d", l.name, l.n)
	l.w.goStep(name, func() { l.w.st.late++ }, func() {
		time.Sleep(d)
		var err error
		l.w.sched.Step(name, func() {
			if _, err = l.w.hist.PutIfMatch(context.Background(), key, data, etag); err == nil {
				l.w.st.lateLanded++
			}
		})
	})
	return "", errLate
}

const (
	simLease  = 3 * time.Second
	simFreq   = 500 * time.Millisecond
	simLength = 60 * time.Second
	simKeys   = 3
)

var simKeyNames = func() []string {
	keys := make([]string, simKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("job/key-%d", i)
	}
	return keys
}()

// world holds what one seed's goroutines share. Its fields other than
// the WaitGroup are touched only inside the scheduler's steps.
type world struct {
	t     *testing.T
	seed  int64
	sched *simworld.Sched
	hist  *history
	st    simStats
	gs    sync.WaitGroup // every goroutine of the world
}

// rng returns the random source of the goroutine called name: a function
// of the seed and the name alone.
func (w *world) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(uint64(w.seed), h.Sum64()))
}

// goStep runs first as a step of the calling goroutine's, then starts a
// goroutine of the world, called name, that runs fn.
func (w *world) goStep(name string, first, fn func()) {
	w.gs.Add(1)
	first()
	go func() {
		defer w.gs.Done()
		fn()
	}()
}

// link returns a new node's path to the shared store: its faults, then
// its late PUTs, then the shared history, a step at a time.
func (w *world) link(name string, rng *rand.Rand) *faultstore.Store {
	return faultstore.New(&late{w: w, name: name, rng: rng, delay: 3 * simLease, p: 0.05})
}

// write runs one fenced write and counts its outcome.
func (w *world) write(name string, ctx context.Context, fw *Writer, op int, key string, value int) {
	var err error
	switch op {
	case 0:
		err = fw.Seal(ctx, key)
	case 1:
		err = fw.Delete(ctx, key)
	default:
		err = fw.Put(ctx, key, fmt.Appendf(nil, "counter %d term %d", value, fw.Term()))
	}
	w.sched.Step(name, func() {
		w.st.attempted++
		outcome := "ok"
		switch {
		case err == nil:
			w.st.landedOK++
		case errors.Is(err, ErrFenced):
			w.st.fenced++
			outcome = "fenced"
		case errors.Is(err, ErrOutcomeUnknown):
			w.st.unknown++
			outcome = "unknown"
		default:
			w.st.failed++ // failed before any write was sent
			outcome = "failed"
		}
		w.sched.Record("%s op %d %s term %d: %s", name, op, key, fw.Term(), outcome)
	})
}

// alive reports, as a step of name's, whether ctx is still live: a
// decision made only once every goroutine woken at this instant (a
// context's own timer among them) has run.
func (w *world) alive(name string, ctx context.Context) (ok bool) {
	w.sched.Step(name, func() { ok = ctx.Err() == nil })
	return ok
}

// simulate runs one seed. With metadata, every seed runs on a simStore
// that leaves the header out of the ETag, and violations are counted, not
// reported.
func simulate(t *testing.T, variant string, seed int64, metadata bool) simStats {
	w := &world{t: t, seed: seed, sched: simworld.NewSched(uint64(seed))}
	var base store.Store = memstore.New()
	if seed%2 == 1 || metadata {
		base = &simStore{objs: map[string][]byte{}, tags: map[string]string{}, revisions: !metadata, headerFree: metadata}
	}
	w.hist = &history{Store: base, t: t, sched: w.sched, st: &w.st, last: map[string]uint64{}, quiet: metadata}
	ctx, cancel := context.WithTimeout(t.Context(), simLength)
	defer cancel()
	w.gs.Add(1)
	go func() {
		defer w.gs.Done()
		switch variant {
		case "leases":
			w.leases(ctx)
		default:
			w.adversary(ctx)
		}
	}()
	done := make(chan struct{})
	go func() {
		w.gs.Wait()
		close(done)
	}()
	w.sched.Run(done)
	if t.Failed() {
		t.Logf("%s seed %d failed (replay: go test -run 'TestFenceSimulation/%s' -v ./fence -sim.seed=%d); the ledger's last 60 lines:\n%s",
			variant, seed, variant, seed, strings.Join(w.sched.Ledger(60), "\n"))
	}
	w.st.hash, w.st.steps = w.sched.Hash(), w.sched.Steps()
	return w.st
}

// leases runs one leadership after another until ctx ends: term k on one
// of three nodes (one not still busy with an earlier leadership, as a
// paused one), its lease lasting 1 to 4 leases, the next starting up to
// a lease after it ended. A node's link is its own for the whole run,
// with the nemesis's faults on it.
func (w *world) leases(ctx context.Context) {
	const name = "elect"
	rng := w.rng(name)
	links := make([]*faultstore.Store, 3)
	busy := make([]bool, len(links)) // in steps only
	for i := range links {
		node := fmt.Sprintf("node-%d", i)
		links[i] = w.link(node, w.rng(node))
	}
	w.goStep("nemesis", func() {}, func() { w.nemesis(ctx, links) })
	for term := uint64(1); ; term++ {
		time.Sleep(time.Duration(rng.Int64N(int64(simLease))))
		node := -1
		live := true
		for node < 0 && live {
			w.sched.Step(name, func() {
				if live = ctx.Err() == nil; !live {
					return
				}
				var free []int
				for i, b := range busy {
					if !b {
						free = append(free, i)
					}
				}
				if len(free) > 0 {
					node = free[rng.IntN(len(free))]
					busy[node] = true
					w.st.terms++
				}
			})
			if node < 0 && live {
				time.Sleep(simFreq)
			}
		}
		if !live {
			return
		}
		length := time.Duration(1+rng.IntN(4)) * simLease
		lname := fmt.Sprintf("lead-%03d", term)
		lctx, lcancel := context.WithTimeout(ctx, length)
		w.goStep(lname, func() {}, func() {
			defer lcancel()
			w.lead(ctx, lctx, lname, links[node], term)
			w.sched.Step(lname, func() { busy[node] = false })
		})
		select {
		case <-lctx.Done():
		case <-ctx.Done():
		}
		if !w.alive(name, ctx) {
			return
		}
	}
}

// nemesis puts a fault on one node every few seconds, healed later.
func (w *world) nemesis(ctx context.Context, links []*faultstore.Store) {
	const name = "nemesis"
	rng := w.rng(name)
	for heals := 0; ; heals++ {
		time.Sleep(time.Duration(1+rng.IntN(4)) * time.Second)
		if !w.alive(name, ctx) {
			w.sched.Step(name, func() {
				for _, l := range links {
					l.Restore()
					l.Unstall()
				}
			})
			return
		}
		l := links[rng.IntN(len(links))]
		heal := time.Duration(rng.Int64N(int64(2 * simLease)))
		hname := fmt.Sprintf("heal-%d", heals)
		switch rng.IntN(3) {
		case 0:
			w.sched.Step(name, l.Cut)
			w.goStep(hname, func() {}, func() {
				time.Sleep(heal)
				w.sched.Step(hname, l.Restore)
			})
		case 1:
			w.sched.Step(name, l.Stall)
			w.goStep(hname, func() {}, func() {
				time.Sleep(heal)
				w.sched.Step(hname, l.Unstall)
			})
		default:
			n := 1 + rng.IntN(3)
			w.sched.Step(name, func() { l.LoseReplies(n) })
		}
	}
}

// lead is one leadership's work: seal every key, then write until the
// lease ends. A paused leader (one time in four) stops past its lease
// and then writes a few times with a context of its own, as a process
// that does not know it was paused.
func (w *world) lead(ctx, lctx context.Context, name string, link *faultstore.Store, term uint64) {
	rng := w.rng(name)
	fw, err := New(link, term)
	if err != nil {
		w.t.Errorf("New(term %d) error = %v", term, err)
		return
	}
	for _, key := range simKeyNames {
		w.write(name, lctx, fw, 0, key, 0)
	}
	paused := rng.IntN(4) == 0
	for value := 1; w.alive(name, lctx); value++ {
		if paused && rng.IntN(5) == 0 {
			// The whole process stops past its lease; when it resumes
			// it writes on as if it still led.
			time.Sleep(simLease + time.Duration(rng.Int64N(int64(2*simLease))))
			zctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), simLease)
			for i := range 1 + rng.IntN(3) {
				w.write(name, zctx, fw, 2, simKeyNames[rng.IntN(simKeys)], value+i)
			}
			cancel()
			return
		}
		op := 2
		if rng.IntN(20) == 0 {
			op = 1
		}
		w.write(name, lctx, fw, op, simKeyNames[rng.IntN(simKeys)], value)
		select {
		case <-time.After(time.Duration(rng.Int64N(int64(simFreq)))):
		case <-lctx.Done():
		}
	}
}

// adversary: writers of arbitrary terms, any number at once, each with
// its own faulty link: it seals some keys, writes, pauses, writes again.
// Several goroutines may share one term (one leader's workers), and two
// successors may seal at once.
func (w *world) adversary(ctx context.Context) {
	const name = "adversary"
	rng := w.rng(name)
	for term := uint64(1); ; term++ {
		time.Sleep(time.Duration(rng.Int64N(int64(2 * simLease))))
		if !w.alive(name, ctx) {
			return
		}
		w.sched.Step(name, func() { w.st.terms++ })
		for i := range 1 + rng.IntN(2) {
			wname := fmt.Sprintf("writer-%03d-%d", term, i)
			wrng := w.rng(wname)
			link := w.link(wname, wrng)
			if wrng.IntN(4) == 0 {
				link.LoseReplies(1 + wrng.IntN(2))
			}
			fw, err := New(link, term)
			if err != nil {
				w.t.Fatalf("New(term %d) error = %v", term, err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Duration(1+wrng.IntN(3))*simLease)
			w.goStep(wname, func() {}, func() {
				defer cancel()
				if wrng.IntN(2) == 0 {
					w.write(wname, wctx, fw, 0, simKeyNames[wrng.IntN(simKeys)], 0)
					w.write(wname, wctx, fw, 0, simKeyNames[wrng.IntN(simKeys)], 0)
				}
				for value := 1; w.alive(wname, wctx); value++ {
					op := 2
					if wrng.IntN(10) == 0 {
						op = wrng.IntN(2)
					}
					w.write(wname, wctx, fw, op, simKeyNames[wrng.IntN(simKeys)], value)
					pause := time.Duration(wrng.Int64N(int64(simFreq)))
					if wrng.IntN(10) == 0 {
						pause = simLease + time.Duration(wrng.Int64N(int64(2*simLease)))
					}
					select {
					case <-time.After(pause):
					case <-wctx.Done():
					}
				}
			})
		}
	}
}

// TestMetadataTermIsUnsafe shows why the fence keeps the term in the body
// on stores whose ETag hashes the body: with the term in metadata (left
// out of the ETag), a successor's seal, or its write of the same bytes,
// leaves the ETag as it was and a paused leader's If-Match lands a lower
// term. The simulation must see it happen.
func TestMetadataTermIsUnsafe(t *testing.T) {
	var total simStats
	for seed := range int64(300) {
		var st simStats
		synctest.Test(t, func(t *testing.T) { st = simulate(t, "adversary", seed, true) })
		total.add(st)
	}
	if total.violations == 0 {
		t.Fatalf("300 seeds with the term outside the ETag: %s; want violations", total)
	}
	t.Logf("term outside the ETag, 300 seeds: %s", total)
}
