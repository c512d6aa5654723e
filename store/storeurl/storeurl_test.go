package storeurl_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/internal/cloudtest"
	"github.com/s3lect/s3lect/internal/natstest"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/storeurl"
)

func TestBadURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "is not a URL"},
		{"bucket/key", "is not a URL"},
		{"s3:bucket/key", "is not a URL"},
		{"ftp://b/k", "the ftp:// scheme is not supported"},
		{"s3://bucket", "want s3://bucket/path/to/lock.json"},
		{"s3://bucket/", "want s3://bucket/path/to/lock.json"},
		{"gs:///key", "want gs://bucket/path/to/lock.json"},
		{"gs://user@bucket/key", "want gs://bucket/path/to/lock.json"},
		{"azblob://container", "want azblob://container/path/to/lock.json"},
		{"azblob://c:10000/key", "want azblob://c/path/to/lock.json"},
		{"nats://127.0.0.1:4222/bucket", "want nats://host:port/bucket/path/to/lock.json"},
		{"nats:///bucket/key", "want nats://host:port/bucket/path/to/lock.json"},
		{"gs://b/lock#a.json", "has a query or fragment"},
		{"azblob://c/lock.json?x=1", "has a query or fragment"},
		{"s3://b/lock.json?", "has a query or fragment"},
		{"s3://jobs/leader/", "names a folder (the key ends in /); name the lockfile itself, e.g. s3://jobs/leader/lock.json"},
		{"nats://127.0.0.1:4222/bucket/leader/", "names a folder"},
	} {
		_, err := storeurl.Open(t.Context(), tc.url, storeurl.Options{})
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want ErrBadURL saying %q", tc.url, err, tc.want)
		}
	}
	_, err := storeurl.Open(t.Context(), "gs://b/k", storeurl.Options{S3PathStyle: true})
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "for s3:// URLs") {
		t.Errorf("Open(gs://, S3PathStyle) = %v; want ErrBadURL saying S3 options are for s3://", err)
	}
	_, err = storeurl.Open(t.Context(), "s3://b/k", storeurl.Options{S3Endpoint: "127.0.0.1:9000"})
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "not an http:// or https:// URL") {
		t.Errorf("Open(S3Endpoint without scheme) = %v; want ErrBadURL", err)
	}
}

// roundTrip writes and reads a record through an opened lockfile.
func roundTrip(t *testing.T, lf *storeurl.Lockfile, wantURL, wantKey string) {
	t.Helper()
	if lf.URL != wantURL || lf.Key != wantKey {
		t.Errorf("Open() = URL %q, Key %q; want %q, %q", lf.URL, lf.Key, wantURL, wantKey)
	}
	tag, err := lf.Store.PutIfMatch(t.Context(), lf.Key, []byte(`{"n":1}`), "")
	if err != nil {
		t.Fatalf("PutIfMatch() on %s = %v", lf.URL, err)
	}
	data, got, err := lf.Store.Get(t.Context(), lf.Key)
	if err != nil || string(data) != `{"n":1}` || got != tag {
		t.Errorf("Get() on %s = %q, %q, %v; want the object just written with ETag %q", lf.URL, data, got, err, tag)
	}
}

func TestOpenS3(t *testing.T) {
	bucket := s3test.Bucket(t)
	url := "s3://" + bucket + "/leader/job.json"
	lf, err := storeurl.Open(t.Context(), url, storeurl.Options{S3Endpoint: s3test.Endpoint(t), S3PathStyle: true})
	if err != nil {
		t.Fatalf("Open(%s) = %v", url, err)
	}
	defer lf.Close()
	roundTrip(t, lf, url, "leader/job.json")
}

func TestOpenNATS(t *testing.T) {
	addr := natstest.Start(t)
	nc, err := nats.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "ELECTIONS"}); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(addr, "nats://")
	lf, err := storeurl.Open(t.Context(), "nats://"+host+"/ELECTIONS/leader/job.json", storeurl.Options{})
	if err != nil {
		t.Fatalf("Open(nats://) = %v", err)
	}
	defer lf.Close()
	roundTrip(t, lf, "nats://"+host+"/ELECTIONS/leader/job.json", "leader/job.json")

	_, err = storeurl.Open(t.Context(), "nats://"+host+"/NOPE/leader/job.json", storeurl.Options{})
	if !store.IsPermanent(err) || !strings.Contains(err.Error(), "nats kv add NOPE") {
		t.Errorf("Open(missing NATS bucket) = %v; want a permanent error saying how to create it", err)
	}
}

// A NATS server that cannot be reached is reported, each time, to
// Retrying; without Retrying, Open returns the failure.
func TestOpenNATSReportsAnUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + ln.Addr().String() + "/ELECTIONS/leader/job.json"
	ln.Close() // nothing answers there now

	if _, err := storeurl.Open(t.Context(), url, storeurl.Options{}); err == nil || store.IsPermanent(err) || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Open(unreachable) = %v; want a transient error naming the server", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var reports []error
	_, err = storeurl.Open(ctx, url, storeurl.Options{Retrying: func(err error) {
		reports = append(reports, err)
		if len(reports) == 2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || len(reports) != 2 {
		t.Errorf("Open(unreachable, Retrying) = %v after %d reports; want context.Canceled after the 2 reports before the cancel", err, len(reports))
	}
}

func TestOpenAzure(t *testing.T) {
	cloudtest.Azure(t, "elections")
	lf, err := storeurl.Open(t.Context(), "azblob://elections/leader/job.json", storeurl.Options{})
	if err != nil {
		t.Fatalf("Open(azblob://) = %v", err)
	}
	defer lf.Close()
	roundTrip(t, lf, "azblob://elections/leader/job.json", "leader/job.json")
}

// A server without JetStream is refused for good, with the flag to add.
func TestOpenNATSWithoutJetStream(t *testing.T) {
	bin := natstest.Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-a", host, "-p", port) // no -js
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = storeurl.Open(t.Context(), "nats://"+addr+"/ELECTIONS/leader/job.json", storeurl.Options{})
	if !store.IsPermanent(err) || !strings.Contains(err.Error(), "start nats-server with -js") {
		t.Errorf("Open(server without JetStream) = %v; want a permanent error saying to start it with -js", err)
	}
}
