package chaos

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/s3lect/s3lect/internal/s3test"
)

// Timings for elections under faults: the defaults divided by about 17.
const (
	chaosFI = 300 * time.Millisecond
	chaosII = 900 * time.Millisecond
	chaosLT = 1500 * time.Millisecond
	// bound is the liveness bound once faults stop: LeaderTimeout +
	// FrequentInterval + the retry budget (three attempts of at most
	// FrequentInterval, and 1.1 s of waits).
	bound = chaosLT + chaosFI + 3*chaosFI + 1100*time.Millisecond

	minioUser   = "chaos-user"
	minioSecret = "chaos-secret-key"
	bucket      = "chaos"
)

// mono reads CLOCK_MONOTONIC, which every process on the machine shares,
// so that leaderships reported by several processes can be compared.
func mono() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// minio is a MinIO server of the test's own, which it can restart.
type minio struct {
	t    *testing.T
	bin  string
	dir  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func startMinIO(t *testing.T) *minio {
	t.Helper()
	bin := os.Getenv("S3LECT_TEST_MINIO")
	if bin == "" {
		s3test.Need(t, "no MinIO binary: run `bash .ci/run`, which installs MinIO and sets S3LECT_TEST_MINIO, or install the pinned MinIO as docs/testing.md shows and set S3LECT_TEST_MINIO=$HOME/.cache/s3lect/minio/minio")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &minio{t: t, bin: bin, dir: t.TempDir(), addr: ln.Addr().String()}
	ln.Close()
	m.start()
	t.Cleanup(m.stop)
	client := m.client(t, m.addr)
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return m
}

func (m *minio) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "server", "--quiet", "--address", m.addr, m.dir)
	m.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioSecret, "MINIO_BROWSER=off")
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start MinIO: %v", err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(m.cmd, m.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + m.addr + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				http.DefaultClient.CloseIdleConnections()
				return
			}
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("MinIO on %s not ready: %v", m.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *minio) stop() {
	if m.cmd != nil {
		m.cmd.Process.Kill()
		<-m.done
		m.cmd = nil
	}
}

// client returns an S3 client that reaches MinIO at addr (MinIO itself, or
// a proxy in front of it).
func (m *minio) client(t *testing.T, addr string) *s3.Client {
	return s3test.ClientFor(t, "http://"+addr, nil, minioUser, minioSecret)
}

// interval is one leadership as the checker sees it: from the moment
// Campaign returned to the last moment its holder did leader work.
type interval struct {
	node     string
	term     uint64
	start    time.Duration // CLOCK_MONOTONIC
	lastWork time.Duration
	ended    bool
	cause    string
}

// ledger collects intervals from every node, in or out of process.
type ledger struct {
	mu        sync.Mutex
	intervals []*interval
	open      map[string]*interval // by node
}

func newLedger() *ledger { return &ledger{open: map[string]*interval{}} }

func (l *ledger) start(node string, term uint64, at time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	iv := &interval{node: node, term: term, start: at, lastWork: at}
	l.intervals = append(l.intervals, iv)
	l.open[node] = iv
}

func (l *ledger) work(node string, at time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if iv := l.open[node]; iv != nil && at > iv.lastWork {
		iv.lastWork = at
	}
}

func (l *ledger) end(node, cause string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if iv := l.open[node]; iv != nil {
		iv.ended, iv.cause = true, cause
		delete(l.open, node)
	}
}

// leader returns the node that leads now, if any.
func (l *ledger) leader() (string, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for node, iv := range l.open {
		return node, iv.term, true
	}
	return "", 0, false
}

// waitLeader waits for a leadership with a term above after.
func (l *ledger) waitLeader(t *testing.T, after uint64) (string, uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a liveness bound, not a speed limit
	for time.Now().Before(deadline) {
		if node, term, ok := l.leader(); ok && term > after {
			return node, term
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no leader with a term above %d within 60s:%s", after, l.describe())
	return "", 0
}

func (l *ledger) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, iv := range l.intervals {
		fmt.Fprintf(&b, "\n  %s term %d: %.3fs - %.3fs (ended %v %s)", iv.node, iv.term, iv.start.Seconds(), iv.lastWork.Seconds(), iv.ended, iv.cause)
	}
	return b.String()
}

// check fails on two holders doing leader work at overlapping times, on a
// term that does not rise, and, if healed is set, on no steady leader
// within the liveness bound after it.
func (l *ledger) check(t *testing.T, healed time.Duration) {
	t.Helper()
	l.mu.Lock()
	ivs := make([]interval, len(l.intervals))
	for i, iv := range l.intervals {
		ivs[i] = *iv
	}
	l.mu.Unlock()
	slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
	for i := 1; i < len(ivs); i++ {
		prev, cur := ivs[i-1], ivs[i]
		if prev.lastWork >= cur.start {
			t.Errorf("%s term %d worked until %.3fs, after %s term %d started at %.3fs:%s",
				prev.node, prev.term, prev.lastWork.Seconds(), cur.node, cur.term, cur.start.Seconds(), l.describe())
		}
		if cur.term <= prev.term {
			t.Errorf("term went from %d (%s) to %d (%s):%s", prev.term, prev.node, cur.term, cur.node, l.describe())
		}
	}
	if healed > 0 {
		if len(ivs) == 0 {
			t.Fatal("no leader ever")
		}
		if last := ivs[len(ivs)-1]; last.ended || last.start > healed+bound {
			t.Errorf("no steady leader within %v of the faults healing at %.3fs:%s", bound, healed.Seconds(), l.describe())
		}
	}
}

// tally counts the faults a test injected and survived.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *tally) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[kind]++
}

// report logs the tally and appends it to the file S3LECT_CHAOS_SUMMARY
// names, which .ci/run prints at the end.
func (c *tally) report(t *testing.T, title string) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: survived", title)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, c.m[k])
	}
	c.mu.Unlock()
	t.Log(b.String())
	if path := os.Getenv("S3LECT_CHAOS_SUMMARY"); path != "" && !t.Failed() {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, b.String())
			f.Close()
		}
	}
}
