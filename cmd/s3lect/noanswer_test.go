package main

import (
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStoreNeverAnswered: against an endpoint where nothing listens, run
// warns at once, naming the endpoint and what to check, and exits with
// status 6 after -connect-timeout; status exits 6 with the same hint. No
// store server is needed: the endpoint is a closed loopback port.
func TestStoreNeverAnswered(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	dead := "http://127.0.0.1:" + freePort(t) // nothing listens on it
	p := start(t, runArgs(dead, "jobs", "cli/never.json", "n", []string{"-connect-timeout", "2s"}, []string{"true"})...)
	p.waitLine(t, eventually, "WARNING: the store at "+dead)
	seen := time.Now()
	if code := p.status(t); code != exitNoAnswer {
		t.Fatalf("run against a dead endpoint exited %d; want %d\n%s", code, exitNoAnswer, p.stderr.String())
	}
	out := p.stderr.String()
	for _, want := range []string{"Check that the store runs and that the endpoint is right", "AWS_ENDPOINT_URL_S3", "giving up after -connect-timeout 2s", "has not answered since start, for -connect-timeout 2s; giving up"} {
		if !strings.Contains(out, want) {
			t.Errorf("run's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "WARNING") > strings.Index(out, "giving up.") {
		t.Errorf("the warning came after the give-up line:\n%s", out)
	}
	// Each line of the run's narration says when it was printed, and none
	// comes after the give-up line (a "store error persists" line did).
	stamped := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z s3lect: WARNING: the store at `)
	if !stamped.MatchString(out) {
		t.Errorf("the warning line lacks its time stamp (YYYY-MM-DDThh:mm:ss.mmmZ s3lect: ...):\n%s", out)
	}
	if rest := out[strings.Index(out, "giving up.")+len("giving up."):]; strings.Contains(rest, "s3lect:") {
		t.Errorf("a line came after the give-up line:\n%s", out)
	}
	// The warning says it once (not "has not answered since start: the
	// store has not answered since this elector started"), names only the
	// s3:// store's endpoint settings, and no "(retrying)" line comes
	// while the run gives up.
	for _, unwanted := range []string{"since this elector started", "nats://", "(retrying)"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("run's output has %q:\n%s", unwanted, out)
		}
	}
	t.Logf("exited %v after the warning was seen", time.Since(seen).Round(time.Millisecond))

	st := start(t, "status", "-store", "s3://jobs/cli/never.json", "-endpoint", dead)
	if code := st.status(t); code != exitNoAnswer || !strings.Contains(st.stderr.String(), "Check that the store runs") ||
		!strings.Contains(st.stderr.String(), dead) {
		t.Errorf("status against a dead endpoint exited %d; want %d naming the endpoint and the hint\n%s", code, exitNoAnswer, st.stderr.String())
	}

	// watch is no elector: it says so in its own words, and gives up
	// after its -connect-timeout like run, naming the endpoint.
	w := start(t, "watch", "-store", "s3://jobs/cli/never.json", "-endpoint", dead, "-connect-timeout", "2s")
	w.waitLine(t, eventually, "has not answered since watch started")
	code := w.status(t)
	out = w.stderr.String()
	if code != exitNoAnswer || !strings.Contains(out, "s3lect watch: the store at "+dead) || !strings.Contains(out, "for -connect-timeout 2s; giving up") ||
		!strings.Contains(out, "Check that the store runs") || strings.Contains(out, "since this elector started") || strings.Contains(out, "nats://") {
		t.Errorf("watch against a dead endpoint exited %d; want %d, naming the endpoint, in a watcher's words\n%s", code, exitNoAnswer, out)
	}
}

// TestStatusOnASilentEndpoint: an endpoint that takes connections and
// never answers is reported like a closed one after status's
// -connect-timeout (default 10 s, where it waited 30 s in silence).
func TestStatusOnASilentEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	silent := "http://" + ln.Addr().String()
	st := start(t, "status", "-store", "s3://jobs/cli/silent.json", "-endpoint", silent, "-connect-timeout", "1s")
	if code := st.status(t); code != exitNoAnswer || !strings.Contains(st.stderr.String(), "Check that the store runs") ||
		!strings.Contains(st.stderr.String(), silent) {
		t.Errorf("status against a silent endpoint exited %d; want %d naming the endpoint and the hint\n%s", code, exitNoAnswer, st.stderr.String())
	}
	bad := start(t, "status", "-store", "s3://jobs/cli/silent.json", "-endpoint", silent, "-connect-timeout", "0s")
	if code := bad.status(t); code != exitUsage {
		t.Errorf("status -connect-timeout 0s exited %d; want %d (usage)", code, exitUsage)
	}
}
