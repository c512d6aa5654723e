package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// The tests' timings: every figure below is in virtual time.
const (
	testFI = time.Second
	testLT = 3 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// group is a pool of workers on one memory store, each behind a fault
// wrapper of its own (Cut is a killed process, as its peers see it). Its
// Work checks, at every start, that it got its leadership's context, that
// no other leadership of the shard is live while its own is, and that the
// shard's term has risen.
type group struct {
	t       *testing.T
	mem     *memstore.Store
	shards  []string
	workers []*worker

	mu      sync.Mutex
	running map[string]map[string]*s3lect.Leadership   // shard → worker → its leadership while its Work runs
	terms   map[string]uint64                          // shard → the last term started
	wrap    func(id string, s store.Store) store.Store // if set, what each worker's store is wrapped in
}

type worker struct {
	id   string
	p    *Pool
	fs   *faultstore.Store
	stop context.CancelFunc
	done chan error
}

func newGroup(t *testing.T, workers, shards int) *group {
	t.Helper()
	g := &group{t: t, mem: memstore.New(), running: map[string]map[string]*s3lect.Leadership{}, terms: map[string]uint64{}}
	for i := range shards {
		g.shards = append(g.shards, fmt.Sprintf("shard-%02d", i))
	}
	for i := range workers {
		g.add(fmt.Sprintf("w%d", i+1))
	}
	return g
}

// add starts a worker of the given ID.
func (g *group) add(id string) *worker {
	g.t.Helper()
	w := &worker{id: id, fs: faultstore.New(g.mem), done: make(chan error, 1)}
	var st store.Store = w.fs
	if g.wrap != nil {
		st = g.wrap(id, w.fs)
	}
	p, err := New(Config{Store: st, Prefix: "pools/t/", ID: id, Shards: g.shards, Logger: quiet,
		FrequentInterval: testFI, LeaderTimeout: testLT,
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) { g.work(ctx, id, shard, lead) }})
	if err != nil {
		g.t.Fatalf("New(%s) = %v", id, err)
	}
	w.p = p
	ctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	go func() { w.done <- p.Run(ctx) }()
	g.workers = append(g.workers, w)
	return w
}

func (g *group) work(ctx context.Context, id, shard string, lead *s3lect.Leadership) {
	g.mu.Lock()
	if ctx != lead.Context() {
		g.t.Errorf("%s: Work(%s) got a context other than its leadership's", id, shard)
	}
	if ctx.Err() == nil { // a leadership may end before its Work is scheduled
		for other, l := range g.running[shard] {
			if l.Context().Err() == nil {
				g.t.Errorf("%s: Work(%s) started at term %d while %s's leadership of it at term %d is live", id, shard, lead.Term(), other, l.Term())
			}
		}
	}
	if lead.Term() <= g.terms[shard] {
		g.t.Errorf("%s: Work(%s) started at term %d, not above the last term %d", id, shard, lead.Term(), g.terms[shard])
	}
	if g.running[shard] == nil {
		g.running[shard] = map[string]*s3lect.Leadership{}
	}
	g.running[shard][id], g.terms[shard] = lead, max(g.terms[shard], lead.Term())
	g.mu.Unlock()
	<-ctx.Done()
	g.mu.Lock()
	if g.running[shard][id] == lead {
		delete(g.running[shard], id)
	}
	g.mu.Unlock()
}

// led returns the shards each given worker leads, by Leading, and
// whether every shard is led by exactly one of them.
func (g *group) led(ws []*worker) (map[string]int, bool) {
	counts, by := map[string]int{}, map[string]int{}
	for _, w := range ws {
		l := w.p.Leading()
		counts[w.id] = len(l)
		for _, s := range l {
			by[s]++
		}
	}
	for _, s := range g.shards {
		if by[s] != 1 {
			return counts, false
		}
	}
	return counts, true
}

// even reports whether the given workers lead every shard once, each
// ⌊N/W⌋ or ⌈N/W⌉ of them.
func (g *group) even(ws []*worker) bool {
	counts, all := g.led(ws)
	lo, hi := len(g.shards)/len(ws), (len(g.shards)+len(ws)-1)/len(ws)
	for _, n := range counts {
		if n < lo || n > hi {
			return false
		}
	}
	return all
}

// waitEven waits until the given workers lead every shard evenly, and
// returns how long that took; it fails the test after limit.
func (g *group) waitEven(ws []*worker, limit time.Duration, what string) time.Duration {
	g.t.Helper()
	start := time.Now()
	for !g.even(ws) {
		if time.Since(start) > limit {
			counts, _ := g.led(ws)
			g.t.Fatalf("%s: not every shard led evenly after %v: %v", what, limit, counts)
		}
		time.Sleep(testFI / 10)
	}
	return time.Since(start)
}

// coordinator returns the worker that coordinates in the latest era.
func (g *group) coordinator(ws []*worker) *worker {
	var c *worker
	var era uint64
	for _, w := range ws {
		if e := w.p.Stats().Coordinator; e > era {
			c, era = w, e
		}
	}
	return c
}

// stopAll ends every worker's Run, killed ones included.
func (g *group) stopAll() {
	for _, w := range g.workers {
		w.fs.Restore()
		w.stop()
	}
	for _, w := range g.workers {
		if err := <-w.done; err != nil {
			g.t.Errorf("%s: Run() = %v; want nil", w.id, err)
		}
	}
}

func without(ws []*worker, gone ...*worker) []*worker {
	return slices.DeleteFunc(slices.Clone(ws), func(w *worker) bool { return slices.Contains(gone, w) })
}

func TestShardsSpreadEvenlyAfterAColdStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 4, 40)
		defer g.stopAll()
		took := g.waitEven(g.workers, 4*testLT, "cold start of 4 workers over 40 shards")
		t.Logf("balanced %v after a cold start", took)
	})
}

// A killed worker (every store call fails, no goodbye) loses its shards
// to the others within the crash bound, and so does a killed
// coordinator; the bounds are the protocol's after-faults bound (3 ×
// LeaderTimeout + 3 × FrequentInterval), the figures are logged.
func TestKilledWorkersShardsMoveToTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 4, 40)
		defer g.stopAll()
		g.waitEven(g.workers, 4*testLT, "cold start")
		c := g.coordinator(g.workers)
		if c == nil {
			t.Fatal("no worker coordinates")
		}
		victim := g.workers[0]
		if victim == c {
			victim = g.workers[1]
		}
		victim.fs.Cut()
		live := without(g.workers, victim)
		took := g.waitEven(live, 3*testLT+3*testFI, "a killed worker")
		t.Logf("a killed worker's shards led again, evenly, %v after the kill", took)
		if got := victim.p.Leading(); len(got) != 0 {
			t.Errorf("the killed worker leads %v after its shards moved", got)
		}
		c.fs.Cut()
		live = without(live, c)
		took = g.waitEven(live, 3*testLT+3*testFI, "a killed coordinator")
		t.Logf("a killed coordinator's shards led again, evenly, %v after the kill", took)
	})
}

// Run's end (SIGTERM) drains the worker's Work and closes its session,
// and the others lead its shards sooner than a crash would allow (under
// a lease after Run returns).
func TestRunsEndHandsShardsOverWithoutWaitingALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 3, 12)
		defer g.stopAll()
		g.waitEven(g.workers, 4*testLT, "cold start")
		leaver := g.workers[0]
		if leaver == g.coordinator(g.workers) {
			leaver = g.workers[1]
		}
		leaver.stop()
		if err := <-leaver.done; err != nil {
			t.Fatalf("Run() of the leaving worker = %v; want nil", err)
		}
		leaver.done <- nil // for stopAll
		if got := leaver.p.Leading(); len(got) != 0 {
			t.Errorf("after Run returned the worker leads %v; want nothing", got)
		}
		g.mu.Lock()
		for shard, by := range g.running {
			if by[leaver.id] != nil {
				t.Errorf("after Run returned, its Work of %s still runs", shard)
			}
		}
		g.mu.Unlock()
		took := g.waitEven(without(g.workers, leaver), testLT, "a worker's Run ended")
		t.Logf("its shards led elsewhere %v after Run returned", took)
	})
}

// Work that returns while its leadership is live gives the shard up; the
// coordinator grants it again, at a higher term.
func TestWorkReturningGivesTheShardUpAndItRunsAgainAtAHigherTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ran := make(chan uint64, 2)
		p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: "quick", Shards: []string{"only"}, Logger: quiet,
			FrequentInterval: testFI, LeaderTimeout: testLT,
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
				select {
				case ran <- l.Term():
				default:
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		first, second := <-ran, <-ran
		if second <= first {
			t.Errorf("terms %d then %d; want the second above the first", first, second)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	})
}

// Two processes given one worker ID: one of them finds out and its Run
// returns an error matching ErrDuplicateID that names the fix; the other
// goes on and leads every shard.
func TestDuplicateIDIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, 4)
		defer g.stopAll()
		g.waitEven(g.workers, 4*testLT, "one worker alone")
		twin := g.add("w1")
		first := g.workers[0]
		var stopped, other *worker
		select {
		case err := <-twin.done:
			stopped, other = twin, first
			checkDuplicateErr(t, err)
		case err := <-first.done:
			stopped, other = first, twin
			checkDuplicateErr(t, err)
		case <-time.After(10 * testLT):
			t.Fatalf("two processes ran as w1 for 10 × LeaderTimeout and neither Run returned")
		}
		stopped.done <- nil // for stopAll
		if got := stopped.p.Leading(); len(got) != 0 {
			t.Errorf("the stopped process leads %v", got)
		}
		g.waitEven([]*worker{other}, 3*testLT+3*testFI, "the remaining process")
	})
}

func checkDuplicateErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrDuplicateID) || !strings.Contains(err.Error(), "w1.json") || !strings.Contains(err.Error(), "unique ID") {
		t.Errorf("Run() = %v; want an error matching ErrDuplicateID that names w1's session and asks for unique IDs", err)
	}
}

// A Prefix that holds the old pool's objects: Run refuses before it
// writes anything, with an error matching ErrOldPool that names the key
// and the upgrade step.
func TestRunRefusesThePrefixOfTheOldPool(t *testing.T) {
	for _, key := range []string{"members.json", "sessions/w9.json", "shards/shard-07.json", "shards/a/b.json"} {
		t.Run(key, func(t *testing.T) {
			mem := memstore.New()
			mem.Set("pools/t/"+key, []byte(`{}`))
			p, err := New(Config{Store: mem, Prefix: "pools/t/", ID: "w1", Shards: []string{"a"}, Logger: quiet,
				Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			err = p.Run(t.Context())
			if !errors.Is(err, ErrOldPool) || !strings.Contains(err.Error(), "pools/t/"+key) || !strings.Contains(err.Error(), "stop every worker of the old version") {
				t.Errorf("Run() = %v; want ErrOldPool naming %q and the upgrade step", err, "pools/t/"+key)
			}
			if es, _ := mem.List(t.Context(), ""); len(es) != 1 {
				t.Errorf("after the refusal the store holds %d objects; want only the old one", len(es))
			}
		})
	}
}

// Keys that only look like the old pool's (another pool's under a
// longer Prefix, or the new pool's own) do not stop Run.
func TestOldPoolKeysAreTheOldPoolsOnly(t *testing.T) {
	cases := map[string]bool{
		"members.json": true, "sessions/w1.json": true, "shards/s.json": true, "shards/a/b.json": true,
		"sessions/sub/w1.json": false, "workers/w1.json": false, "news/w1.json": false, "assign/w1.json": false,
		"coordinator.json": false, "coordinator.json.term": false, "other/members.json": false, "shards/x": false,
	}
	for key, want := range cases {
		if got := oldKey(key); got != want {
			t.Errorf("oldKey(%q) = %v; want %v", key, got, want)
		}
	}
}

// noList is a store that cannot list.
type noList struct{ s *memstore.Store }

func (n noList) Get(ctx context.Context, key string) ([]byte, string, error) {
	return n.s.Get(ctx, key)
}
func (n noList) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return n.s.PutIfMatch(ctx, key, data, etag)
}

var _ store.Store = noList{}

func TestNewRejectsBadConfig(t *testing.T) {
	work := func(context.Context, string, *s3lect.Leadership) {}
	st := memstore.New()
	ok := Config{Store: st, Prefix: "p/", ID: "a", Shards: []string{"a"}, Work: work}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"NoStore", with(func(c *Config) { c.Store = nil }), "Store is nil"},
		{"StoreCannotList", with(func(c *Config) { c.Store = noList{st} }), "cannot list keys"},
		{"NoPrefix", with(func(c *Config) { c.Prefix = "" }), "Prefix is empty"},
		{"NoID", with(func(c *Config) { c.ID = "" }), "ID is empty"},
		{"SlashID", with(func(c *Config) { c.ID = "a/b" }), "contains a slash"},
		{"NoShards", with(func(c *Config) { c.Shards = nil }), "Shards: no shard named"},
		{"NoWork", with(func(c *Config) { c.Work = nil }), "Work is nil"},
		{"Duplicate", with(func(c *Config) { c.Shards = []string{"a", "a"} }), `shard "a" named twice`},
		{"EmptyShard", with(func(c *Config) { c.Shards = []string{""} }), "empty shard name"},
		{"ShortLease", with(func(c *Config) { c.LeaderTimeout = 2 * time.Second; c.FrequentInterval = time.Second }), "must exceed two FrequentIntervals"},
		{"Negative", with(func(c *Config) { c.FrequentInterval = -1 }), "FrequentInterval -1ns is negative"},
		{"LongKey", with(func(c *Config) { c.ID = strings.Repeat("x", 1100) }), "exceed 1024 bytes"},
		{"PeerModeNoAddr", with(func(c *Config) { c.PeerMode = true }), "PeerMode needs ServerAddr"},
		{"PeerPinnedAndTLS", with(func(c *Config) {
			c.PeerMode, c.ServerAddr, c.PeerPinned, c.PeerTLS = true, "127.0.0.1:8443", true, &tls.Config{}
		}), "leave PeerTLS and PeerClient unset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v; want one saying %q", err, tc.want)
			}
		})
	}
	deprecated := with(func(c *Config) { c.InfrequentInterval, c.ReadEachSession = time.Minute, true })
	for name, cfg := range map[string]Config{"valid": ok, "deprecated fields set": deprecated} {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%s) = %v; want nil", name, err)
		}
	}
}

// Without peer mode PeerHandler serves no pool: every request is 404,
// and the answer says what is missing.
func TestPeerHandlerServesNoPoolWithoutPeerMode(t *testing.T) {
	p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: "a", Shards: []string{"a"},
		Work: func(context.Context, string, *s3lect.Leadership) {}})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{PeerPath + "?prefix=p/", "/elsewhere"} {
		rec := httptest.NewRecorder()
		PeerHandler(p, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d; want 404", target, rec.Code)
		}
	}
}

// TestRunReturnsWhenTheStoreIsUnreachableAtItsEnd: Run's context
// ends while the worker cannot reach the store (a SIGTERM during an
// outage). Its leaderships end at once and its lease runs out within
// LeaderTimeout; with nothing left to close, Run should return then.
// (pool/internal/coord, Worker.SessionRead: a leaving worker whose read
// of its key fails has no session and no Work running: it is done.)
func TestRunReturnsWhenTheStoreIsUnreachableAtItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, 4)
		g.waitEven(g.workers, 4*testLT, "cold start")
		w := g.workers[0]
		w.fs.Cut()
		w.stop()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("Run() = %v; want nil", err)
			}
			w.done <- nil // for stopAll
		case <-time.After(3 * testLT):
			t.Errorf("Run did not return within 3 × LeaderTimeout of its context's end while the store was unreachable")
		}
		g.stopAll()
	})
}
