package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// A fenced node process (TestFencedWritesUnderFaults) runs when
// fenceNodeEnv names it; it reaches the store at endpointEnv.
const (
	fenceNodeEnv = "S3LECT_CHAOS_FENCE_NODE"
	fenceBucket  = "chaos-fence" // versioned: its history is the checker's
	fenceLock    = "fence/lock.json"
	counterKey   = "fence/counter"
)

// fenceReport is one line a fenced node writes on stdout.
type fenceReport struct {
	Event  string        `json:"e"` // start, work, write, end
	Term   uint64        `json:"term"`
	At     time.Duration `json:"t"` // CLOCK_MONOTONIC; for a write, when it was sent
	Op     string        `json:"op,omitempty"`
	Result string        `json:"r,omitempty"` // landed, fenced, unknown
	Value  uint64        `json:"v,omitempty"`
	Err    string        `json:"err,omitempty"`
}

// runFenceNode is a fenced node: it campaigns in a loop and, while it
// believes it leads, seals the counter with its term and then, every
// 100 ms, reads it and writes it plus one through the fence. It checks
// its leadership before the 100 ms sleep and writes after it, without
// checking again: a pause during the sleep makes it a zombie that writes
// on resuming, with a context of its own, as a worker that checked
// "am I leader" and then wrote.
func runFenceNode() int {
	id := os.Getenv(fenceNodeEnv)
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(os.Getenv(endpointEnv)), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(minioUser, minioSecret, ""),
	})
	st := s3store.New(client, fenceBucket)
	e, err := s3lect.New(s3lect.ElectorConfig{
		Store: st, LockfilePath: fenceLock, ServerID: id,
		FrequentInterval: chaosFI, InfrequentInterval: chaosII, LeaderTimeout: chaosLT,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
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
		term := lead.Term()
		out.Encode(fenceReport{Event: "start", Term: term, At: mono()})
		w, err := fence.New(st, term)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		sealed, fenced := false, false
		for {
			at := mono()
			if lead.Context().Err() != nil {
				break
			}
			out.Encode(fenceReport{Event: "work", Term: term, At: at})
			time.Sleep(100 * time.Millisecond)
			if fenced {
				continue // a fenced writer stops writing
			}
			r := fenceReport{Event: "write", Term: term, At: mono()}
			wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if !sealed {
				r.Op = "seal"
				err = w.Seal(wctx, counterKey)
				sealed = err == nil
			} else {
				r.Op = "put"
				var data []byte
				data, _, err = w.Get(wctx, counterKey)
				if err == nil {
					r.Value, err = strconv.ParseUint(string(data), 10, 64)
				} else if errors.Is(err, store.ErrNotFound) {
					err = nil
				}
				if err == nil {
					r.Value++
					err = w.Put(wctx, counterKey, strconv.AppendUint(nil, r.Value, 10))
				}
			}
			cancel()
			switch {
			case err == nil:
				r.Result = "landed"
			case errors.Is(err, fence.ErrFenced):
				r.Result, fenced = "fenced", true
			default:
				r.Result, r.Err = "unknown", err.Error()
			}
			out.Encode(r)
		}
		out.Encode(fenceReport{Event: "end", Term: term, At: mono(), Err: fmt.Sprint(context.Cause(lead.Context()))})
	}
	e.Close()
	return 0
}

// fencedNode is a fenced node process with its own proxy to MinIO.
type fencedNode struct {
	id    string
	proxy *toxiproxy.Proxy
	cmd   *exec.Cmd
	read  chan struct{}
	log   syncBuffer
}

// fenceWorld is what the test sees of the fenced nodes: their reports.
type fenceWorld struct {
	mu      sync.Mutex
	reports map[string][]fenceReport // by node
}

func (fw *fenceWorld) add(id string, r fenceReport) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.reports[id] = append(fw.reports[id], r)
}

// leader returns a node that believes it leads now (its last report is
// start, work or write), with its term.
func (fw *fenceWorld) leader(after uint64) (string, uint64) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for id, rs := range fw.reports {
		if n := len(rs); n > 0 && rs[n-1].Event != "end" && rs[n-1].Term > after {
			return id, rs[n-1].Term
		}
	}
	return "", 0
}

// afterCheck returns as soon as node reports a new check of its
// leadership ("work"): it then sleeps 100 ms before its next write.
func (fw *fenceWorld) afterCheck(t *testing.T, node string) {
	t.Helper()
	fw.mu.Lock()
	seen := len(fw.reports[node])
	fw.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		fw.mu.Lock()
		rs := fw.reports[node]
		fw.mu.Unlock()
		for _, r := range rs[seen:] {
			if r.Event == "work" {
				return
			}
		}
		seen = len(rs)
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s reported no check of its leadership within 10s", node)
}

func (fw *fenceWorld) waitLeader(t *testing.T, after uint64) (string, uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a liveness bound, not a speed limit
	for time.Now().Before(deadline) {
		if id, term := fw.leader(after); id != "" {
			return id, term
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no fenced node led with a term above %d within 60s", after)
	return "", 0
}

func startFencedNode(t *testing.T, srv *toxiproxy.ApiServer, m *minio, fw *fenceWorld, id string) *fencedNode {
	t.Helper()
	n := &fencedNode{id: id, read: make(chan struct{})}
	n.proxy = toxiproxy.NewProxy(srv, id, "127.0.0.1:0", m.addr)
	if err := n.proxy.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(os.Args[0], "-test.run=^$")
	n.cmd.Env = append(os.Environ(), fenceNodeEnv+"="+id, endpointEnv+"=http://"+n.proxy.Listen)
	n.cmd.Stderr = &n.log
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
			var r fenceReport
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				fw.add(id, r)
			}
		}
	}()
	t.Cleanup(func() { n.kill(); n.proxy.Stop() })
	return n
}

func (n *fencedNode) kill() {
	if n.cmd.ProcessState == nil {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.cmd.Process.Kill()
		<-n.read
		n.cmd.Wait()
	}
}

// partition drops everything between the node and the store, both ways,
// until heal: requests hang, as behind a broken network.
func partition(t *testing.T, p *toxiproxy.Proxy) (heal func()) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":"partition-%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, stream, stream))); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, stream := range []string{"upstream", "downstream"} {
			p.Toxics.RemoveToxic(context.Background(), "partition-"+stream)
		}
	}
}

// TestFencedWritesUnderFaults runs fenced node processes against MinIO,
// each through a toxiproxy of its own, under a nemesis: the leader
// partitioned from the store, a follower partitioned, the leader killed
// with SIGKILL, the leader stopped with SIGSTOP past its lease and
// resumed, MinIO restarted. Every node that believes it leads writes a
// counter through the fence. The checker reads the counter's history from
// the versioned bucket: no landed write of a lower term after a higher.
// The test, outside the processes, also measures the time two processes
// believed they led, and the leaderless time after each healed fault.
func TestFencedWritesUnderFaults(t *testing.T) {
	t.Parallel() // a MinIO, bucket and processes of its own, as the other fault tests
	m := startMinIO(t)
	direct := m.client(t, m.addr)
	if _, err := direct.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(fenceBucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := direct.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{Bucket: aws.String(fenceBucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("enable versioning: %v", err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	fw := &fenceWorld{reports: map[string][]fenceReport{}}
	nodes := map[string]*fencedNode{}
	next := 0
	spawn := func() {
		next++
		id := fmt.Sprint("f", next)
		nodes[id] = startFencedNode(t, srv, m, fw, id)
	}
	for range 3 {
		spawn()
	}
	var (
		faults  tally
		heals   []time.Duration // when each fault healed
		pauses  []pauseWindow
		settle  = func() { time.Sleep(2 * chaosLT) }
		outage  = 2 * chaosLT // how long a fault lasts: past the lease
		_, term = fw.waitLeader(t, 0)
	)
	settle()
	for round := range 2 {
		// The leader partitioned from the store.
		leader, _ := fw.waitLeader(t, 0)
		heal := partition(t, nodes[leader].proxy)
		time.Sleep(outage)
		heal()
		heals = append(heals, mono())
		faults.add("leader partitioned from the store")
		settle()

		// A follower partitioned.
		leader, _ = fw.waitLeader(t, 0)
		for id, n := range nodes {
			if id != leader && n.cmd.ProcessState == nil {
				heal := partition(t, n.proxy)
				time.Sleep(outage)
				heal()
				heals = append(heals, mono())
				faults.add("follower partitioned")
				break
			}
		}
		settle()

		// SIGSTOP past the lease, then SIGCONT: the zombie writes on resuming.
		leader, term = fw.waitLeader(t, 0)
		fw.afterCheck(t, leader) // stop it in its sleep, between its check and its write
		p := pauseWindow{node: leader, term: term, from: mono()}
		nodes[leader].cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(outage + chaosLT)
		p.to = mono()
		nodes[leader].cmd.Process.Signal(syscall.SIGCONT)
		pauses = append(pauses, p)
		heals = append(heals, p.to)
		faults.add("leader SIGSTOP past its lease, then SIGCONT")
		settle()

		// SIGKILL of the leader; a new process joins.
		leader, _ = fw.waitLeader(t, 0)
		nodes[leader].kill()
		fw.add(leader, fenceReport{Event: "end", At: mono(), Err: "SIGKILL"})
		heals = append(heals, mono())
		faults.add("leader SIGKILL")
		spawn()
		settle()

		if round == 0 {
			// MinIO restarted: every node loses the store past a lease.
			m.stop()
			time.Sleep(outage)
			m.start()
			heals = append(heals, mono())
			faults.add("MinIO restart")
			settle()
		}
	}
	for _, n := range nodes {
		if n.cmd.ProcessState == nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
			<-n.read
			n.cmd.Wait()
		}
	}

	// The checker: the counter's history, oldest first, from the bucket.
	terms := versionTerms(t, direct)
	violations := 0
	for i := 1; i < len(terms); i++ {
		if terms[i] < terms[i-1] {
			violations++
			t.Errorf("the counter's version %d has term %d, after a version of term %d", i, terms[i], terms[i-1])
		}
	}
	// What the processes said, and what the observer saw.
	var attempted, landed, fencedN, unknown int
	fw.mu.Lock()
	for id, rs := range fw.reports {
		for _, r := range rs {
			if r.Event != "write" {
				continue
			}
			attempted++
			switch r.Result {
			case "landed":
				landed++
			case "fenced":
				fencedN++
			default:
				unknown++
			}
			for i, p := range pauses {
				if id == p.node && r.Term == p.term && r.At > p.to {
					if r.Result == "landed" {
						t.Errorf("%s, resumed after a pause past its lease, landed a %s of its old term %d", id, r.Op, r.Term)
					}
					pauses[i].zombieWrites++
				}
			}
		}
	}
	ivs := beliefs(fw.reports)
	fw.mu.Unlock()
	if landed > len(terms) {
		t.Errorf("the processes saw %d writes land; the bucket holds %d versions of the counter", landed, len(terms))
	}
	overlap, maxOverlap := overlaps(ivs)
	var gaps []string
	for _, h := range heals {
		gaps = append(gaps, fmt.Sprintf("%.2fs", leaderless(ivs, h).Seconds()))
	}
	summary := fmt.Sprintf("fenced writes under process faults (%d processes over time, MinIO, a toxiproxy each):%s; writes attempted=%d landed=%d refused-as-fenced=%d outcome-unknown=%d, counter versions in the bucket=%d, violations=%d; two processes believing they lead: %.2fs in all, at most %.2fs at once; leaderless after each healed fault: %s",
		len(nodes), faultList(&faults), attempted, landed, fencedN, unknown, len(terms), violations, overlap.Seconds(), maxOverlap.Seconds(), strings.Join(gaps, " "))
	t.Log(summary)
	for _, p := range pauses {
		if p.zombieWrites == 0 {
			t.Errorf("%s, stopped between its check and its write, wrote nothing with its old term %d after it resumed", p.node, p.term)
		}
	}
	if path := os.Getenv("S3LECT_CHAOS_SUMMARY"); path != "" && !t.Failed() {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, summary)
			f.Close()
		}
	}
}

type pauseWindow struct {
	node         string
	term         uint64
	from, to     time.Duration
	zombieWrites int // writes of its old term it sent after resuming
}

func faultList(c *tally) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, c.m[k])
	}
	return b.String()
}

// versionTerms reads every version of the counter, oldest first, and
// returns the term in each one's fence header.
func versionTerms(t *testing.T, c *s3.Client) []uint64 {
	t.Helper()
	type ver struct {
		id string
		at time.Time
	}
	var vers []ver
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(fenceBucket), Prefix: aws.String(counterKey)}
	for {
		out, err := c.ListObjectVersions(t.Context(), in)
		if err != nil {
			t.Fatalf("list the counter's versions: %v", err)
		}
		for _, v := range out.Versions {
			if aws.ToString(v.Key) == counterKey {
				vers = append(vers, ver{aws.ToString(v.VersionId), aws.ToTime(v.LastModified)})
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	// The listing is newest first; LastModified breaks no ties MinIO
	// makes (it orders by modification time, in nanoseconds).
	slices.Reverse(vers)
	slices.SortStableFunc(vers, func(a, b ver) int { return a.at.Compare(b.at) })
	terms := make([]uint64, 0, len(vers))
	for _, v := range vers {
		out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(fenceBucket), Key: aws.String(counterKey), VersionId: aws.String(v.id)})
		if err != nil {
			t.Fatalf("get version %s: %v", v.id, err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatalf("read version %s: %v", v.id, err)
		}
		line, _, _ := bytes.Cut(body, []byte("\n"))
		var term uint64
		for _, f := range strings.Fields(string(line)) {
			if s, ok := strings.CutPrefix(f, "term="); ok {
				term, _ = strconv.ParseUint(s, 10, 64)
			}
		}
		if term == 0 {
			t.Fatalf("version %s of the counter has no fence header: %q", v.id, line)
		}
		terms = append(terms, term)
	}
	return terms
}

// belief is a span during which a node believed it led: from the start
// of a leadership to its last check or write.
type belief struct {
	node     string
	from, to time.Duration
}

func beliefs(reports map[string][]fenceReport) []belief {
	var out []belief
	for id, rs := range reports {
		var cur *belief
		for _, r := range rs {
			switch r.Event {
			case "start":
				if cur != nil {
					out = append(out, *cur)
				}
				cur = &belief{node: id, from: r.At, to: r.At}
			case "work", "write":
				if cur != nil && r.At > cur.to {
					cur.to = r.At
				}
			case "end":
				if cur != nil {
					out = append(out, *cur)
					cur = nil
				}
			}
		}
		if cur != nil {
			out = append(out, *cur)
		}
	}
	return out
}

// overlaps returns how long, in all and at most at once, two nodes'
// beliefs overlapped.
func overlaps(ivs []belief) (total, most time.Duration) {
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			if ivs[i].node == ivs[j].node {
				continue
			}
			if d := min(ivs[i].to, ivs[j].to) - max(ivs[i].from, ivs[j].from); d > 0 {
				total += d
				most = max(most, d)
			}
		}
	}
	return total, most
}

// leaderless returns how long after at no node believed it led.
func leaderless(ivs []belief, at time.Duration) time.Duration {
	first := time.Duration(-1)
	for _, iv := range ivs {
		if iv.from <= at && at <= iv.to {
			return 0
		}
		if iv.from > at && (first < 0 || iv.from < first) {
			first = iv.from
		}
	}
	if first < 0 {
		return -1
	}
	return first - at
}
