package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/internal/natstest"
	"github.com/s3lect/s3lect/internal/s3test"
)

// TestNATSStore runs s3lect on a NATS JetStream key-value bucket: a real
// nats-server (the pinned binary .ci/run installs), on port 19343.
func TestNATSStore(t *testing.T) {
	natstest.StartOn(t, 19343)
	nc, err := nats.Connect("nats://127.0.0.1:19343")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ELECTIONS"}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	url := "nats://127.0.0.1:19343/ELECTIONS/leader/job.json"
	p := start(t, "run", "-store", url, "-id", "n1", "-frequent", "200ms", "-infrequent", "600ms", "-timeout", "1500ms",
		"--", "sh", "-c", `echo "start $S3LECT_TERM $(date +%s%N)" >> `+dir+`/n1.log`)
	if code := p.status(t); code != 0 {
		t.Fatalf("run on NATS exited %d\n%s", code, p.stderr.String())
	}
	if evs := readLog(t, dir, "n1"); len(evs) != 1 || evs[0].term != "1" {
		t.Errorf("command on NATS ran %+v; want once with S3LECT_TERM 1", evs)
	}
	out, err := runBin("status", "-store", url)
	if err != nil || !strings.Contains(out, "state:   released") || !strings.Contains(out, "leader:  n1") {
		t.Errorf("status on NATS: %v\n%s\nwant released by n1", err, out)
	}
	out, err = runBin("status", "-store", "nats://127.0.0.1:19343/NOPE/leader/job.json")
	ee, _ := err.(interface{ ExitCode() int })
	if ee == nil || ee.ExitCode() != exitRefused || !strings.Contains(out, "nats kv add NOPE") {
		t.Errorf("status on a missing NATS bucket: %v\n%s\nwant status %d and how to create it", err, out, exitRefused)
	}
}

// startNATSWithAuth runs the pinned nats-server with JetStream and a user
// and password, on a free loopback port, and returns its host:port.
func startNATSWithAuth(t *testing.T, user, pass string) string {
	t.Helper()
	srv := os.Getenv("S3LECT_TEST_NATS_SERVER")
	if srv == "" {
		s3test.Need(t, "no nats-server: run `bash .ci/run`, or set S3LECT_TEST_NATS_SERVER to the pinned binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n}\nauthorization {\n  user: %q\n  password: %q\n}\n",
		port, filepath.Join(dir, "js"), user, pass)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(srv, "-c", conf)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("nats-server did not accept connections on %s within 10s", addr)
	return ""
}
