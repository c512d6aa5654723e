package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store/s3store"
)

// Environment of a pool worker process (TestPoolProcesses).
const (
	poolWorkerEnv = "S3LECT_CHAOS_POOL_WORKER" // its ID
	poolPrefixEnv = "S3LECT_CHAOS_POOL_PREFIX"

	poolShards = 40
	poolTick   = 50 * time.Millisecond // between two work ticks of a led shard
	// settleLimit is a liveness limit, not a speed target: every shard
	// led, and the spread, after a fault must come within it. The pool's
	// own bound after faults stop (docs/pool-protocol.md) is checked in
	// virtual time by the deterministic simulation on every seed; here,
	// on real timers, how soon is a figure in the chaos summary. A busy
	// machine (load average 30, the race detector) kept the 1.5 s
	// coordinator lease from being renewed for tens of seconds, so the
	// limit is generous.
	settleLimit = 60 * time.Second
)

// poolReport is one line a pool worker writes on stdout.
type poolReport struct {
	Event string        `json:"e"` // start, work, end, stats
	Shard string        `json:"s,omitempty"`
	Term  uint64        `json:"term,omitempty"`
	At    time.Duration `json:"t"` // CLOCK_MONOTONIC
	Cause string        `json:"cause,omitempty"`
	Coord bool          `json:"coord,omitempty"` // stats: the worker coordinates the pool now
}

func poolShardNames() []string {
	names := make([]string, poolShards)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%02d", i)
	}
	return names
}

// runPoolWorker is a pool worker process: a pool.Pool over poolShards
// shards on MinIO. For each shard it leads it reports the start, a work
// tick every poolTick (the time read before the leadership's context is
// checked) and the end with its cause; every FrequentInterval it reports
// whether it coordinates. SIGTERM ends Run (a handover of everything)
// and the process.
func runPoolWorker() int {
	id := os.Getenv(poolWorkerEnv)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 2 }
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
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		for ctx.Err() == nil {
			emit(poolReport{Event: "stats", At: mono(), Coord: p.Stats().Coordinating})
			time.Sleep(chaosFI)
		}
	}()
	if err := p.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
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
	at    time.Duration
	coord bool
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
		l.stats[worker] = poolStats{at: r.At, coord: r.Coord}
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

// coordinator waits until exactly one of the live workers says, in a
// stats line since since, that it coordinates, and returns it.
func (l *poolLedger) coordinator(t *testing.T, live []string, since time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(settleLimit)
	for {
		l.mu.Lock()
		var coords []string
		fresh := true
		for _, w := range live {
			s, ok := l.stats[w]
			fresh = fresh && ok && s.at > since
			if s.coord {
				coords = append(coords, w)
			}
		}
		l.mu.Unlock()
		if fresh && len(coords) == 1 {
			return coords[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("not one coordinator among %v within %v: %v say they coordinate", live, settleLimit, coords)
		}
		time.Sleep(chaosFI / 4)
	}
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
	endpoint, prefix string
}

func startPoolWorker(t *testing.T, env poolEnv, led *poolLedger, id string) *poolWorker {
	t.Helper()
	w := &poolWorker{id: id, read: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(os.Environ(), poolWorkerEnv+"="+id, endpointEnv+"="+env.endpoint, poolPrefixEnv+"="+env.prefix)
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

// TestPoolProcesses runs a pool as real worker processes (4, then 5)
// over 40 shards on MinIO and injects, each at a random phase of the
// renewal cycle: SIGKILL of a worker that does not coordinate and its
// restart, SIGKILL of the coordinator and its restart, SIGSTOP of the
// coordinator past its lease and SIGCONT, and a worker joining. No shard
// may be worked by two workers at once, a shard's terms rise, every
// shard is led again after a death, and the shards spread evenly after
// each fault (within settleLimit); how soon is a figure.
func TestPoolProcesses(t *testing.T) {
	t.Parallel() // a MinIO, prefix and processes of its own, as the other fault tests
	m := startMinIO(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d; FrequentInterval %v, LeaderTimeout %v, %d shards", seed, chaosFI, chaosLT, poolShards)
	rng := rand.New(rand.NewPCG(seed, seed))
	phase := func() { time.Sleep(time.Duration(rng.Int64N(int64(chaosFI)))) } // a random point of the renewal cycle
	env := poolEnv{endpoint: "http://" + m.addr, prefix: "chaos/pool/"}
	led := newPoolLedger()
	workers := map[string]*poolWorker{}
	live := []string{"w1", "w2", "w3", "w4"}
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
	start := mono()
	spreadAt := led.waitSpread(t, live...)
	figure("4 workers started: every shard led and spread in %s", lt(spreadAt-start))

	// kill ends a worker with SIGKILL at a random phase, measures the time
	// until every shard is led again, restarts it, and waits for the
	// spread.
	kill := func(id, what string) {
		t.Helper()
		survived.add(what)
		phase()
		at := mono()
		workers[id].kill()
		led.endWorker(id, "SIGKILL")
		d := led.waitAllLed(t, id) - at
		figure("%s: every shard led again %s after the kill", what, lt(d))
		at = mono()
		workers[id] = startPoolWorker(t, env, led, id)
		figure("%s: restarted, spread again in %s", what, lt(led.waitSpread(t, live...)-at))
	}

	// 1. SIGKILL of a worker that does not coordinate, and its restart.
	coord := led.coordinator(t, live, mono())
	others := slices.DeleteFunc(slices.Clone(live), func(w string) bool { return w == coord })
	victim := others[rng.IntN(len(others))]
	t.Logf("%s coordinates; the victim is %s", coord, victim)
	kill(victim, "SIGKILL of a worker")

	// 2. SIGKILL of the coordinator, and its restart.
	coord = led.coordinator(t, live, mono())
	kill(coord, "SIGKILL of the coordinator")

	// 3. SIGSTOP of the coordinator past its lease, then SIGCONT: the
	// others elect another and take its shards; once resumed it must find
	// every leadership's context ended, and do no work after the pause.
	coord = led.coordinator(t, live, mono())
	phase()
	paused := workers[coord]
	pausedAt := mono()
	paused.signal(syscall.SIGSTOP)
	d := led.waitAllLed(t, coord) - pausedAt
	figure("SIGSTOP of the coordinator: every shard led again %s after the pause", lt(d))
	time.Sleep(chaosLT)
	led.mu.Lock()
	var stale []*poolInterval
	for k, iv := range led.open {
		if k[0] == coord {
			stale = append(stale, iv)
		}
	}
	led.mu.Unlock()
	if len(stale) == 0 {
		t.Errorf("the paused coordinator %s led nothing when it was stopped", coord)
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
			t.Errorf("resumed coordinator never reported the end of shard %s term %d", iv.shard, iv.term)
		case iv.lastWork >= pausedAt:
			t.Errorf("resumed coordinator worked shard %s term %d at %.3fs, after it was paused at %.3fs (resumed at %.3fs)",
				iv.shard, iv.term, iv.lastWork.Seconds(), pausedAt.Seconds(), resumedAt.Seconds())
		}
	}
	causes := map[string]int{}
	for _, iv := range stale {
		causes[iv.cause]++
	}
	led.mu.Unlock()
	survived.add("SIGSTOP of the coordinator past its lease, then SIGCONT")
	figure("SIGSTOP of the coordinator: %d leaderships ended on resume without work after the pause (causes %v); spread again %s after SIGCONT",
		len(stale), causes, lt(led.waitSpread(t, live...)-resumedAt))

	// 4. A worker joins: it gets its share.
	phase()
	at := mono()
	workers["w5"] = startPoolWorker(t, env, led, "w5")
	live = append(live, "w5")
	figure("w5 joined: spread over 5 workers in %s", lt(led.waitSpread(t, live...)-at))
	survived.add("a worker joining")

	n := led.check(t)
	for _, id := range live {
		workers[id].stop(t)
	}
	led.check(t)
	figure("%d shard leaderships checked: no two workers' work overlapped on a shard, terms rose", n)
	survived.report(t, "pool (processes)")
	if path := os.Getenv("S3LECT_CHAOS_SUMMARY"); path != "" && !t.Failed() {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprint(f, "  "+strings.Join(figures, "\n  ")+"\n") // one write: the tests beside it append too
			f.Close()
		}
	}
}
