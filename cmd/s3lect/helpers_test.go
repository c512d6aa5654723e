package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is one s3lect process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, once done is closed
	exitAt time.Time
}

// start runs the s3lect binary with args. At the test's end a process
// still running is killed with its whole command group (the guard's
// group is found through the process's own children).
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	p.cmd.Stdout = &p.stderr
	p.cmd.WaitDelay = 2 * time.Second // a leftover grandchild holding the output pipe must not hang the test
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.exitAt = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL) // the guard then kills the command's group
		<-p.done
	})
	return p
}

// status waits for the process and returns its exit status.
func (p *proc) status(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second): // a liveness bound, not a speed limit
		t.Fatalf("s3lect %v did not exit\n%s", p.cmd.Args[1:], p.stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", p.err)
	return -1
}

// eventually is how long a test waits for an event that must come (a
// command's start, a line, a process's end): a liveness bound, not a speed
// limit. It is far above what the event takes on a two-core machine at
// load average 20 (seconds at most), so that reaching it means the event
// never came, and the failure says which one, with what each process said.
const eventually = 60 * time.Second

// waitFor waits until cond holds, checking every 10ms; it fails the test
// after limit, a liveness bound, printing what each of procs has said.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			var said strings.Builder
			for i, p := range procs {
				fmt.Fprintf(&said, "\nprocess %d said:\n%s", i+1, p.stderr.String())
			}
			t.Fatalf("timed out after %v waiting for %s%s", limit, what, said.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLine waits until p has printed a line containing want.
func (p *proc) waitLine(t *testing.T, limit time.Duration, want string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("s3lect %v printed no line with %q within %v:\n%s", p.cmd.Args[1:], want, limit, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childScript is a command for s3lect run that records its life in
// dir/ID.log: "start TERM NANOS", then "beat NANOS" every 20ms while it
// runs, "stop NANOS" when it exits on SIGTERM (unless stubborn, when it
// ignores SIGTERM and only SIGKILL stops it). It also starts a grandchild
// (a sleep) and writes its own PID to ID.pid and the grandchild's to
// ID.gpid.
func childScript(dir, id string, stubborn bool) []string {
	log := filepath.Join(dir, id+".log")
	onTerm := fmt.Sprintf(`trap 'echo "stop $(date +%%s%%N)" >> %q; exit 0' TERM`, log)
	if stubborn {
		onTerm = `trap '' TERM`
	}
	script := fmt.Sprintf(`echo "start $S3LECT_TERM $(date +%%s%%N)" >> %[1]q
%[2]s
sleep 600 &
echo $! > %[3]q
echo $$ > %[4]q
while :; do echo "beat $(date +%%s%%N)" >> %[1]q; sleep 0.02; done`,
		log, onTerm, filepath.Join(dir, id+".gpid"), filepath.Join(dir, id+".pid"))
	return []string{"sh", "-c", script}
}

// event is one line of a child's log.
type event struct {
	kind string
	at   time.Time
	term string
}

// readLog reads a child's log; missing means it never started.
func readLog(t *testing.T, dir, id string) []event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, id+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue // a line cut short by SIGKILL
		}
		ns, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			continue
		}
		ev := event{kind: f[0], at: time.Unix(0, ns)}
		if f[0] == "start" && len(f) == 3 {
			ev.term = f[1]
		}
		evs = append(evs, ev)
	}
	return evs
}

// readPID reads a PID file the child wrote.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, eventually, path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	i := bytes.LastIndexByte(b, ')')
	f := bytes.Fields(b[i+1:])
	return len(f) > 0 && string(f[0]) != "Z" && string(f[0]) != "X"
}

// stallProxy forwards TCP connections from a loopback port to target, and
// can be stalled: while stalled it moves no byte in either direction and
// leaves new connections waiting, as a network partition does.
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

// newStallProxy listens on the first free port of 19350-19399 (this
// package's share of the loopback ports).
func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	var ln net.Listener
	var err error
	for port := 19350; port < 19400; port++ {
		if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no free port in 19350-19399 for the proxy: %v", err)
	}
	p := &stallProxy{ln: ln, target: target, conns: []net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for p.stalled.Load() {
				time.Sleep(10 * time.Millisecond)
				if p.isClosed() {
					c.Close()
					return
				}
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.track(up)
			p.wg.Add(2)
			go p.pipe(up, c)
			go p.pipe(c, up)
		}()
	}
}

func (p *stallProxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns == nil
}

func (p *stallProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		return
	}
	p.conns = append(p.conns, c)
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.stalled.Load() && !p.isClosed() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *stallProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// freePort returns a loopback port that nothing listened on a moment ago,
// for a runner's -peer-addr: fixed ports collided with other jobs' tests
// on a shared machine ("bind: address already in use"). The kernel does
// not hand a port it just gave out to the next :0 listen, so the window
// in which another process takes it is short.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// jobRun is one run of a command, as its log tells it: from its start to
// its last record (its stop, or the last heartbeat before it was killed).
type jobRun struct {
	id, term string
	from, to time.Time
}

// jobRuns returns every run in the logs of ids in dir, in order of start.
func jobRuns(t *testing.T, dir string, ids ...string) []jobRun {
	t.Helper()
	var runs []jobRun
	for _, id := range ids {
		for _, ev := range readLog(t, dir, id) {
			switch {
			case ev.kind == "start":
				runs = append(runs, jobRun{id: id, term: ev.term, from: ev.at, to: ev.at})
			case len(runs) > 0 && runs[len(runs)-1].id == id:
				runs[len(runs)-1].to = ev.at
			}
		}
	}
	slices.SortFunc(runs, func(a, b jobRun) int { return a.from.Compare(b.from) })
	return runs
}

// checkNoOverlap fails the test if two runs of the job in the logs of ids
// overlap, the safety every runner test rests on, whoever led and however
// often the leadership moved; it returns the runs in order of start.
func checkNoOverlap(t *testing.T, dir string, ids ...string) []jobRun {
	t.Helper()
	runs := jobRuns(t, dir, ids...)
	for i := 1; i < len(runs); i++ {
		if prev, next := runs[i-1], runs[i]; !prev.to.Before(next.from) {
			t.Errorf("%s's command (term %s) started at %v, before %s's (term %s) last sign of life at %v: two ran at once",
				next.id, next.term, next.from.Format(time.StampMicro), prev.id, prev.term, prev.to.Format(time.StampMicro))
		}
	}
	return runs
}

// keySeq numbers the keys freshKey hands out.
var keySeq atomic.Int64

// freshKey returns base (a key such as "cli/peer.json") made unique to
// one run of a test: the tests share one bucket per process, and a test
// run again (go test -count) must not find what its last run left (a
// lockfile, a sealed object).
func freshKey(base string) string {
	ext := path.Ext(base)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(base, ext), keySeq.Add(1), ext)
}
