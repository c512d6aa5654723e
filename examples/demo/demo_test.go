package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/natstest"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runDemo runs the demo at 50 times the default speed and checks what it
// printed: the whole story, every step timed from the event it names
// (never a negative duration) or said to be untimed, and a well-formed
// chart. It checks nothing about how fast the machine kept up: on a
// loaded machine a lease may run out before the demo acts, and the demo
// says so instead of timing a step from a stale win.
func runDemo(t *testing.T, o options) string {
	t.Helper()
	o.n, o.speed, o.svg = 3, 50, filepath.Join(t.TempDir(), "timeline.svg")
	o.patience = 2 * time.Minute // a liveness bound for a loaded machine, not a speed limit
	if o.key == "" {
		o.key = "leader/demo-" + strings.ReplaceAll(t.Name(), "/", "-") + ".json"
	}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run() = %v\n%s", err, out.String())
	}
	checkStory(t, out.String())
	checkChart(t, o.svg, out.String())
	return out.String()
}

// checkStory checks the demo's printed story.
func checkStory(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"A crash here is a killed process", "became leader, term ", "CRASH: process killed", "RESIGN"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	for _, step := range []string{"failover", "handover"} {
		timed := regexp.MustCompile(step + ` took (\S+), from the`).FindStringSubmatch(out)
		switch {
		case timed != nil:
			if d, err := time.ParseDuration(strings.TrimSuffix(timed[1], ",")); err != nil || d < 0 {
				t.Errorf("the demo printed %q: want a duration of zero or more", timed[0])
			}
		case !strings.Contains(out, step+" not timed: "):
			t.Errorf("demo output says neither how long the %s took nor why it was not timed:\n%s", step, out)
		}
	}
	// At least three leaderships (start, after the crash, after the
	// resignation), terms rising: a takeover that raised the term object
	// and then lost may skip a term (docs/protocol.md, 1.1).
	last, n := 0, 0
	for _, m := range regexp.MustCompile(`became leader, term (\d+)`).FindAllStringSubmatch(out, -1) {
		term, _ := strconv.Atoi(m[1])
		if term <= last {
			t.Errorf("term %d became leader after term %d; terms must rise:\n%s", term, last, out)
		}
		last, n = term, n+1
	}
	if n < 3 {
		t.Errorf("demo output shows %d leaderships; want 3 or more (start, after the crash, after the resignation):\n%s", n, out)
	}
}

// checkChart checks the SVG timeline: well-formed, a span per leadership
// printed, and the gap of each step the demo timed labelled.
func checkChart(t *testing.T, path, out string) {
	t.Helper()
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("timeline SVG is not well-formed XML: %v", err)
			}
			break
		}
	}
	want := []string{"the process is killed"}
	for _, m := range regexp.MustCompile(`became leader, (term \d+)`).FindAllStringSubmatch(out, -1) {
		want = append(want, m[1])
	}
	if strings.Contains(out, "failover took") {
		want = append(want, "crash → next leader")
	}
	if strings.Contains(out, "handover took") {
		want = append(want, "Resign → next leader")
	}
	for _, w := range want {
		if !bytes.Contains(svg, []byte(w)) {
			t.Errorf("timeline SVG lacks %q", w)
		}
	}
}

// TestStepTook: a step is timed from the event it names to the next
// leadership; a leadership won before the event is said so, never timed
// as a negative duration (the demo printed "failover took -295ms" on a
// loaded machine, from a win left over from before the crash).
func TestStepTook(t *testing.T) {
	at := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	old := win{c: &candidate{id: "node-1"}}
	for _, tc := range []struct {
		next time.Duration // the next win, after at
		want string
	}{
		{450 * time.Millisecond, "failover took 450ms, from the crash to the next leader (LeaderTimeout 300ms)"},
		{0, "failover took 0s, from the crash"},
		{-295 * time.Millisecond, "failover not timed: node-2 took over 295ms before the crash, as node-1's lease had run out"},
	} {
		got := stepTook("failover", "from the crash to the next leader", "the crash", old, win{c: &candidate{id: "node-2"}, at: at.Add(tc.next)}, at, 300*time.Millisecond)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "took -") {
			t.Errorf("stepTook(next %v after) = %q; want %q", tc.next, got, tc.want)
		}
	}
}

// The demos that need no environment variables run side by side, each on
// a store of its own; the others use t.Setenv, which a parallel test
// cannot.

func TestDemoInMemory(t *testing.T) {
	t.Parallel()
	runDemo(t, options{})
}

func TestDemoPeerMode(t *testing.T) {
	t.Parallel()
	out := runDemo(t, options{peer: true})
	if !strings.Contains(out, "peer mode") {
		t.Errorf("demo did not say it ran in peer mode:\n%s", out)
	}
}

func TestDemoOnMinIO(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_S3", s3test.Endpoint(t))
	out := runDemo(t, options{bucket: s3test.Bucket(t), pathStyle: true})
	if !strings.Contains(out, "S3 bucket") {
		t.Errorf("demo did not say it ran on S3:\n%s", out)
	}
}

func TestDemoOnNATS(t *testing.T) {
	t.Parallel()
	out := runDemo(t, options{natsURL: natstest.Start(t)})
	if !strings.Contains(out, "NATS KV") {
		t.Errorf("demo did not say it ran on NATS:\n%s", out)
	}
}

func TestBadFlags(t *testing.T) {
	for _, o := range []options{{n: 1, speed: 10}, {n: 3, speed: 0}, {n: 3, speed: 10, bucket: "b", natsURL: "nats://x"}, {n: 3, speed: 10, bucket: "b", storeURL: "gs://b/k"}} {
		if err := run(context.Background(), o, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%+v) = nil; want an error", o)
		}
	}
}

// A bucket that does not exist is a permanent failure: the demo says so,
// names the fix and stops, instead of waiting for a leader forever.
func TestDemoMissingBucket(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_S3", s3test.Endpoint(t))
	var out bytes.Buffer
	o := options{n: 3, speed: 50, bucket: "s3lect-no-such-bucket-" + strconv.FormatInt(time.Now().UnixNano(), 36), pathStyle: true, key: "leader/demo.json"}
	err := run(context.Background(), o, &out)
	if err == nil {
		t.Fatalf("run() with a missing bucket = nil; want an error\n%s", out.String())
	}
	for _, want := range []string{"NoSuchBucket", "create it or fix the bucket name", "retrying will not fix it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run() = %q; want it to contain %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "cannot read the store: ") && !strings.Contains(out.String(), "campaign failed: ") {
		t.Errorf("demo did not show the store error it saw:\n%s", out.String())
	}
}

// A store nobody answers at is not permanent (it may come up), but the
// demo prints the error as soon as it sees it and gives up after a bound.
func TestDemoUnreachableStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // connections to addr are now refused
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+addr)
	t.Setenv("AWS_ACCESS_KEY_ID", "demo")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "demo-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	var out bytes.Buffer
	o := options{n: 2, speed: 100, bucket: "b", pathStyle: true, key: "leader/demo.json"}
	err = run(context.Background(), o, &out)
	if err == nil {
		t.Fatalf("run() with an unreachable store = nil; want an error\n%s", out.String())
	}
	if !strings.Contains(err.Error(), "no leader after") || !strings.Contains(err.Error(), "connect") {
		t.Errorf("run() = %q; want it to say no leader was elected and why (the connection error)", err)
	}
	if !strings.Contains(out.String(), "cannot read the store") {
		t.Errorf("demo waited silently; its output:\n%s", out.String())
	}
}

// No AWS credentials anywhere: the demo stops within seconds, naming the
// variables to set, instead of retrying for ever.
func TestDemoWithoutCredentials(t *testing.T) {
	s3test.NoCredentials(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1") // never reached: signing fails first
	var out bytes.Buffer
	o := options{n: 2, speed: 50, bucket: "b", key: "leader/demo.json"}
	err := run(context.Background(), o, &out)
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("run() without credentials = %v; want the permanent error naming AWS_ACCESS_KEY_ID\n%s", err, out.String())
	}
}

// AWS_ENDPOINT_URL_S3 on localhost works without -path-style (the SDK's
// default, bucket.localhost, names no host).
func TestDemoOnLocalhostEndpoint(t *testing.T) {
	ep := s3test.Endpoint(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", strings.Replace(ep, "127.0.0.1", "localhost", 1))
	out := runDemo(t, options{bucket: s3test.Bucket(t)})
	if !strings.Contains(out, "S3 bucket") {
		t.Errorf("demo did not say it ran on S3:\n%s", out)
	}
}

// TestWinnersSkipStaleWins: a win left in the channel from a leadership
// that has ended (under load a lease ran out before the crash, and another
// candidate took over) is never the leader the demo crashes or resigns,
// nor the outcome of a step: live returns the leadership that is live,
// and after only a win of a higher term.
func TestWinnersSkipStaleWins(t *testing.T) {
	mem := memstore.New()
	elect := func(id string) win {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: "leader/stale.json", ServerID: id,
			FrequentInterval: 50 * time.Millisecond, InfrequentInterval: 50 * time.Millisecond, LeaderTimeout: 5 * time.Second, // each leadership lasts to its Resign, however loaded the machine
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		lead, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return win{c: &candidate{id: id}, lead: lead, at: time.Now()}
	}
	wins := make(chan win, 3)
	a := elect("a")
	wins <- a
	a.lead.Resign(t.Context()) // its leadership ends before the demo looks
	b := elect("b")
	wins <- b
	ws := &winners{wins: wins, next: func(what string) (win, error) {
		select {
		case wn := <-wins:
			return wn, nil
		case <-time.After(5 * time.Second):
			return win{}, errors.New(what + ": no win")
		}
	}}
	if got, err := ws.live("test"); err != nil || got.c.id != "b" {
		t.Fatalf("live() = %v, %v; want b, the live leadership", got.c, err)
	}
	wins <- a // a stale win of a lower term
	b.lead.Resign(t.Context())
	c := elect("c")
	wins <- c
	if got, err := ws.after(b.lead.Term(), "test"); err != nil || got.c.id != "c" {
		t.Errorf("after(b's term) = %v, %v; want c, of a higher term", got.c, err)
	}
}
