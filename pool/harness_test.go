package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

const (
	testFI = s3lect.DefaultFrequentInterval
	testLT = s3lect.DefaultLeaderTimeout
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var errCrashed = errors.New("worker crashed")

// errInjected is what a call failed on purpose returns.
var errInjected = simworld.ErrInjected

// crashStore is one worker's view of the shared store. Once crashed, every
// call fails at once, as a killed process's calls never arrive: the worker
// renews nothing, releases nothing, and its leases run out.
type crashStore struct {
	store.Store
	dead atomic.Bool
	cut  atomic.Bool // every call hangs until its context ends, as over a cut connection
}

func (c *crashStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if c.dead.Load() {
		return nil, "", errCrashed
	}
	if c.cut.Load() {
		<-ctx.Done()
		return nil, "", ctx.Err()
	}
	return c.Store.Get(ctx, key)
}

func (c *crashStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if c.dead.Load() {
		return "", errCrashed
	}
	if c.cut.Load() {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return c.Store.PutIfMatch(ctx, key, data, etag)
}

func (c *crashStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	if c.cut.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return c.Store.(store.Lister).List(ctx, prefix)
}

// unlisted hides a store's List: the pool reads each member's session
// object instead of listing them.
type unlisted struct{ store.Store }

// group is workers running pools over the same shards on one memstore,
// with a referee that watches every Work call.
type group struct {
	t       testing.TB
	speed   time.Duration // the default intervals are divided by this
	noList  bool          // the workers' stores do not list (store.Lister)
	readAll bool          // Config.ReadEachSession
	wrap    func(id string, st store.Store) store.Store
	logger  func(id string) *slog.Logger // nil: quiet
	net     *simworld.PeerNet            // set: the workers run in peer mode over it, each at "<ID>:443"
	ii      time.Duration                // Config.InfrequentInterval before speed divides it
	lts     map[string]time.Duration     // a worker's LeaderTimeout before speed divides it, when not the default
	// peerClient, when set, gives each worker's peer client (else one over net).
	peerClient func(id string) *http.Client
	shards     []string
	mem        store.Store
	workers    []*worker

	mu      sync.Mutex
	live    map[string]*held     // shard -> the Work running for it
	endedAt map[string]time.Time // shard -> when its last Work's context ended
	maxGap  time.Duration        // the longest a shard waited for a new leader
	double  []string             // shards seen with two live leaders
	terms   map[string]uint64    // shard -> the last term started
	bad     []string             // terms that did not rise
}

type held struct {
	id  string
	ctx context.Context
}

type worker struct {
	id     string
	st     *crashStore
	p      *Pool
	cancel context.CancelFunc
	done   chan struct{}
}

func newGroup(t testing.TB, workers, shards int) *group { return newGroupAt(t, workers, shards, 1) }

// newGroupAt is newGroup with every default interval divided by speed.
func newGroupAt(t testing.TB, workers, shards, speed int) *group {
	g := &group{t: t, mem: memstore.New(), live: map[string]*held{}, endedAt: map[string]time.Time{},
		speed: time.Duration(speed), terms: map[string]uint64{}}
	for i := range shards {
		g.shards = append(g.shards, fmt.Sprintf("shard-%02d", i))
	}
	for i := range workers {
		g.add(fmt.Sprintf("w%d", i+1))
	}
	return g
}

// ids lists the IDs of the group's workers other than except (nil: all).
func (g *group) ids(except *worker) []string {
	var out []string
	for _, w := range g.workers {
		if w != except {
			out = append(out, w.id)
		}
	}
	return out
}

// add starts a worker.
func (g *group) add(id string) *worker {
	w := &worker{id: id, st: &crashStore{Store: g.mem}, done: make(chan struct{})}
	var st store.Store = w.st
	if g.noList {
		st = unlisted{w.st}
	}
	if g.wrap != nil {
		st = g.wrap(id, st)
	}
	cfg := Config{
		Store: st, Prefix: "pool/", ID: id, Shards: g.shards, Logger: quiet, ReadEachSession: g.readAll,
		FrequentInterval: testFI / g.speed, LeaderTimeout: testLT / g.speed, InfrequentInterval: g.ii / g.speed,
		Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
			g.started(shard, id, l.Term(), ctx)
			<-ctx.Done()
			g.ended(shard, ctx)
		},
	}
	if lt, ok := g.lts[id]; ok {
		cfg.LeaderTimeout = lt / g.speed
	}
	if g.net != nil {
		cfg.PeerMode, cfg.ServerAddr, cfg.PeerClient = true, id+":443", &http.Client{Transport: g.net}
		if g.peerClient != nil {
			cfg.PeerClient = g.peerClient(id)
		}
	}
	if g.logger != nil {
		cfg.Logger = g.logger(id)
	}
	p, err := New(cfg)
	if err != nil {
		g.t.Fatalf("New(%s) error = %v", id, err)
	}
	if g.net != nil {
		g.net.Add(cfg.ServerAddr, PeerHandler(p))
	}
	w.p = p
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		p.Run(ctx)
	}()
	g.workers = append(g.workers, w)
	return w
}

func (g *group) started(shard, id string, term uint64, ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.live[shard]; h != nil && h.ctx.Err() == nil {
		g.double = append(g.double, fmt.Sprintf("%s: %s started while %s's leadership was live", shard, id, h.id))
	}
	if last := g.terms[shard]; term <= last {
		g.bad = append(g.bad, fmt.Sprintf("%s: term %d after %d", shard, term, last))
	}
	g.terms[shard] = term
	if at, ok := g.endedAt[shard]; ok {
		g.maxGap = max(g.maxGap, time.Since(at))
	}
	g.live[shard] = &held{id: id, ctx: ctx}
}

func (g *group) ended(shard string, ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.live[shard]; h != nil && h.ctx == ctx {
		g.endedAt[shard] = time.Now()
	}
}

// counts returns how many shards each worker runs Work for now.
func (g *group) counts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := map[string]int{}
	for _, h := range g.live {
		if h.ctx.Err() == nil {
			n[h.id]++
		}
	}
	return n
}

// check reports shards led twice at once and terms that did not rise.
func (g *group) check(t testing.TB) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.double) > 0 {
		t.Errorf("shards led twice at once: %v", g.double)
	}
	if len(g.bad) > 0 {
		t.Errorf("terms that did not rise: %v", g.bad)
	}
}

// stop ends every worker and waits for them.
func (g *group) stop() {
	for _, w := range g.workers {
		w.cancel()
	}
	for _, w := range g.workers {
		<-w.done
	}
}

// spread formats counts by worker, in worker order.
func spread(c map[string]int) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "%s:%d ", id, c[id])
	}
	return strings.TrimSpace(b.String())
}

// within reports whether every worker in ids runs between lo and hi shards
// and together they run all of them.
func within(c map[string]int, ids []string, lo, hi, total int) bool {
	sum := 0
	for _, id := range ids {
		if c[id] < lo || c[id] > hi {
			return false
		}
		sum += c[id]
	}
	return sum == total
}

// settle waits 6 × LeaderTimeout and a third of an interval (spread and
// settled; a window opened then is off the renewals' phase), and fails t
// unless every shard is led and each worker holds ⌊N/W⌋ or ⌈N/W⌉.
func (g *group) settle(t *testing.T) {
	t.Helper()
	time.Sleep(6*testLT + testFI/3)
	n, w := len(g.shards), len(g.workers)
	if c := g.counts(); !within(c, g.ids(nil), n/w, (n+w-1)/w, n) {
		t.Fatalf("after 6 × LeaderTimeout: %s; want %d shards on each worker", spread(c), n/w)
	}
}

// ledBy counts the shards among shards that a live Work runs for on a
// worker other than except.
func (g *group) ledBy(shards []string, except string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, s := range shards {
		if h := g.live[s]; h != nil && h.ctx.Err() == nil && h.id != except {
			n++
		}
	}
	return n
}

// runUntilStopped runs p until the returned stop is called; stop ends Run's
// context and waits for Run to return.
func runUntilStopped(p *Pool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	return func() { cancel(); <-done }
}

// claim runs a claim of want (claimStart) to its end and returns how many
// it won (the tests' way in).
func (s *loopState) claim(ctx context.Context, want []string, limit int, id string) (won int) {
	s.ctx = ctx
	s.observe()
	s.tk = tick{id: id}
	s.endedTerms = s.p.sess.endedTerms()
	effs := s.claimStart(want, limit, id, s.p.now(), func(_ *core, n int, _ time.Time) []effect {
		won = n
		return nil
	})
	s.runEffects(effs)
	return won
}

// runEffects performs effs and runs the call among them to its end.
func (s *loopState) runEffects(effs []effect) {
	var in input
	for _, e := range effs {
		if r := s.perform(e); r != nil {
			in = r
		}
	}
	if in != nil {
		s.run(in)
	}
}
