package main

import (
	"context"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/k8slock"
	"github.com/s3lect/s3lect/store/s3store"
)

// lines collects what the managers log.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lines) wait(t *testing.T, s string, within time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l.has(s) {
			return time.Now()
		}
	}
	t.Fatalf("no %q within %v; the managers logged:\n%s", s, within, l)
	return time.Time{}
}

// TestTwoManagersElectOnMinIO runs the example's manager twice on MinIO,
// with no Kubernetes API server behind its rest.Config (the election
// needs none): one leads, the other waits; when the leader's context
// ends it stops its work and releases, and the other leads within a
// retry period rather than a lease.
func TestTwoManagersElectOnMinIO(t *testing.T) {
	bucket := s3test.Bucket(t)
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // nothing listens there
	out := &lines{}
	logger := log.New(out, "", log.Lmicroseconds)
	start := func(id string) (context.CancelFunc, chan error) {
		lock, err := k8slock.New(k8slock.Config{Store: st, Key: "leader/k8smanager-test.json", Identity: id})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, cfg, lock, logger) }()
		return cancel, done
	}
	cancelA, doneA := start("a")
	out.wait(t, "a: leading, term 1", 30*time.Second)
	cancelB, doneB := start("b")
	time.Sleep(3 * time.Second)
	if out.has("b: leading") {
		t.Fatalf("b leads while a does:\n%s", out)
	}
	stopped := time.Now()
	cancelA()
	if err := <-doneA; err != nil {
		t.Errorf("a's manager returned %v; want nil after its context ended", err)
	}
	if !out.has("a: stopped leading") {
		t.Errorf("a's manager returned before its work stopped:\n%s", out)
	}
	led := out.wait(t, "b: leading, term 2", 15*time.Second)
	t.Logf("b leads %.2fs after a's context ended (a released; a lease is 15s, a retry period 2s, jittered up to 4.4s)", led.Sub(stopped).Seconds())
	cancelB()
	if err := <-doneB; err != nil {
		t.Errorf("b's manager returned %v; want nil", err)
	}
}
