package fence

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
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
//   - elected: three real Electors on one lockfile, each leader sealing
//     the keys and writing counters with its Term(); the nemesis cuts a
//     node off the store, stalls it, loses its replies, and pauses a
//     leader past its lease, after which it resumes and writes as if it
//     still led.
//   - adversary: no election, writers of arbitrary overlapping terms
//     (successors sealing at once, a term's several goroutines), which is
//     what the fence must withstand whatever the election does.
//
// In both, a PUT can lose its reply and land long after (up to three
// leases later), or never. A failing seed replays with -sim.seed=N.
func TestFenceSimulation(t *testing.T) {
	defer setMutation(t)()
	for _, variant := range []string{"elected", "adversary"} {
		t.Run(variant, func(t *testing.T) {
			first, n := simworld.SeedRange()
			var total simStats
			for seed := first; seed < first+n; seed++ {
				var st simStats
				synctest.Test(t, func(t *testing.T) {
					t.Cleanup(func() {
						if t.Failed() {
							t.Logf("seed %d failed (replay: go test -run 'TestFenceSimulation/%s' ./fence -sim.seed=%d)", seed, variant, seed)
						}
					})
					st = simulate(t, variant, seed, false)
				})
				if t.Failed() {
					t.FailNow()
				}
				total.add(st)
			}
			t.Logf("%s: %d seeds survived: %s", variant, n, total)
		})
	}
}

type simStats struct {
	attempted, landedOK, fenced, unknown, failed, landed, late, lateLanded, violations, terms int
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
}

func (s simStats) String() string {
	return fmt.Sprintf("%d writes attempted, %d acknowledged, %d refused as fenced, %d outcome unknown, %d failed before sending; %d landed in the store (%d of %d late PUTs); %d leaderships or terms; %d violations",
		s.attempted, s.landedOK, s.fenced, s.unknown, s.failed, s.landed, s.lateLanded, s.late, s.terms, s.violations)
}

// history is the store every node shares, under each node's faults: it
// records, per key, the term of every write that lands, and counts a
// violation when one is lower than the key's last.
type history struct {
	store.Store
	t  *testing.T
	mu sync.Mutex
	// quiet counts violations without failing the test.
	quiet bool
	st    *simStats
	// last is the term of the key's last landed fenced write.
	last map[string]uint64
}

func (h *history) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	h.mu.Lock() // one write at a time, so that the order recorded is the store's
	defer h.mu.Unlock()
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

// late is one node's link to the store: now and then a PUT's reply is
// lost and the PUT itself lands (or fails its condition) much later.
type late struct {
	store.Store
	rng    *lockedRand
	delay  time.Duration // at most
	p      float64
	wg     *sync.WaitGroup
	st     *simStats
	stMu   *sync.Mutex
	closed chan struct{}
}

var errLate = errors.New("sim: reply lost; the PUT is still on its way")

func (l *late) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if !isFenceKey(key) || l.rng.Float64() >= l.p {
		return l.Store.PutIfMatch(ctx, key, data, etag)
	}
	d := time.Duration(l.rng.Int64N(int64(l.delay)))
	l.stMu.Lock()
	l.st.late++
	l.stMu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		select {
		case <-time.After(d):
		case <-l.closed:
			return // the world ended first: the PUT never lands
		}
		if _, err := l.Store.PutIfMatch(context.Background(), key, data, etag); err == nil {
			l.stMu.Lock()
			l.st.lateLanded++
			l.stMu.Unlock()
		}
	}()
	return "", errLate
}

type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (r *lockedRand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

func (r *lockedRand) Int64N(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Int64N(n)
}

func (r *lockedRand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
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

// world holds what one seed's goroutines share.
type world struct {
	t      *testing.T
	rng    *lockedRand
	hist   *history
	mu     sync.Mutex // guards st's writer counts
	st     simStats
	wg     sync.WaitGroup // late PUTs
	closed chan struct{}
}

// link returns a node's own path to the shared store: its faults, then
// its late PUTs, then the history.
func (w *world) link() *faultstore.Store {
	return faultstore.New(&late{Store: w.hist, rng: w.rng, delay: 3 * simLease, p: 0.05, wg: &w.wg, st: &w.st, stMu: &w.mu, closed: w.closed})
}

// write runs one fenced write and counts its outcome.
func (w *world) write(ctx context.Context, fw *Writer, op int, key string, value int) {
	var err error
	switch op {
	case 0:
		err = fw.Seal(ctx, key)
	case 1:
		err = fw.Delete(ctx, key)
	default:
		err = fw.Put(ctx, key, fmt.Appendf(nil, "counter %d term %d", value, fw.Term()))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.attempted++
	switch {
	case err == nil:
		w.st.landedOK++
	case errors.Is(err, ErrFenced):
		w.st.fenced++
	case errors.Is(err, ErrOutcomeUnknown):
		w.st.unknown++
	default:
		w.st.failed++ // failed before any write was sent
	}
}

// simulate runs one seed. With metadata, every seed runs on a simStore
// that leaves the header out of the ETag, and violations are counted, not
// reported.
func simulate(t *testing.T, variant string, seed int64, metadata bool) simStats {
	rng := &lockedRand{r: rand.New(rand.NewPCG(uint64(seed), 0x5eed))}
	w := &world{t: t, rng: rng, closed: make(chan struct{})}
	var base store.Store = memstore.New()
	if seed%2 == 1 || metadata {
		base = &simStore{objs: map[string][]byte{}, tags: map[string]string{}, revisions: !metadata, headerFree: metadata}
	}
	w.hist = &history{Store: base, t: t, st: &w.st, last: map[string]uint64{}, quiet: metadata}
	ctx, cancel := context.WithTimeout(t.Context(), simLength)
	defer cancel()
	var workers sync.WaitGroup
	switch variant {
	case "elected":
		w.elected(ctx, &workers)
	default:
		w.adversary(ctx, &workers)
	}
	workers.Wait()
	close(w.closed)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// elected: three nodes elect on one lockfile; each leader seals the keys,
// then writes counters until its leadership ends, or, when the nemesis
// pauses it, sleeps past its lease and writes on as if it still led.
func (w *world) elected(ctx context.Context, workers *sync.WaitGroup) {
	links := make([]*faultstore.Store, 3)
	for i := range links {
		links[i] = w.link()
		e, err := s3lect.New(s3lect.ElectorConfig{Store: links[i], LockfilePath: "lock.json", ServerID: fmt.Sprintf("node-%d", i),
			FrequentInterval: simFreq, LeaderTimeout: simLease, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			w.t.Fatalf("s3lect.New() error = %v", err)
		}
		workers.Add(1)
		go func() {
			defer workers.Done()
			defer e.Close()
			for ctx.Err() == nil {
				lead, err := e.Campaign(ctx)
				if err != nil {
					if ctx.Err() == nil {
						w.t.Errorf("node %d: Campaign() error = %v", i, err)
						return
					}
					continue
				}
				w.mu.Lock()
				w.st.terms++
				w.mu.Unlock()
				w.lead(ctx, links[i], lead)
				select { // a paused leader's elector may not have noticed yet
				case <-lead.Context().Done():
				case <-ctx.Done():
				}
			}
		}()
	}
	// The nemesis: a fault on one node every few seconds, healed later.
	workers.Add(1)
	go func() {
		defer workers.Done()
		for {
			select {
			case <-ctx.Done():
				for _, l := range links {
					l.Restore()
					l.Unstall()
				}
				return
			case <-time.After(time.Duration(1+w.rng.IntN(4)) * time.Second):
			}
			l := links[w.rng.IntN(len(links))]
			heal := time.Duration(w.rng.Int64N(int64(2 * simLease)))
			switch w.rng.IntN(3) {
			case 0:
				l.Cut()
				time.AfterFunc(heal, l.Restore)
			case 1:
				l.Stall()
				time.AfterFunc(heal, l.Unstall)
			default:
				l.LoseReplies(1 + w.rng.IntN(3))
			}
		}
	}()
}

// lead is one leadership's work: seal every key, then write. A paused
// leader (one time in four) stops, elector included, past its lease and
// then writes a few times with a context of its own, as a process that
// does not know it was paused.
func (w *world) lead(ctx context.Context, link *faultstore.Store, lead *s3lect.Leadership) {
	fw, err := New(link, lead.Term())
	if err != nil {
		w.t.Errorf("New(term %d) error = %v", lead.Term(), err)
		return
	}
	lctx := lead.Context()
	for _, key := range simKeyNames {
		w.write(lctx, fw, 0, key, 0)
	}
	paused := w.rng.IntN(4) == 0
	value := 0
	for lctx.Err() == nil {
		if paused && w.rng.IntN(5) == 0 {
			// The whole process stops: its elector's calls hang too, so
			// its lease runs out and another node takes over.
			link.Stall()
			select {
			case <-time.After(simLease + time.Duration(w.rng.Int64N(int64(2*simLease)))):
			case <-ctx.Done():
			}
			link.Unstall()
			zctx, cancel := context.WithTimeout(ctx, simLease)
			for range 1 + w.rng.IntN(3) {
				value++
				w.write(zctx, fw, 2, simKeyNames[w.rng.IntN(simKeys)], value)
			}
			cancel()
			return
		}
		value++
		op := 2
		if w.rng.IntN(20) == 0 {
			op = 1
		}
		w.write(lctx, fw, op, simKeyNames[w.rng.IntN(simKeys)], value)
		select {
		case <-time.After(time.Duration(w.rng.Int64N(int64(simFreq)))):
		case <-lctx.Done():
		}
	}
}

// adversary: writers of arbitrary terms, any number at once, each with
// its own faulty link: it seals some keys, writes, pauses, writes again.
// Several goroutines may share one term (one leader's workers), and two
// successors may seal at once.
func (w *world) adversary(ctx context.Context, workers *sync.WaitGroup) {
	var term uint64
	for ctx.Err() == nil {
		select {
		case <-time.After(time.Duration(w.rng.Int64N(int64(2 * simLease)))):
		case <-ctx.Done():
			return
		}
		term++
		w.mu.Lock()
		w.st.terms++
		w.mu.Unlock()
		for range 1 + w.rng.IntN(2) {
			link := w.link()
			if w.rng.IntN(4) == 0 {
				link.LoseReplies(1 + w.rng.IntN(2))
			}
			fw, err := New(link, term)
			if err != nil {
				w.t.Fatalf("New(term %d) error = %v", term, err)
			}
			workers.Add(1)
			go func() {
				defer workers.Done()
				wctx, cancel := context.WithTimeout(ctx, time.Duration(1+w.rng.IntN(3))*simLease)
				defer cancel()
				if w.rng.IntN(2) == 0 {
					w.write(wctx, fw, 0, simKeyNames[w.rng.IntN(simKeys)], 0)
					w.write(wctx, fw, 0, simKeyNames[w.rng.IntN(simKeys)], 0)
				}
				for value := 1; wctx.Err() == nil; value++ {
					op := 2
					if w.rng.IntN(10) == 0 {
						op = w.rng.IntN(2)
					}
					w.write(wctx, fw, op, simKeyNames[w.rng.IntN(simKeys)], value)
					pause := time.Duration(w.rng.Int64N(int64(simFreq)))
					if w.rng.IntN(10) == 0 {
						pause = simLease + time.Duration(w.rng.Int64N(int64(2*simLease)))
					}
					select {
					case <-time.After(pause):
					case <-wctx.Done():
					}
				}
			}()
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
