package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

// TestVersion: `s3lect version`, `--version` and `-version` print the
// build's module version and Go version, and exit 0; `version -h` its
// usage.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		out, err := runBin(arg)
		if err != nil || !strings.HasPrefix(out, "s3lect ") || !strings.Contains(out, " go1.") {
			t.Errorf("s3lect %s = %q, %v; want \"s3lect VERSION ... goX\" and status 0", arg, out, err)
		}
	}
	for _, arg := range []string{"-h", "--help"} {
		out, err := runBin("version", arg)
		if err != nil || !strings.Contains(out, "usage: s3lect version") {
			t.Errorf("s3lect version %s = %q, %v; want its usage and status 0", arg, out, err)
		}
	}
	for _, arg := range []string{"extra", "-x"} {
		out, err := runBin("version", arg)
		if ee, ok := err.(interface{ ExitCode() int }); !ok || ee.ExitCode() != exitUsage ||
			!strings.Contains(out, fmt.Sprintf("unexpected argument %q", arg)) || !strings.Contains(out, "usage: s3lect version") {
			t.Errorf("s3lect version %s = %q, %v; want status %d, the argument named and the usage", arg, out, err, exitUsage)
		}
	}
}

// TestFolderKeyRefused: a lockfile URL or -key that ends in / names a
// folder, and is refused at once with the form to write.
func TestFolderKeyRefused(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-store", "s3://jobs/leader/", "--", "true"},
		{"status", "-store", "gs://jobs/leader/"},
		{"watch", "-bucket", "jobs", "-key", "leader/"},
		{"release", "-store", "s3://jobs/leader/"},
	} {
		out, err := runBin(args...)
		ee, _ := err.(interface{ ExitCode() int })
		if ee == nil || ee.ExitCode() != exitUsage || !strings.Contains(out, "names a folder") || !strings.Contains(out, "leader/lock.json") {
			t.Errorf("s3lect %q: %v\n%s\nwant status %d saying it names a folder and the form to write", args, err, out, exitUsage)
		}
	}
}

// TestNoCredentials: with no AWS credentials anywhere (empty config files,
// the metadata endpoint on a closed loopback port), run and status exit
// within seconds with status 5, naming the variables to set, instead of
// retrying for ever.
func TestNoCredentials(t *testing.T) {
	s3test.NoCredentials(t)
	// The three run side by side: each waits a few seconds for the SDK to
	// give up on the (closed) metadata endpoint.
	var procs []*proc
	for _, args := range [][]string{
		{"run", "-store", "s3://jobs/leader/x.json", "-endpoint", "http://127.0.0.1:1", "--", "true"},
		{"status", "-store", "s3://jobs/leader/x.json"},
		{"release", "-store", "s3://jobs/leader/x.json"},
	} {
		procs = append(procs, start(t, args...))
	}
	for _, p := range procs {
		args := p.cmd.Args[1:]
		if code := p.status(t); code != exitRefused {
			t.Errorf("s3lect %s without credentials exited %d; want %d\n%s", args[0], code, exitRefused, p.stderr.String())
		}
		for _, want := range []string{"no AWS credentials", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"} {
			if !strings.Contains(p.stderr.String(), want) {
				t.Errorf("s3lect %s without credentials did not name %s:\n%s", args[0], want, p.stderr.String())
			}
		}
	}
}

// TestLocalhostEndpoint: AWS_ENDPOINT_URL_S3=http://localhost:PORT works
// without -path-style (bucket.localhost names no host; it used to hang).
func TestLocalhostEndpoint(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", strings.Replace(endpoint, "127.0.0.1", "localhost", 1))
	where := "s3://" + bucket + "/cli/localhost.json"
	p := start(t, "run", "-store", where, "-try", "30s", "--", "true")
	if code := p.status(t); code != 0 {
		t.Fatalf("run on a localhost endpoint exited %d; want 0\n%s", code, p.stderr.String())
	}
	out, err := execCommand(bin, "status", "-json", "-store", where).Output()
	var rep statusReport
	if err != nil || json.Unmarshal(out, &rep) != nil || rep.State != "released" {
		t.Errorf("status on a localhost endpoint = %s, %v; want the released lockfile", out, err)
	}
}

// TestRetriedErrorOncePerCause: a store that fails every request the same
// way, with a new request ID each time, gets one log line, not one per
// request.
func TestRetriedErrorOncePerCause(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id [8]byte
		rand.Read(id[:])
		w.Header().Set("x-amz-request-id", hex.EncodeToString(id[:]))
		w.Header().Set("x-amz-id-2", hex.EncodeToString(id[:])+"host")
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>slow down</Message></Error>`))
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	// The two run side by side, each failing at its own pace.
	var procs []*proc
	for _, args := range [][]string{
		runArgs(srv.URL, "b", "cli/slow.json", "s", nil, []string{"true"}),
		{"watch", "-store", "s3://b/cli/slow.json", "-endpoint", srv.URL, "-frequent", "200ms", "-infrequent", "600ms", "-timeout", "1500ms"},
	} {
		procs = append(procs, start(t, args...))
	}
	for _, p := range procs {
		p.waitLine(t, eventually, "SlowDown")
	}
	time.Sleep(3 * time.Second) // about 15 failed reads at the 200ms pace
	for _, p := range procs {
		args := p.cmd.Args[1:]
		if n := strings.Count(p.stderr.String(), "SlowDown"); n != 1 {
			t.Errorf("s3lect %s printed %d lines for one failure repeated with new request IDs; want 1:\n%s", args[0], n, p.stderr.String())
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.status(t)
	}
}
