package main

// The measurements behind s3lect's published figures: failover and
// handover times by mode, S3 requests and cost by role, and what many
// electors in one process cost. The report and the benchmarks beside it
// (bench_test.go) both call this code, so that the README's tables come
// from one place. It imports only public packages: copy it freely.
//
// Intervals are the defaults divided by a scale factor k so that a run
// takes seconds; figures per hour are scaled back. The fixed retry delays
// (100 ms, 1 s) are not scaled.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// S3 Standard request prices (us-east-1) and hours in a month.
const (
	pricePUT      = 0.005 / 1000
	priceGET      = 0.0004 / 1000
	hoursPerMonth = 730
)

// crashModel says, in the report's words, what a crash is here.
const crashModel = "A crash is a killed process: its store calls fail at once (calls in flight too), " +
	"every TCP connection its peer server accepted or its peer client dialed is reset (SO_LINGER 0, then close: the other side reads RST), " +
	"its peer listener is gone, and it says no goodbye (no release written, no 503 answered). No graceful shutdown path is ever used to model a crash."

// scaled returns the default intervals divided by k.
func scaled(k int) (fi, ii, lt time.Duration) {
	d := time.Duration(k)
	return s3lect.DefaultFrequentInterval / d, s3lect.DefaultInfrequentInterval / d, s3lect.DefaultLeaderTimeout / d
}

// config returns an elector configuration with the default intervals
// divided by k.
func config(st store.Store, key, id string, k int) s3lect.ElectorConfig {
	fi, ii, lt := scaled(k)
	return s3lect.ElectorConfig{
		Store: st, LockfilePath: key, ServerID: id,
		FrequentInterval: fi, InfrequentInterval: ii, LeaderTimeout: lt,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// mode is how followers watch the leader.
type mode struct {
	name       string
	peer       bool // ask the leader over HTTPS
	longPoll   bool // and wait there for its next write
	frequent   bool // storage mode reading every FrequentInterval when stable
	stalePeer  bool // after the crash, a process at the leader's address answers 200 with the last record forever
	noHandover bool // the row measures crashes only
}

// modes are the rows of the failover table.
var modes = []mode{
	{name: "storage"},
	{name: "storage, InfrequentInterval = FrequentInterval", frequent: true},
	{name: "peer + long-poll", peer: true, longPoll: true},
	{name: "peer, no long-poll", peer: true},
	{name: "stale peer (peer + long-poll)", peer: true, longPoll: true, stalePeer: true, noHandover: true},
}

// writeClock remembers when each write was first sent, by its bytes
// (an elector never writes the same bytes twice). A write cut short by the
// crash may still have landed, so the dead leader's last write is found
// by reading the store, not by the last reply.
type writeClock struct {
	store.Store
	mu   sync.Mutex
	sent map[[sha256.Size]byte]time.Time
}

func (w *writeClock) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	sum := sha256.Sum256(data)
	w.mu.Lock()
	if _, ok := w.sent[sum]; !ok {
		w.sent[sum] = time.Now()
	}
	w.mu.Unlock()
	return w.Store.PutIfMatch(ctx, key, data, etag)
}

// sentAt returns when data was first sent, and whether it was.
func (w *writeClock) sentAt(data []byte) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.sent[sha256.Sum256(data)]
	return t, ok
}

// errDisturbed marks a trial whose first leadership ended before the
// strike (a store too slow for the lease, on a loaded machine): there is
// nothing to measure, so the trial is counted apart and run again.
var errDisturbed = errors.New("the leadership changed before the strike")

// failover runs n groups of three electors at once and strikes each
// group's leader at a random point of its cycle: a crash (see kill) or a
// Resign. It returns, sorted, for each group the time from the strike to
// the next leader's Campaign returning; for a stale-peer row, from the
// dead leader's last write to the next leader, and how many trials were
// disturbed and run again (see errDisturbed). newStore is called once per elector; keys
// are unique per call.
func failover(ctx context.Context, newStore func() store.Store, m mode, crash bool, n, k int) ([]time.Duration, int, error) {
	pki, err := devtls.New()
	if err != nil {
		return nil, 0, err
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		times     []time.Duration
		errs      []error
		disturbed int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A disturbed trial is run again, on a fresh lockfile, at
			// most five times: on a busy machine (load average 21, the
			// report's test at -scale 50, a 300 ms lease) three attempts
			// in a row were disturbed. A disturbed attempt ends at its
			// first leader change, so retrying costs little.
			for attempt := range 6 {
				key := fmt.Sprintf("measure/failover-%d-%d-%d.json", time.Now().UnixNano(), i, attempt)
				d, err := failoverTrial(ctx, pki, newStore, m, crash, key, k)
				mu.Lock()
				switch {
				case errors.Is(err, errDisturbed):
					disturbed++
					mu.Unlock()
					continue
				case err != nil:
					errs = append(errs, err)
				default:
					times = append(times, d)
				}
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return times, disturbed, errs[0]
	}
	if len(times) == 0 {
		return nil, disturbed, fmt.Errorf("%s: every trial was disturbed: %w", m.name, errDisturbed)
	}
	slices.Sort(times)
	return times, disturbed, nil
}

func failoverTrial(ctx context.Context, pki *devtls.PKI, newStore func() store.Store, m mode, crash bool, key string, k int) (time.Duration, error) {
	type win struct {
		p    *process
		lead *s3lect.Leadership
		at   time.Time
	}
	wins := make(chan win, 3)
	failed := make(chan error, 3)
	var procs []*process
	var campaigns sync.WaitGroup
	var (
		stale       *http.Server
		staleServed = make(chan struct{})
	)
	defer func() {
		for _, p := range procs {
			p.close() // ends its Campaign
		}
		if stale != nil {
			stale.Close()
			<-staleServed
		}
		campaigns.Wait()
	}()
	for i := range 3 {
		cfg := config(nil, key, fmt.Sprint("m", i), k)
		if m.frequent {
			cfg.InfrequentInterval = cfg.FrequentInterval
		}
		if m.peer {
			cfg.PeerMode, cfg.PeerTimeout = true, cfg.LeaderTimeout/2
			if !m.longPoll {
				cfg.PeerWait = -1
			}
		}
		p, err := startProcess(ctx, pki, newStore(), cfg)
		if err != nil {
			return 0, err
		}
		e := p.e
		procs = append(procs, p)
		campaigns.Add(1)
		go func() {
			defer campaigns.Done()
			lead, err := e.Campaign(ctx)
			if err != nil {
				failed <- err // buffered for all three
				return
			}
			wins <- win{p, lead, time.Now()} // buffered for all three
		}()
	}
	fi, ii, lt := scaled(k)
	if m.frequent {
		ii = fi
	}
	// next waits for the next leader, and says why there is none.
	next := func(what string) (win, error) {
		select {
		case w := <-wins:
			return w, nil
		case err := <-failed:
			if errors.Is(err, s3lect.ErrClosed) {
				return win{}, fmt.Errorf("%s: %s: %s: a campaign ended: %w", m.name, key, what, err)
			}
			return win{}, fmt.Errorf("%s: %s: %s: %w", m.name, key, what, err)
		case <-time.After(20*lt + 10*time.Second):
			return win{}, fmt.Errorf("%s: %s: %s: no leader after %v", m.name, key, what, 20*lt+10*time.Second)
		case <-ctx.Done():
			return win{}, ctx.Err()
		}
	}
	first, err := next("first election")
	if err != nil {
		return 0, err
	}
	// Let the followers settle into their stable interval, then strike at
	// a random point of their polling and the leader's renewal cycles.
	time.Sleep(3*lt + ii + rand.N(ii))
	if first.lead.Context().Err() != nil || len(wins) > 0 {
		return 0, errDisturbed
	}
	start := time.Now()
	switch {
	case crash:
		first.p.kill()
		if m.stalePeer {
			srv, last, err := serveStale(ctx, first.p, key, pki, staleServed)
			if err != nil {
				return 0, err
			}
			stale, start = srv, last
		}
	default:
		if err := first.lead.Resign(ctx); err != nil {
			return 0, err
		}
	}
	w, err := next("after the strike")
	if err != nil {
		return 0, err
	}
	return w.at.Sub(start), nil
}

// serveStale starts, at the dead process's address, a server that answers
// every peer request with 200 and the lockfile record as it stood at the
// crash (the dead leader's last write), forever: a stale ex-leader, a
// leftover process at the address or an old version. A long-poll that
// names the record's ETag is held for its wait, then answered the same.
//
// It returns the server and when the dead leader first sent the record
// the store holds.
func serveStale(ctx context.Context, dead *process, key string, pki *devtls.PKI, served chan<- struct{}) (*http.Server, time.Time, error) {
	data, etag, err := dead.inner.Get(ctx, key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("stale peer: read the last record: %w", err)
	}
	sent, ok := dead.writes.sentAt(data)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("stale peer: the lockfile holds a record the dead leader never sent")
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, time.Time{}, fmt.Errorf("stale peer: last record: %w", err)
	}
	rec["etag"] = etag
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, time.Time{}, err
	}
	ln, err := net.Listen("tcp", dead.ln.Addr().String())
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("stale peer: take the dead leader's address: %w", err)
	}
	srv := &http.Server{
		TLSConfig: pki.ServerTLS(),
		ErrorLog:  log.New(io.Discard, "", 0), // the followers' resets
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && r.URL.Query().Get("etag") == etag {
				select {
				case <-time.After(wait):
				case <-r.Context().Done():
					return
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}),
	}
	go func() { defer close(served); srv.ServeTLS(ln, "", "") }()
	return srv, sent, nil
}

// percentile returns the p-th percentile (0 to 100) of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}

// rates are store requests per hour at the default intervals, by role.
type rates struct {
	leaderPUT, leaderGET     float64
	followerGET, followerPUT float64 // mean per follower
}

// monthly returns the monthly S3 Standard cost of a group of n.
func (r rates) monthly(n int) float64 {
	return hoursPerMonth * (r.leaderPUT*pricePUT + r.leaderGET*priceGET +
		float64(n-1)*(r.followerGET*priceGET+r.followerPUT*pricePUT))
}

// cost runs a group of n electors (storage mode) on stores from newStore
// at 1/k of the default intervals, lets it settle, counts each elector's
// requests over window and returns the rates scaled to the defaults.
func cost(ctx context.Context, newStore func() store.Store, n, k int, window time.Duration) (rates, error) {
	key := fmt.Sprintf("measure/cost-%d-%d.json", n, time.Now().UnixNano())
	electors := make([]*s3lect.Elector, n)
	var campaigns sync.WaitGroup
	defer func() {
		for _, e := range electors {
			if e != nil {
				e.Close() // ends its Campaign
			}
		}
		campaigns.Wait()
	}()
	for i := range n {
		e, err := s3lect.New(config(newStore(), key, fmt.Sprint("i", i), k))
		if err != nil {
			return rates{}, err
		}
		electors[i] = e
		campaigns.Add(1)
		go func() { defer campaigns.Done(); e.Campaign(ctx) }()
	}
	_, _, lt := scaled(k)
	time.Sleep(6 * lt) // settle into the infrequent interval
	before := make([]calls, n)
	for i, e := range electors {
		before[i] = storeCalls(e)
	}
	time.Sleep(window)
	perHour := func(d uint64) float64 { return float64(d) / window.Hours() / float64(k) }
	var r rates
	for i, e := range electors {
		now := storeCalls(e)
		gets, puts := perHour(now.gets-before[i].gets), perHour(now.puts-before[i].puts)
		if ch, ok := <-e.Changes(); ok && ch.IsLeader {
			r.leaderGET, r.leaderPUT = gets, puts
		} else {
			r.followerGET += gets / float64(n-1)
			r.followerPUT += puts / float64(n-1)
		}
	}
	return r, nil
}

// calls counts store calls, every attempt whatever its outcome.
type calls struct{ gets, puts, lists, hub uint64 } // hub: requests to peer mode's hubs (-shard-peer)

// storeCalls returns the store calls electors have made so far, from
// their Stats: every call an elector makes to its store is counted there.
func storeCalls(electors ...*s3lect.Elector) (c calls) {
	for _, e := range electors {
		s := e.Stats()
		for _, n := range s.StoreRequests["get"] {
			c.gets += n
		}
		for _, n := range s.StoreRequests["put"] {
			c.puts += n
		}
	}
	return c
}

// usage is what many electors in one process cost at steady state.
type usage struct {
	electors, lockfiles int
	goroutines          float64 // per elector
	heapBytes           float64 // live heap per elector
	stackBytes          float64 // goroutine stacks per elector
	rssBytes            int64   // the whole process
	cpu                 float64 // cores used, on average
	storeOpsPerSec      float64 // at 1/k of the default intervals
}

// perElectorLimit is the budget for heap plus stacks per elector.
const perElectorLimit = 32 << 10

// pool starts n electors on memstore spread over lockfiles (n/lockfiles
// per lockfile, as a worker pool of n/lockfiles workers with one elector
// per shard would be), lets them settle, and measures them over window.
func pool(ctx context.Context, n, lockfiles, k int, window time.Duration) (usage, error) {
	mem := memstore.New()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	electors := make([]*s3lect.Elector, 0, n)
	var campaigns sync.WaitGroup
	defer func() {
		for _, e := range electors {
			e.Close() // ends its Campaign
		}
		campaigns.Wait()
	}()
	for i := range n {
		e, err := s3lect.New(config(mem, fmt.Sprintf("shards/%d.json", i%lockfiles), fmt.Sprintf("worker-%d", i/lockfiles), k))
		if err != nil {
			return usage{}, err
		}
		electors = append(electors, e)
		campaigns.Add(1)
		go func() { defer campaigns.Done(); e.Campaign(ctx) }()
	}
	_, _, lt := scaled(k)
	time.Sleep(6 * lt)
	c0, cpu0, t0 := storeCalls(electors...), cpuTime(), time.Now()
	time.Sleep(window)
	c1, cpu1, elapsed := storeCalls(electors...), cpuTime(), time.Since(t0)
	u := usage{
		electors:       n,
		lockfiles:      lockfiles,
		goroutines:     float64(runtime.NumGoroutine()-g0) / float64(n),
		cpu:            (cpu1 - cpu0).Seconds() / elapsed.Seconds(),
		storeOpsPerSec: float64(c1.gets+c1.puts-c0.gets-c0.puts) / elapsed.Seconds(),
		rssBytes:       rss(),
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	u.heapBytes = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	u.stackBytes = float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n)
	return u, nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the process's resident set size, from /proc (0 where there is
// none).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// withLatency wraps a store that lists (the in-memory store) so that
// every call, listings included, takes d longer, as a network round trip
// would.
func withLatency(s listingStore, d time.Duration) store.Store { return latency{s, d} }

type listingStore interface {
	store.Store
	store.Lister
}

type latency struct {
	listingStore
	d time.Duration
}

func (l latency) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	return l.listingStore.List(ctx, prefix)
}

func (l latency) wait(ctx context.Context) error {
	t := time.NewTimer(l.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l latency) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := l.wait(ctx); err != nil {
		return nil, "", err
	}
	return l.listingStore.Get(ctx, key)
}

func (l latency) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := l.wait(ctx); err != nil {
		return "", err
	}
	return l.listingStore.PutIfMatch(ctx, key, data, etag)
}
