package chaos

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store/s3store"
)

// Environment of a pool worker process (TestPoolPeerProcesses).
const (
	poolWorkerEnv = "S3LECT_CHAOS_POOL_WORKER" // its ID
	poolPrefixEnv = "S3LECT_CHAOS_POOL_PREFIX"
	poolCertEnv   = "S3LECT_CHAOS_POOL_CERT" // PEM: the dev server certificate
	poolKeyEnv    = "S3LECT_CHAOS_POOL_KEY"  // PEM: its key
	poolRootsEnv  = "S3LECT_CHAOS_POOL_ROOTS"

	poolShards = 40
	poolTick   = 50 * time.Millisecond // between two work ticks of a led shard
	// ledBound is how soon after a worker dies (or stops) every shard must
	// be led again: the victim's last renewal was at most a
	// FrequentInterval before the fault, the survivors take its shards
	// LeaderTimeout + FrequentInterval/16 after that renewal (the watch is
	// timed to it, docs/pool-protocol.md), then a look and the claims, a
	// few store round trips of at most a FrequentInterval each. 3 ×
	// LeaderTimeout leaves 2 × LeaderTimeout - FrequentInterval for those
	// round trips on a loaded machine under -race.
	ledBound = 3 * chaosLT
	// settleLimit is a liveness limit, not a speed target: the spread
	// after a fault must come within it.
	settleLimit = 20 * time.Second
)

// poolReport is one line a pool worker writes on stdout.
type poolReport struct {
	Event  string        `json:"e"` // start, work, end, stats
	Shard  string        `json:"s,omitempty"`
	Term   uint64        `json:"term,omitempty"`
	At     time.Duration `json:"t"` // CLOCK_MONOTONIC
	Cause  string        `json:"cause,omitempty"`
	Served int64         `json:"served,omitempty"` // stats: peer requests answered 200 since start
	Lists  uint64        `json:"lists,omitempty"`  // stats: listings of the store since start
}

func poolShardNames() []string {
	names := make([]string, poolShards)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%02d", i)
	}
	return names
}

// runPoolWorker is a pool worker process: a pool.Pool in peer mode over
// poolShards shards, serving PeerHandler over TLS on 127.0.0.1. For each
// shard it leads it reports the start, a work tick every poolTick (the
// time read before the leadership's context is checked) and the end with
// its cause; every FrequentInterval it reports how many peer requests it
// answered and how many listings it made. SIGTERM ends Run (a handover of
// everything) and the process.
func runPoolWorker() int {
	id := os.Getenv(poolWorkerEnv)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 2 }
	cert, err := tls.X509KeyPair([]byte(os.Getenv(poolCertEnv)), []byte(os.Getenv(poolKeyEnv)))
	if err != nil {
		return fail(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(os.Getenv(poolRootsEnv))) {
		return fail(fmt.Errorf("no certificate in %s", poolRootsEnv))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(os.Getenv(endpointEnv)), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(minioUser, minioSecret, ""),
	})
	var outMu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	emit := func(r poolReport) {
		outMu.Lock()
		defer outMu.Unlock()
		out.Encode(r)
	}
	p, err := pool.New(pool.Config{
		Store: s3store.New(client, bucket), Prefix: os.Getenv(poolPrefixEnv), ID: id, Shards: poolShardNames(),
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {
			emit(poolReport{Event: "start", Shard: shard, Term: lead.Term(), At: mono()})
			for {
				at := mono() // read the time first: a pause after it cannot stretch the interval
				if ctx.Err() != nil {
					break
				}
				emit(poolReport{Event: "work", Shard: shard, Term: lead.Term(), At: at})
				time.Sleep(poolTick)
			}
			emit(poolReport{Event: "end", Shard: shard, Term: lead.Term(), At: mono(), Cause: fmt.Sprint(context.Cause(ctx))})
		},
		FrequentInterval: chaosFI, LeaderTimeout: chaosLT,
		PeerMode: true, ServerAddr: ln.Addr().String(), PeerTLS: &tls.Config{RootCAs: roots},
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return fail(err)
	}
	var served atomic.Int64
	peers := pool.PeerHandler(p)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			peers.ServeHTTP(sw, r)
			if sw.code == http.StatusOK {
				served.Add(1)
			}
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(os.Stderr, "peer server: ", 0),
	}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		for ctx.Err() == nil {
			emit(poolReport{Event: "stats", At: mono(), Served: served.Load(), Lists: p.Stats().Lists})
			time.Sleep(chaosFI)
		}
	}()
	if err := p.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// poolInterval is one shard leadership of one worker, as the checker sees
// it: from Work's start to the last moment it did work.
type poolInterval struct {
	worker, shard string
	term          uint64
	start         time.Duration // CLOCK_MONOTONIC
	lastWork      time.Duration
	ended         bool
	cause         string
}

// poolStats is a worker's last stats line.
type poolStats struct {
	at     time.Duration
	served int64
	lists  uint64
}

// poolLedger collects the leaderships of every worker process.
type poolLedger struct {
	mu    sync.Mutex
	ivs   []*poolInterval
	open  map[[2]string]*poolInterval // by worker and shard
	stats map[string]poolStats
}

func newPoolLedger() *poolLedger {
	return &poolLedger{open: map[[2]string]*poolInterval{}, stats: map[string]poolStats{}}
}

func (l *poolLedger) take(worker string, r poolReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{worker, r.Shard}
	switch r.Event {
	case "start":
		iv := &poolInterval{worker: worker, shard: r.Shard, term: r.Term, start: r.At, lastWork: r.At}
		l.ivs = append(l.ivs, iv)
		l.open[k] = iv
	case "work":
		if iv := l.open[k]; iv != nil && r.At > iv.lastWork {
			iv.lastWork = r.At
		}
	case "end":
		if iv := l.open[k]; iv != nil {
			iv.ended, iv.cause = true, r.Cause
			delete(l.open, k)
		}
	case "stats":
		l.stats[worker] = poolStats{at: r.At, served: r.Served, lists: r.Lists}
	}
}

// endWorker ends every open leadership of a worker whose process is gone.
func (l *poolLedger) endWorker(worker, cause string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, iv := range l.open {
		if k[0] == worker {
			iv.ended, iv.cause = true, cause
			delete(l.open, k)
		}
	}
	delete(l.stats, worker)
}

// counts returns, for the workers not in skip, how many open leaderships
// each has, and how many shards have one (a shard led by two counts
// once; check finds those).
func (l *poolLedger) counts(skip string) (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	per := map[string]int{}
	led := map[string]bool{}
	for k := range l.open {
		if k[0] != skip {
			per[k[0]]++
			led[k[1]] = true
		}
	}
	return per, len(led)
}

// waitAllLed waits until every shard has a leadership of a worker other
// than skip, and returns when that came, or fails after settleLimit.
func (l *poolLedger) waitAllLed(t *testing.T, skip string) time.Duration {
	t.Helper()
	deadline := time.Now().Add(settleLimit)
	for time.Now().Before(deadline) {
		if _, n := l.counts(skip); n == poolShards {
			return mono()
		}
		time.Sleep(5 * time.Millisecond)
	}
	per, n := l.counts(skip)
	t.Fatalf("only %d of %d shards led (without %q) %v after the fault: %v", n, poolShards, skip, settleLimit, per)
	return 0
}

// waitSpread waits until the workers, and only they, lead every shard,
// each ⌊N/W⌋ or ⌈N/W⌉ of them, and returns when that came.
func (l *poolLedger) waitSpread(t *testing.T, workers ...string) time.Duration {
	t.Helper()
	lo := poolShards / len(workers)
	hi := (poolShards + len(workers) - 1) / len(workers)
	var per map[string]int
	var n int
	deadline := time.Now().Add(settleLimit)
	for time.Now().Before(deadline) {
		per, n = l.counts("")
		ok := n == poolShards && len(per) == len(workers)
		for _, w := range workers {
			ok = ok && per[w] >= lo && per[w] <= hi
		}
		total := 0
		for _, c := range per {
			total += c
		}
		if ok && total == poolShards {
			return mono()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no spread of %d shards over %v within %v: %d led, %v", poolShards, workers, settleLimit, n, per)
	return 0
}

func (l *poolLedger) served() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int64{}
	for w, s := range l.stats {
		m[w] = s.served
	}
	return m
}

func (l *poolLedger) lists() (map[string]uint64, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]uint64{}
	for w, s := range l.stats {
		m[w] = s.lists
	}
	return m, mono()
}

// describe lists the leaderships of one shard.
func (l *poolLedger) describe(shard string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, iv := range l.ivs {
		if iv.shard == shard {
			fmt.Fprintf(&b, "\n  %s term %d: %.3fs - %.3fs (ended %v %s)", iv.worker, iv.term, iv.start.Seconds(), iv.lastWork.Seconds(), iv.ended, iv.cause)
		}
	}
	return b.String()
}

// check fails on two leaderships of a shard with work at overlapping
// times (one's last work tick at or after the next one's start), and on a
// shard's term that does not rise from one leadership to the next. It
// returns the number of leaderships checked.
func (l *poolLedger) check(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	byShard := map[string][]poolInterval{}
	for _, iv := range l.ivs {
		byShard[iv.shard] = append(byShard[iv.shard], *iv)
	}
	l.mu.Unlock()
	n := 0
	for shard, ivs := range byShard {
		n += len(ivs)
		slices.SortFunc(ivs, func(a, b poolInterval) int { return int(a.start - b.start) })
		for i := 1; i < len(ivs); i++ {
			prev, cur := ivs[i-1], ivs[i]
			if prev.lastWork >= cur.start {
				t.Errorf("shard %s: %s term %d worked until %.3fs, after %s term %d started at %.3fs:%s",
					shard, prev.worker, prev.term, prev.lastWork.Seconds(), cur.worker, cur.term, cur.start.Seconds(), l.describe(shard))
			}
			if cur.term <= prev.term {
				t.Errorf("shard %s: term went from %d (%s) to %d (%s):%s", shard, prev.term, prev.worker, cur.term, cur.worker, l.describe(shard))
			}
		}
	}
	return n
}

// poolWorker is a pool worker process seen from the test.
type poolWorker struct {
	id     string
	cmd    *exec.Cmd
	stderr syncBuffer
	read   chan struct{} // closed when its stdout is drained
	gone   bool
}

// poolEnv is what every worker process is given.
type poolEnv struct {
	endpoint, prefix, cert, key, roots string
}

func startPoolWorker(t *testing.T, env poolEnv, led *poolLedger, id string) *poolWorker {
	t.Helper()
	w := &poolWorker{id: id, read: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(os.Environ(), poolWorkerEnv+"="+id, endpointEnv+"="+env.endpoint, poolPrefixEnv+"="+env.prefix,
		poolCertEnv+"="+env.cert, poolKeyEnv+"="+env.key, poolRootsEnv+"="+env.roots)
	w.cmd.Stderr = &w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r poolReport
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				led.take(id, r)
			}
		}
	}()
	t.Cleanup(func() {
		if !w.gone {
			w.cmd.Process.Kill()
			<-w.read
			w.cmd.Wait()
		}
		if t.Failed() {
			logs := strings.Split(strings.TrimSpace(w.stderr.String()), "\n")
			t.Logf("worker %s, last lines of its log:\n%s", id, strings.Join(logs[max(0, len(logs)-15):], "\n"))
		}
	})
	return w
}

func (w *poolWorker) signal(sig syscall.Signal) { w.cmd.Process.Signal(sig) }

// kill ends the process with SIGKILL and waits for it.
func (w *poolWorker) kill() {
	w.cmd.Process.Kill()
	<-w.read
	w.cmd.Wait()
	w.gone = true
}

// stop asks the worker to hand its shards over and exit, and waits.
func (w *poolWorker) stop(t *testing.T) {
	w.signal(syscall.SIGTERM)
	select {
	case <-w.read:
	case <-time.After(settleLimit):
		t.Errorf("worker %s did not exit within %v of SIGTERM", w.id, settleLimit)
		w.cmd.Process.Kill()
		<-w.read
	}
	if err := w.cmd.Wait(); err != nil && !t.Failed() {
		t.Errorf("worker %s: %v", w.id, err)
	}
	w.gone = true
}

// devPEM is the dev PKI's server certificate and key as PEM, for the
// worker processes.
//
// devtls keeps its CA in an x509.CertPool, which cannot be read back, so
// the workers' trust is the one server certificate devtls issued to all of
// them (for 127.0.0.1): each verifies the others' certificate chain and
// name as against a CA, with that certificate as the root.
func devPEM(t *testing.T) (cert, key string) {
	t.Helper()
	pki, err := devtls.New()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(pki.Server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Server.Leaf.Verify(x509.VerifyOptions{Roots: pki.Pool, DNSName: "127.0.0.1"}); err != nil {
		t.Fatalf("the dev CA does not verify its server certificate: %v", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pki.Server.Certificate[0]})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// TestPoolPeerProcesses runs a pool in peer mode as real worker processes
// (4, then 5) over 40 shards on MinIO, each serving PeerHandler over TLS on
// loopback, and injects, each at a random phase of the renewal cycle:
// SIGKILL of the hub (the live worker with the lowest ID) and its restart,
// SIGKILL of another worker and its restart, SIGSTOP of the hub past its
// lease and SIGCONT, and a worker joining with an ID below the hub's. No
// shard may be worked by two workers at once, a shard's terms rise, every
// shard is led again within ledBound of a death, the shards spread evenly
// after each fault, and the hub (the worker answering the others' peer
// requests) is the live worker with the lowest ID.
func TestPoolPeerProcesses(t *testing.T) {
	t.Parallel() // a MinIO, prefix and processes of its own, as the other fault tests
	m := startMinIO(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d; FrequentInterval %v, LeaderTimeout %v, %d shards", seed, chaosFI, chaosLT, poolShards)
	rng := rand.New(rand.NewPCG(seed, seed))
	phase := func() { time.Sleep(time.Duration(rng.Int64N(int64(chaosFI)))) } // a random point of the renewal cycle
	cert, key := devPEM(t)
	env := poolEnv{endpoint: "http://" + m.addr, prefix: "chaos/pool/", cert: cert, key: key, roots: cert}
	led := newPoolLedger()
	workers := map[string]*poolWorker{}
	live := []string{"w2", "w3", "w4", "w5"}
	for _, id := range live {
		workers[id] = startPoolWorker(t, env, led, id)
	}
	var (
		survived tally
		figures  []string
	)
	figure := func(format string, args ...any) {
		t.Helper()
		s := fmt.Sprintf(format, args...)
		t.Log(s)
		figures = append(figures, s)
	}
	lt := func(d time.Duration) string {
		return fmt.Sprintf("%.2f × LeaderTimeout (%v)", d.Seconds()/chaosLT.Seconds(), d.Round(time.Millisecond))
	}
	// hub checks that the hub becomes want: within hubBound, a window of
	// three intervals comes in which only want answered the others' peer
	// requests (and it did). Spread does not wait for it: a worker that
	// has not yet seen a rejoined worker's new session keeps asking the
	// old hub until its next listing (one InfrequentInterval at most).
	hub := func(want string) {
		t.Helper()
		const hubBound = 2*peerII + chaosLT
		start := mono()
		var last string
		for windows := 1; ; windows++ {
			before := led.served()
			time.Sleep(3 * chaosFI)
			after := led.served()
			last = ""
			for _, w := range live {
				d := after[w] - before[w]
				switch {
				case w == want && d == 0:
					last += fmt.Sprintf("; hub %s answered no peer request", want)
				case w != want && d != 0:
					last += fmt.Sprintf("; %s answered %d peer requests", w, d)
				}
			}
			if last == "" {
				if windows > 1 {
					t.Logf("the hub settled on %s after %v (%d windows of %v)", want, (mono() - start).Round(time.Millisecond), windows, 3*chaosFI)
				}
				return
			}
			if mono()-start > hubBound {
				t.Errorf("the hub did not settle on %s within %v: in the last %v%s", want, hubBound, 3*chaosFI, last)
				return
			}
		}
	}
	start := mono()
	spreadAt := led.waitSpread(t, live...)
	figure("4 workers started: every shard led and spread in %s", lt(spreadAt-start))
	hub("w2")
	// Peer mode's saving: listings per worker per FrequentInterval while
	// the pool is settled (1/6 expected: one per InfrequentInterval).
	l0, at0 := led.lists()
	time.Sleep(2 * peerII)
	l1, at1 := led.lists()
	var listed uint64
	for _, w := range live {
		listed += l1[w] - l0[w]
	}
	figure("settled: %.2f store listings per worker per FrequentInterval (1/6 = one per InfrequentInterval)",
		float64(listed)/float64(len(live))/((at1-at0).Seconds()/chaosFI.Seconds()))

	// kill ends a worker with SIGKILL at a random phase, measures the time
	// until every shard is led again, restarts it if asked, and waits for
	// the spread.
	kill := func(id, what string, restart bool) {
		t.Helper()
		survived.add(what)
		phase()
		at := mono()
		workers[id].kill()
		led.endWorker(id, "SIGKILL")
		d := led.waitAllLed(t, id) - at
		figure("%s: every shard led again %s after the kill", what, lt(d))
		if d > ledBound {
			t.Errorf("%s: the shards were led again %v after the kill; the bound is %v", what, d, ledBound)
		}
		if !restart {
			return
		}
		at = mono()
		workers[id] = startPoolWorker(t, env, led, id)
		figure("%s: restarted, spread again in %s", what, lt(led.waitSpread(t, live...)-at))
	}

	// 1. SIGKILL of the hub, and its restart (it is the hub again).
	kill("w2", "SIGKILL of the hub", true)
	hub("w2")

	// 2. SIGKILL of a worker that is not the hub, and its restart.
	victim := live[1+rng.IntN(len(live)-1)]
	t.Logf("the non-hub victim is %s", victim)
	kill(victim, "SIGKILL of a non-hub worker", true)
	hub("w2")

	// 3. SIGSTOP of the hub past its lease, then SIGCONT: the others take
	// its shards (their requests to it stall, and they list the store);
	// once resumed it must find every leadership's context ended, and do
	// no work after the pause.
	phase()
	paused := workers["w2"]
	pausedAt := mono()
	paused.signal(syscall.SIGSTOP)
	d := led.waitAllLed(t, "w2") - pausedAt
	figure("SIGSTOP of the hub: every shard led again %s after the pause", lt(d))
	if d > ledBound {
		t.Errorf("SIGSTOP of the hub: the shards were led again %v after the pause; the bound is %v", d, ledBound)
	}
	time.Sleep(chaosLT)
	led.mu.Lock()
	var stale []*poolInterval
	for k, iv := range led.open {
		if k[0] == "w2" {
			stale = append(stale, iv)
		}
	}
	led.mu.Unlock()
	if len(stale) == 0 {
		t.Errorf("the paused hub led nothing when it was stopped")
	}
	resumedAt := mono()
	paused.signal(syscall.SIGCONT)
	deadline := time.Now().Add(10 * time.Second)
	for {
		led.mu.Lock()
		open := 0
		for _, iv := range stale {
			if !iv.ended {
				open++
			}
		}
		led.mu.Unlock()
		if open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	led.mu.Lock()
	for _, iv := range stale {
		switch {
		case !iv.ended:
			t.Errorf("resumed hub never reported the end of shard %s term %d", iv.shard, iv.term)
		case iv.lastWork >= pausedAt:
			t.Errorf("resumed hub worked shard %s term %d at %.3fs, after it was paused at %.3fs (resumed at %.3fs)",
				iv.shard, iv.term, iv.lastWork.Seconds(), pausedAt.Seconds(), resumedAt.Seconds())
		case !strings.Contains(iv.cause, "lease expired"):
			t.Errorf("resumed hub's leadership of shard %s ended with %q; want the lease expired", iv.shard, iv.cause)
		}
	}
	led.mu.Unlock()
	survived.add("SIGSTOP of the hub past its lease, then SIGCONT")
	figure("SIGSTOP of the hub: %d leaderships ended on resume without work after the pause; spread again %s after SIGCONT",
		len(stale), lt(led.waitSpread(t, live...)-resumedAt))
	hub("w2")

	// 4. A worker joins with an ID below the hub's: it gets its share and
	// becomes the hub.
	phase()
	at := mono()
	workers["w1"] = startPoolWorker(t, env, led, "w1")
	live = append([]string{"w1"}, live...)
	figure("w1 joined below the hub: spread over 5 workers in %s", lt(led.waitSpread(t, live...)-at))
	survived.add("a worker joining below the hub")
	hub("w1")

	n := led.check(t)
	for _, id := range live {
		workers[id].stop(t)
	}
	led.check(t)
	figure("%d shard leaderships checked: no two workers' work overlapped on a shard, terms rose", n)
	survived.report(t, "pool in peer mode (processes)")
	if path := os.Getenv("S3LECT_CHAOS_SUMMARY"); path != "" && !t.Failed() {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprint(f, "  "+strings.Join(figures, "\n  ")+"\n") // one write: the tests beside it append too
			f.Close()
		}
	}
}

// peerII is the pool's InfrequentInterval in peer mode when left zero.
const peerII = 6 * chaosFI
