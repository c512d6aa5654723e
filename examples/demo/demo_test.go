package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/s3lect/s3lect/internal/natstest"
	"github.com/s3lect/s3lect/internal/s3test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runDemo runs the demo at 50 times the default speed and checks that it
// told the whole story and drew a well-formed chart.
func runDemo(t *testing.T, o options) string {
	t.Helper()
	o.n, o.speed, o.svg = 3, 50, filepath.Join(t.TempDir(), "timeline.svg")
	if o.key == "" {
		o.key = "leader/demo-" + strings.ReplaceAll(t.Name(), "/", "-") + ".json"
	}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run() = %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"A crash here is a killed process", "became leader, term 1", "CRASH: process killed",
		"failover took", "from the crash to the next leader", "RESIGN", "handover took",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	// Three leaderships, terms rising: a takeover that raised the term
	// object and then lost may skip a term (docs/protocol.md, 1.1).
	var terms []string
	last := 0
	for _, m := range regexp.MustCompile(`became leader, term (\d+)`).FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		if n <= last {
			t.Errorf("term %d became leader after term %d; terms must rise:\n%s", n, last, out.String())
		}
		last = n
		terms = append(terms, "term "+m[1])
	}
	if len(terms) < 3 {
		t.Errorf("demo output shows %d leaderships; want 3 (start, after the crash, after the resignation):\n%s", len(terms), out.String())
	}
	svg, err := os.ReadFile(o.svg)
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
	for _, want := range append(terms, "crash → next leader", "Resign → next leader", "the process is killed") {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("timeline SVG lacks %q", want)
		}
	}
	return out.String()
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
