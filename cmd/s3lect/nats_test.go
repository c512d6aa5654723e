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
// nats-server (the pinned binary .ci/run installs), on a free port.
func TestNATSStore(t *testing.T) {
	srv := natstest.Start(t)
	natsBucket(t, srv, "ELECTIONS")

	dir := t.TempDir()
	url := srv + "/ELECTIONS/leader/job.json"
	p := start(t, runOn(url, "n1", "sh", "-c", `echo "start $S3LECT_TERM $(date +%s%N)" >> `+dir+`/n1.log`)...)
	if code := p.status(t); code != 0 {
		t.Fatalf("run on NATS exited %d\n%s", code, p.stderr.String())
	}
	// Once, with a term: 1 on an idle machine, higher where a takeover's
	// write was answered after its lease (a loaded machine) and spent it.
	if evs := readLog(t, dir, "n1"); len(evs) != 1 || !positive(evs[0].term) {
		t.Errorf("command on NATS ran %+v; want once with a positive S3LECT_TERM", evs)
	}
	out, err := runBin("status", "-store", url)
	if err != nil || !strings.Contains(out, "state:   released") || !strings.Contains(out, "leader:  n1") {
		t.Errorf("status on NATS: %v\n%s\nwant released by n1", err, out)
	}
	out, err = runBin("status", "-store", srv+"/NOPE/leader/job.json")
	ee, _ := err.(interface{ ExitCode() int })
	if ee == nil || ee.ExitCode() != exitRefused || !strings.Contains(out, "nats kv add NOPE") {
		t.Errorf("status on a missing NATS bucket: %v\n%s\nwant status %d and how to create it", err, out, exitRefused)
	}
}

// startNATSWithAuth runs the pinned nats-server with JetStream and a user
// and password, on a free loopback port, and returns its host:port.
func startNATSWithAuth(t *testing.T, user, pass string) string {
	t.Helper()
	return strings.TrimPrefix(natstest.StartWithAuth(t, user, pass), "nats://")
}

// natsBucket creates the key-value bucket named bucket on the server at
// url and returns it, connected until the test ends.
func natsBucket(t *testing.T, url, bucket string) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
