package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// lockedBuffer is the program's output, written by the process while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgramStaysInTheGroupAfterAFencedJob: job returns when its Put is
// fenced, or when a Put's outcome is unknown after the fixed retries (a
// store restart of two seconds does it), and the elector's Leadership is
// usually still live then. A main loop that campaigned again at once would
// get ErrCampaigning and exit for good, so every fenced zombie and every
// leader that saw a blip of the store would leave the group. The example
// resigns (or waits for Done) before it campaigns again and logs the job's
// error as such; this test runs the built program and holds it to that.
func TestProgramStaysInTheGroupAfterAFencedJob(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	bin := filepath.Join(t.TempDir(), "checkpoint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The test seals the checkpoint above every term: start from none, so
	// that the test can run again on the same bucket.
	client := s3test.NewClient(t, nil, "", "")
	for _, k := range []string{checkpoint, lockfile, lockfile + ".term"} {
		if _, err := client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)}); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
	var out lockedBuffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "BUCKET="+bucket, "AWS_ENDPOINT_URL_S3="+endpoint, "S3_PATH_STYLE=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()

	deadline := time.Now().Add(60 * time.Second) // a liveness bound, not a speed limit
	for !strings.Contains(out.String(), "resuming at") {
		if time.Now().After(deadline) {
			t.Fatalf("the example did not lead within 60 s\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A newer leader seals the checkpoint (as a successor does first).
	st := s3store.New(client, bucket)
	w, _ := fence.New(st, 1<<40)
	if err := w.Seal(context.Background(), checkpoint); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatalf("the fenced leader's process exited; want it to stay and campaign again once its leadership is over\n%s", out.String())
	case <-time.After(5 * time.Second):
	}
}
