// Package measure runs the measurements behind s3lect's published figures:
// failover and handover times by mode, S3 requests and cost by role, and
// the resources many electors in one process use. The benchmarks and the
// report command (examples/report) both call it, so that the README's
// tables come from one piece of code.
//
// Intervals are the defaults divided by a scale factor k so that a run
// takes seconds; figures per hour are scaled back. The fixed retry delays
// (100 ms, 1 s) are not scaled.
package measure

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/cutstore"
	"github.com/s3lect/s3lect/internal/devtls"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// S3 Standard request prices (us-east-1) and hours in a month.
const (
	PricePUT      = 0.005 / 1000
	PriceGET      = 0.0004 / 1000
	HoursPerMonth = 730
)

// Config returns an elector configuration with the default intervals
// divided by k.
func Config(st store.Store, key, id string, k int) s3lect.ElectorConfig {
	d := time.Duration(k)
	return s3lect.ElectorConfig{
		Store: st, LockfilePath: key, ServerID: id,
		FrequentInterval:   s3lect.DefaultFrequentInterval / d,
		InfrequentInterval: s3lect.DefaultInfrequentInterval / d,
		LeaderTimeout:      s3lect.DefaultLeaderTimeout / d,
		Logger:             slog.New(slog.DiscardHandler),
	}
}

// Mode is how followers watch the leader.
type Mode struct {
	Name     string
	Peer     bool // ask the leader over HTTPS
	LongPoll bool // and wait there for its next write
}

// Modes are the three ways to follow.
var Modes = []Mode{{"storage", false, false}, {"peer", true, false}, {"peer + long-poll", true, true}}

// Failover runs n groups of three electors at once, strikes each group's
// leader at a random point of its cycle (a crash: its store calls fail and
// its peer endpoint goes away; or a Resign), and returns for each group
// the time from the strike to the next leader's Campaign returning.
// newStore is called once per elector; keys are unique per call.
func Failover(ctx context.Context, newStore func() store.Store, m Mode, crash bool, n, k int) ([]time.Duration, error) {
	pki, err := devtls.New()
	if err != nil {
		return nil, err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		times []time.Duration
		errs  []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("measure/failover-%d-%d.json", time.Now().UnixNano(), i)
			d, err := failoverTrial(ctx, pki, newStore, m, crash, key, k)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			times = append(times, d)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return times, errs[0]
	}
	slices.Sort(times)
	return times, nil
}

func failoverTrial(ctx context.Context, pki *devtls.PKI, newStore func() store.Store, m Mode, crash bool, key string, k int) (time.Duration, error) {
	type member struct {
		e    *s3lect.Elector
		conn *cutstore.Store
		stop context.CancelFunc
		done chan struct{}
	}
	type win struct {
		mb   *member
		lead *s3lect.Leadership
	}
	wins := make(chan win, 3)
	var members []*member
	var campaigns sync.WaitGroup
	defer func() {
		for _, mb := range members {
			mb.e.Close() // ends its Campaign
			mb.stop()
			<-mb.done
		}
		campaigns.Wait()
	}()
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		mb := &member{conn: cutstore.New(newStore()), done: make(chan struct{})}
		cfg := Config(mb.conn, key, fmt.Sprint("m", i), k)
		cfg.ServerAddr = ln.Addr().String()
		if m.Peer {
			cfg.PeerMode, cfg.PeerTLS, cfg.PeerTimeout = true, pki.ClientTLS(), cfg.LeaderTimeout/2
			if !m.LongPoll {
				cfg.PeerWait = -1
			}
		}
		e, err := s3lect.New(cfg)
		if err != nil {
			ln.Close()
			return 0, err
		}
		mb.e = e
		sctx, stop := context.WithCancel(ctx)
		mb.stop = stop
		go func() { defer close(mb.done); s3lect.ServePeers(sctx, ln, e.PeerHandler(), pki.ServerTLS()) }()
		members = append(members, mb)
		campaigns.Add(1)
		go func() {
			defer campaigns.Done()
			if lead, err := e.Campaign(ctx); err == nil {
				wins <- win{mb, lead} // buffered for all three
			}
		}()
	}
	lt := s3lect.DefaultLeaderTimeout / time.Duration(k)
	ii := s3lect.DefaultInfrequentInterval / time.Duration(k)
	first := <-wins
	// Let the followers settle, then strike at a random point of their
	// polling and the leader's renewal cycles.
	time.Sleep(3*lt + ii + rand.N(ii))
	start := time.Now()
	if crash {
		first.mb.conn.Cut()
		first.mb.stop()
	} else if err := first.lead.Resign(ctx); err != nil {
		return 0, err
	}
	select {
	case <-wins:
		return time.Since(start), nil
	case <-time.After(20*lt + 10*time.Second):
		return 0, fmt.Errorf("measure: %s: no new leader", key)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Percentile returns the p-th percentile (0 to 100) of sorted ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}

// Rates are store requests per hour at the default intervals, by role.
type Rates struct {
	LeaderPUT, LeaderGET     float64
	FollowerGET, FollowerPUT float64 // mean per follower
}

// Monthly returns the monthly S3 Standard cost of a group of n.
func (r Rates) Monthly(n int) float64 {
	return HoursPerMonth * (r.LeaderPUT*PricePUT + r.LeaderGET*PriceGET +
		float64(n-1)*(r.FollowerGET*PriceGET+r.FollowerPUT*PricePUT))
}

// Cost runs a group of n electors (storage mode) on stores from newStore
// at 1/k of the default intervals, lets it settle, counts each elector's
// requests over window and returns the rates scaled to the defaults.
func Cost(ctx context.Context, newStore func() store.Store, n, k int, window time.Duration) (Rates, error) {
	key := fmt.Sprintf("measure/cost-%d-%d.json", n, time.Now().UnixNano())
	counters := make([]*store.Counter, n)
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
		counters[i] = store.NewCounter(newStore())
		e, err := s3lect.New(Config(counters[i], key, fmt.Sprint("i", i), k))
		if err != nil {
			return Rates{}, err
		}
		electors[i] = e
		campaigns.Add(1)
		go func() { defer campaigns.Done(); e.Campaign(ctx) }()
	}
	time.Sleep(6 * s3lect.DefaultLeaderTimeout / time.Duration(k)) // settle into the infrequent interval
	before := make([]store.Counts, n)
	for i, c := range counters {
		before[i] = c.Counts()
	}
	time.Sleep(window)
	perHour := func(d int64) float64 { return float64(d) / window.Hours() / float64(k) }
	var r Rates
	for i, c := range counters {
		now := c.Counts()
		gets, puts := perHour(now.Gets-before[i].Gets), perHour(now.Puts-before[i].Puts)
		if ch, ok := <-electors[i].Changes(); ok && ch.IsLeader {
			r.LeaderGET, r.LeaderPUT = gets, puts
		} else {
			r.FollowerGET += gets / float64(n-1)
			r.FollowerPUT += puts / float64(n-1)
		}
	}
	return r, nil
}

// Usage is what many electors in one process cost at steady state.
type Usage struct {
	Electors, Lockfiles int
	Goroutines          float64 // per elector
	HeapBytes           float64 // live heap per elector
	RSSBytes            int64   // the whole process
	CPU                 float64 // cores used, on average
	StoreOpsPerSec      float64 // at 1/k of the default intervals
}

// Pool starts n electors on memstore spread over lockfiles (n/lockfiles
// per lockfile, as a worker pool of n/lockfiles workers with one elector
// per shard would be), lets them settle, and measures them over window.
func Pool(ctx context.Context, n, lockfiles, k int, window time.Duration) (Usage, error) {
	mem := store.NewCounter(memstore.New())
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
		e, err := s3lect.New(Config(mem, fmt.Sprintf("shards/%d.json", i%lockfiles), fmt.Sprintf("worker-%d", i/lockfiles), k))
		if err != nil {
			return Usage{}, err
		}
		electors = append(electors, e)
		campaigns.Add(1)
		go func() { defer campaigns.Done(); e.Campaign(ctx) }()
	}
	time.Sleep(6 * s3lect.DefaultLeaderTimeout / time.Duration(k))
	c0, cpu0, t0 := mem.Counts(), cpuTime(), time.Now()
	time.Sleep(window)
	c1, cpu1, elapsed := mem.Counts(), cpuTime(), time.Since(t0)
	u := Usage{
		Electors:       n,
		Lockfiles:      lockfiles,
		Goroutines:     float64(runtime.NumGoroutine()-g0) / float64(n),
		CPU:            (cpu1 - cpu0).Seconds() / elapsed.Seconds(),
		StoreOpsPerSec: float64(c1.Gets+c1.Puts-c0.Gets-c0.Puts) / elapsed.Seconds(),
		RSSBytes:       rss(),
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	u.HeapBytes = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
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

// Latency wraps a store so that every call takes d longer, as a network
// round trip would.
func Latency(s store.Store, d time.Duration) store.Store { return latency{s, d} }

type latency struct {
	store.Store
	d time.Duration
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
	return l.Store.Get(ctx, key)
}

func (l latency) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := l.wait(ctx); err != nil {
		return "", err
	}
	return l.Store.PutIfMatch(ctx, key, data, etag)
}
