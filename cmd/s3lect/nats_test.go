package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/internal/natstest"
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
