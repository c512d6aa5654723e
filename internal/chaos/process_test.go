package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/s3store"
)

// Environment of a node process.
const (
	nodeEnv     = "S3LECT_CHAOS_NODE"
	endpointEnv = "S3LECT_CHAOS_ENDPOINT"
	keyEnv      = "S3LECT_CHAOS_KEY"
)

// report is one line a node process writes on stdout.
type report struct {
	Event string        `json:"e"` // start, work, end
	Term  uint64        `json:"term"`
	At    time.Duration `json:"t"` // CLOCK_MONOTONIC
	Cause string        `json:"cause,omitempty"`
}

// runNode is a node process: it campaigns in a loop and reports each
// leadership and every 20 ms of leader work, until SIGTERM, when it
// resigns and exits. Its elector logs JSON to stderr.
func runNode() int {
	id := os.Getenv(nodeEnv)
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(os.Getenv(endpointEnv)), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(minioUser, minioSecret, ""),
	})
	e, err := s3lect.New(s3lect.ElectorConfig{
		Store: s3store.New(client, bucket), LockfilePath: os.Getenv(keyEnv), ServerID: id,
		FrequentInterval: chaosFI, InfrequentInterval: chaosII, LeaderTimeout: chaosLT,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	out := json.NewEncoder(os.Stdout)
	for ctx.Err() == nil {
		lead, err := e.Campaign(ctx)
		if err != nil {
			break
		}
		out.Encode(report{Event: "start", Term: lead.Term(), At: mono()})
		for {
			at := mono() // read the time first: a pause after it cannot stretch the interval
			if lead.Context().Err() != nil {
				break
			}
			out.Encode(report{Event: "work", Term: lead.Term(), At: at})
			time.Sleep(20 * time.Millisecond)
		}
		out.Encode(report{Event: "end", Term: lead.Term(), At: mono(), Cause: fmt.Sprint(context.Cause(lead.Context()))})
	}
	e.Close()
	return 0
}

// node is a node process seen from the test.
type node struct {
	id     string
	cmd    *exec.Cmd
	stderr syncBuffer
	read   chan struct{} // closed when its stdout is drained
}

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

func startNode(t *testing.T, m *minio, led *ledger, id, key string) *node {
	t.Helper()
	n := &node{id: id, read: make(chan struct{})}
	n.cmd = exec.Command(os.Args[0], "-test.run=^$")
	n.cmd.Env = append(os.Environ(), nodeEnv+"="+id, endpointEnv+"=http://"+m.addr, keyEnv+"="+key)
	n.cmd.Stderr = &n.stderr
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(n.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r report
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			switch r.Event {
			case "start":
				led.start(id, r.Term, r.At)
			case "work":
				led.work(id, r.At)
			case "end":
				led.end(id, r.Cause)
			}
		}
	}()
	t.Cleanup(func() { n.kill() })
	return n
}

func (n *node) signal(sig syscall.Signal) { n.cmd.Process.Signal(sig) }

// kill stops the process if it still runs and waits for it.
func (n *node) kill() {
	n.cmd.Process.Kill()
	<-n.read
	n.cmd.Wait()
}

// stop asks the node to resign and exit, and waits.
func (n *node) stop() {
	n.signal(syscall.SIGTERM)
	<-n.read
	n.cmd.Wait()
}

func TestProcessFaults(t *testing.T) {
	t.Parallel() // each has its own MinIO, lockfile and ledger (see doc.go)
	m := startMinIO(t)
	led := newLedger()
	key := "chaos/processes.json"
	nodes := map[string]*node{}
	for _, id := range []string{"p1", "p2", "p3"} {
		nodes[id] = startNode(t, m, led, id, key)
	}
	var survived tally
	leader, term := led.waitLeader(t, 0)
	time.Sleep(2 * chaosLT)

	// SIGKILL: the leader dies without a word; a restarted instance rejoins.
	nodes[leader].kill()
	led.end(leader, "SIGKILL") // the process is gone: its leadership ended with it
	survived.add("SIGKILL of the leader")
	leader, term = led.waitLeader(t, term)
	nodes["p4"] = startNode(t, m, led, "p4", key)
	time.Sleep(2 * chaosLT)

	// SIGSTOP past the lease: the others take over; once resumed, the old
	// leader must find its context already cancelled and must not write.
	paused := nodes[leader]
	paused.signal(syscall.SIGSTOP)
	next, nextTerm := led.waitLeader(t, term)
	time.Sleep(chaosLT)
	// Work stamped before resumedAt was done before the stop took hold:
	// kill(2) only queues SIGSTOP, and under load the node can run a
	// moment longer (CI saw a work line 1 ms after a stamp taken just
	// before the signal). What must not happen is work after SIGCONT.
	resumedAt := mono()
	paused.signal(syscall.SIGCONT)
	deadline := time.Now().Add(10 * time.Second)
	var stale interval
	for {
		led.mu.Lock()
		for _, iv := range led.intervals {
			if iv.node == paused.id && iv.term == term {
				stale = *iv
			}
		}
		led.mu.Unlock()
		if stale.ended || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	switch {
	case !stale.ended:
		t.Errorf("resumed leader %s never reported its leadership's end", paused.id)
	case !strings.Contains(stale.cause, "lease expired"):
		t.Errorf("resumed leader %s ended with %q; want the lease expired", paused.id, stale.cause)
	case stale.lastWork >= resumedAt:
		t.Errorf("resumed leader %s did leader work at %.3fs, after it was resumed at %.3fs", paused.id, stale.lastWork.Seconds(), resumedAt.Seconds())
	}
	if logs := paused.stderr.String(); strings.Contains(logs, "renewal") {
		t.Errorf("resumed leader %s tried to renew:\n%s", paused.id, logs)
	}
	survived.add("SIGSTOP past the lease, then SIGCONT")
	_ = next
	time.Sleep(2 * chaosLT)

	// MinIO restarted under load: every node loses the store for longer
	// than a lease, then it comes back with the same data.
	m.stop()
	time.Sleep(2 * chaosLT)
	m.start()
	healed := mono()
	survived.add("MinIO restart")
	led.waitLeader(t, nextTerm)
	time.Sleep(bound)
	led.check(t, healed)

	for _, n := range nodes {
		if n.cmd.ProcessState == nil {
			n.stop()
		}
	}
	http.DefaultClient.CloseIdleConnections()
	survived.report(t, "process faults")
}
