package k8slock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// -k8slock.timing sets client-go's LeaseDuration, RenewDeadline and
// RetryPeriod for TestClientGoProcesses. The default is client-go's
// defaults (15s,10s,2s) scaled down (the lease is kept in whole seconds),
// so that CI spends half a minute on it; docs/kubernetes.md gives figures
// from both.
var timing = flag.String("k8slock.timing", "2s,1500ms,300ms", "LeaseDuration,RenewDeadline,RetryPeriod of the processes' LeaderElectors")

// Environment of a child process: the test binary, re-run as one
// candidate.
const (
	childEnv    = "K8SLOCK_TEST_CHILD" // its Identity
	endpointEnv = "K8SLOCK_TEST_ENDPOINT"
	bucketEnv   = "K8SLOCK_TEST_BUCKET"
	keyEnv      = "K8SLOCK_TEST_KEY"
	timingEnv   = "K8SLOCK_TEST_TIMING"
)

// mono is CLOCK_MONOTONIC, which every process on the machine shares.
func mono() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

func parseTiming(s string) (lease, renew, retry time.Duration, err error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("timing %q: want LeaseDuration,RenewDeadline,RetryPeriod", s)
	}
	var d [3]time.Duration
	for i, p := range parts {
		if d[i], err = time.ParseDuration(p); err != nil {
			return 0, 0, 0, fmt.Errorf("timing %q: %w", s, err)
		}
	}
	return d[0], d[1], d[2], nil
}

// event is one line a child writes on stdout.
type event struct {
	E     string        `json:"e"` // start, work (under LeaseContext), plain (under client-go's context), end
	Term  uint64        `json:"term,omitempty"`
	At    time.Duration `json:"t"` // CLOCK_MONOTONIC
	Cause string        `json:"cause,omitempty"`
}

// runChild is a candidate: client-go's LeaderElector on a Lock on S3,
// with ReleaseOnCancel, run again each time it stops leading. While it
// leads, two loops report work every 20 ms: one while the Lock's
// LeaseContext is live, one while client-go's context is. On SIGTERM it
// stops the work, then cancels the elector, which releases the lock, and
// exits.
func runChild() int {
	klog.SetOutput(os.Stderr)
	lease, renew, retry, err := parseTiming(os.Getenv(timingEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	id := os.Getenv(childEnv)
	client := s3test.ClientFor(nopTB{}, os.Getenv(endpointEnv), nil, "", "")
	lock, err := New(Config{Store: s3store.New(client, os.Getenv(bucketEnv)), Key: os.Getenv(keyEnv), Identity: id, CallTimeout: renew / 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var outMu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	emit := func(ev event) {
		outMu.Lock()
		defer outMu.Unlock()
		out.Encode(ev)
	}
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	var (
		mu       sync.Mutex
		stopping bool
		active   sync.WaitGroup // OnStartedLeading calls with work running
	)
	for sig.Err() == nil {
		run, cancelRun := context.WithCancel(context.Background())
		stopped := context.AfterFunc(sig, func() {
			mu.Lock()
			stopping = true
			mu.Unlock()
			active.Wait() // ReleaseOnCancel: the work ends before the release
			cancelRun()
		})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
			ReleaseOnCancel: true, Name: id,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					mu.Lock()
					if stopping {
						mu.Unlock()
						return
					}
					active.Add(1)
					mu.Unlock()
					defer active.Done()
					emit(event{E: "start", Term: lock.Term(), At: mono()})
					gated := lock.LeaseContext(ctx)
					var loops sync.WaitGroup
					work := func(name string, c context.Context) {
						defer loops.Done()
						for {
							at := mono() // read first: a pause after it cannot stretch the interval
							if c.Err() != nil || sig.Err() != nil {
								return
							}
							emit(event{E: name, At: at})
							time.Sleep(20 * time.Millisecond)
						}
					}
					loops.Add(2)
					go work("work", gated)
					go work("plain", ctx)
					loops.Wait()
					emit(event{E: "end", At: mono(), Cause: fmt.Sprint(context.Cause(gated))})
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		le.Run(run)
		stopped()
		cancelRun()
		active.Wait()
	}
	return 0
}

// nopTB lets a child use s3test.ClientFor, which only needs Helper and
// Cleanup.
type nopTB struct{ testing.TB }

func (nopTB) Helper()        {}
func (nopTB) Cleanup(func()) {}

// proxy is a TCP proxy from a child to MinIO that can partition it: on
// partition it closes every connection (calls in flight fail) and holds
// new ones open without a byte through (later calls hang until their
// deadline), until heal.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	parted bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		parted := p.parted
		p.mu.Unlock()
		if parted {
			continue // held silent until heal or close
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[up] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *proxy) closeConnsLocked() {
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parted = true
	p.closeConnsLocked()
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parted = false
	p.closeConnsLocked()
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closeConnsLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

// interval is one leadership as its process reported it.
type interval struct {
	node                string
	term                uint64
	start               time.Duration
	lastWork, lastPlain time.Duration // last work under LeaseContext, under client-go's context
	ended               bool
	cause               string
}

// ledger collects every child's leaderships.
type ledger struct {
	mu        sync.Mutex
	intervals []*interval
	current   map[string]*interval
}

func (l *ledger) record(node string, ev event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.E == "start" {
		iv := &interval{node: node, term: ev.Term, start: ev.At}
		l.intervals = append(l.intervals, iv)
		l.current[node] = iv
		return
	}
	iv := l.current[node]
	if iv == nil {
		return
	}
	switch ev.E {
	case "work":
		iv.lastWork = max(iv.lastWork, ev.At)
	case "plain":
		iv.lastPlain = max(iv.lastPlain, ev.At)
	case "end":
		iv.ended, iv.cause = true, ev.Cause
	}
}

// waitLeader waits for a leadership that started after since, and
// returns it.
func (l *ledger) waitLeader(t *testing.T, since time.Duration, within time.Duration) interval {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, iv := range l.intervals {
			if iv.start > since {
				got := *iv
				l.mu.Unlock()
				return got
			}
		}
		l.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leadership started within %v:%s", within, l.describe())
	return interval{}
}

func (l *ledger) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, iv := range l.intervals {
		fmt.Fprintf(&b, "\n  %s term %d: %.3fs, work to %.3fs, client-go's context to %.3fs (ended %v: %s)",
			iv.node, iv.term, iv.start.Seconds(), iv.lastWork.Seconds(), iv.lastPlain.Seconds(), iv.ended, iv.cause)
	}
	return b.String()
}

// overlaps counts the pairs of leaderships in which the earlier one
// worked at or after the later one's start: under LeaseContext and under
// client-go's context. It also checks that terms rise.
func (l *ledger) overlaps(t *testing.T) (gated int, plain []string) {
	t.Helper()
	l.mu.Lock()
	ivs := make([]interval, len(l.intervals))
	for i, iv := range l.intervals {
		ivs[i] = *iv
	}
	l.mu.Unlock()
	slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			if ivs[i].lastWork >= ivs[j].start {
				gated++
			}
			if ivs[i].lastPlain >= ivs[j].start {
				plain = append(plain, fmt.Sprintf("%s term %d %.2fs into %s term %d's",
					ivs[i].node, ivs[i].term, (ivs[i].lastPlain-ivs[j].start).Seconds(), ivs[j].node, ivs[j].term))
			}
		}
		// client-go keeps LeaderTransitions when a holder wins its own
		// record back (its renewals failed for RenewDeadline, nobody took
		// over): the same holder may lead twice with one term, another
		// holder never.
		if i > 0 && (ivs[i].term < ivs[i-1].term || ivs[i].term == ivs[i-1].term && ivs[i].node != ivs[i-1].node) {
			t.Errorf("term went from %d (%s) to %d (%s):%s", ivs[i-1].term, ivs[i-1].node, ivs[i].term, ivs[i].node, l.describe())
		}
	}
	return gated, plain
}

// child is a candidate process seen from the test.
type child struct {
	id     string
	cmd    *exec.Cmd
	proxy  *proxy
	stderr bytes.Buffer
	read   chan struct{}
}

func startChild(t *testing.T, led *ledger, id, endpoint, bucket string) *child {
	t.Helper()
	c := &child{id: id, proxy: startProxy(t, strings.TrimPrefix(endpoint, "http://")), read: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+id, endpointEnv+"=http://"+c.proxy.addr(),
		bucketEnv+"="+bucket, keyEnv+"=k8slock/processes.json", timingEnv+"="+*timing)
	c.cmd.Stderr = &syncWriter{w: &c.stderr}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				led.record(id, ev)
			}
		}
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.read
		c.cmd.Wait()
	})
	return c
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestClientGoProcesses runs client-go's own LeaderElector on a Lock on
// MinIO in three, then four, processes, each reaching MinIO through a
// proxy of its own, and injects: the leader killed (SIGKILL), the leader
// stopped (SIGSTOP) past its lease and resumed, the leader partitioned
// from MinIO and healed, and the leader stopped with SIGTERM
// (ReleaseOnCancel). Work under the Lock's LeaseContext must never
// overlap between leaderships, and terms must rise; overlaps of work
// under client-go's own context are counted and printed, not failed (its
// package doc promises none). It prints the failover and handover times
// beside what the timing predicts.
func TestClientGoProcesses(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	lease, renew, retry, err := parseTiming(*timing)
	if err != nil {
		t.Fatal(err)
	}
	led := &ledger{current: map[string]*interval{}}
	children := map[string]*child{}
	for _, id := range []string{"c1", "c2", "c3"} {
		children[id] = startChild(t, led, id, endpoint, bucket)
	}
	within := 4*lease + 30*time.Second // generous: the machine may be loaded; the figures say what it took
	first := led.waitLeader(t, 0, within)
	time.Sleep(lease)
	var figures []string
	figure := func(format string, args ...any) {
		figures = append(figures, fmt.Sprintf(format, args...))
	}

	// SIGKILL: no release; the others take over after the lease.
	killed := children[first.node]
	at := mono()
	killed.cmd.Process.Kill()
	next := led.waitLeader(t, at, within)
	figure("SIGKILL of the leader: next leader after %.2fs (client-go's rule: LeaseDuration %v after the last renewal seen, then the next attempt, RetryPeriod plus a jitter of up to 1.2 of it)", (next.start - at).Seconds(), lease)
	children["c4"] = startChild(t, led, "c4", endpoint, bucket)
	time.Sleep(lease)

	// SIGSTOP past the lease, then SIGCONT.
	paused := children[next.node]
	at = mono()
	paused.cmd.Process.Signal(syscall.SIGSTOP)
	next = led.waitLeader(t, at, within)
	figure("SIGSTOP of the leader: next leader after %.2fs", (next.start - at).Seconds())
	time.Sleep(lease)
	resumed := mono()
	paused.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(renew + 2*retry + time.Second)
	led.mu.Lock()
	stale := *led.current[paused.id]
	led.mu.Unlock()
	// Work timed just before the stop took effect is allowed (the signal
	// takes a moment to land); none after the successor started or after
	// SIGCONT.
	if stale.lastWork >= next.start || stale.lastWork >= resumed {
		t.Errorf("%s did work under LeaseContext at %.3fs; it was stopped at %.3fs, %s led from %.3fs, SIGCONT at %.3fs",
			paused.id, stale.lastWork.Seconds(), at.Seconds(), next.node, next.start.Seconds(), resumed.Seconds())
	}
	if stale.lastPlain > resumed {
		figure("SIGSTOP: client-go's own context stayed live %.2fs after SIGCONT while %s led (LeaseContext: ended before any work)", (stale.lastPlain - resumed).Seconds(), next.node)
	} else {
		figure("SIGSTOP: client-go's own context was not seen live after SIGCONT")
	}
	time.Sleep(lease)

	// A partition of the leader from MinIO, healed after the takeover.
	parted := children[next.node]
	at = mono()
	parted.proxy.partition()
	next = led.waitLeader(t, at, within)
	figure("partition of the leader: next leader after %.2fs", (next.start - at).Seconds())
	time.Sleep(lease)
	parted.proxy.heal()
	time.Sleep(lease)

	// SIGTERM: the work stops, then ReleaseOnCancel releases the lock.
	leaving := children[next.node]
	at = mono()
	leaving.cmd.Process.Signal(syscall.SIGTERM)
	next = led.waitLeader(t, at, within)
	figure("SIGTERM of the leader with ReleaseOnCancel: next leader after %.2fs (client-go's rule: the next attempt, within 2.2 × RetryPeriod %v)", (next.start - at).Seconds(), retry)
	<-leaving.read
	if err := leaving.cmd.Wait(); err != nil {
		t.Errorf("%s exited with %v after SIGTERM; want 0:\n%s", leaving.id, err, leaving.stderr.String())
	}
	time.Sleep(lease)

	for _, c := range children {
		if c.cmd.ProcessState == nil && c != killed {
			c.cmd.Process.Signal(syscall.SIGCONT)
			c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, c := range children {
		<-c.read
		c.cmd.Wait()
	}
	gated, plain := led.overlaps(t)
	if gated != 0 {
		t.Errorf("%d overlaps of work under LeaseContext; want 0:%s", gated, led.describe())
	}
	figure("%d leaderships; overlaps of work under LeaseContext: %d; under client-go's own context: %d %q", len(led.intervals), gated, len(plain), plain)
	t.Logf("client-go LeaderElector on k8slock, LeaseDuration %v, RenewDeadline %v, RetryPeriod %v (client-go's defaults: 15s, 10s, 2s):\n  %s",
		lease, renew, retry, strings.Join(figures, "\n  "))
	http.DefaultClient.CloseIdleConnections()
}
