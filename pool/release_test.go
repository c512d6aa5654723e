package pool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// quitter is one worker whose Work, for each shard, runs until its
// leadership's context ends or the test tells it to return (quit).
type quitter struct {
	st     *crashStore
	p      *Pool
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	quit map[string]chan struct{} // shard -> closed to make its Work return
}

func startQuitter(t *testing.T, mem *memstore.Store, id string, shards []string) *quitter {
	t.Helper()
	q := &quitter{st: &crashStore{Store: mem}, done: make(chan struct{}), quit: map[string]chan struct{}{}}
	p, err := New(Config{Store: q.st, Prefix: "pool/", ID: id, Shards: shards, Logger: quiet,
		Work: func(ctx context.Context, shard string, _ *s3lect.Leadership) {
			q.mu.Lock()
			ch := make(chan struct{})
			q.quit[shard] = ch
			q.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-ch:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	q.p = p
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	go func() { defer close(q.done); p.Run(ctx) }()
	return q
}

// finish makes shard's Work return by itself (its job done, or failed).
func (q *quitter) finish(shard string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.quit[shard])
}

// TestCutOffWithAReleaseInFlight (rev28b's finding, fixed: a release
// begun while Run's context lives ends a quarter LeaderTimeout after that
// context does; fails with -sim.mutate=serialrelease; the rest of this
// comment is the review's, describing the failure before the fix): a
// worker cut off from the store
// (its calls hang) whose Work for one shard returns by itself (a Work that
// fails when the network does is the common case) just before it is
// stopped (SIGTERM). The pool resigns that leadership and writes its
// release at once (loopState.release), under a timeout of its own, 3 ×
// FrequentInterval + 2 s (17 s at the defaults), detached from Run's
// context; the loop waits for it (its retries give up after 16.1 s). Run's
// context ends a second into that release: releaseAll, whose deadline is
// a quarter LeaderTimeout after the loop first sees the end, only starts
// once the release in flight has given up. So Run returns 18.85 s after
// its context ended (1.26 × LeaderTimeout; with a session still to release,
// a quarter LeaderTimeout more), where docs/pool-protocol.md
// ("Claims and takeovers") and TestCutOffWorkerStopsWithinItsLease say a
// cut-off worker stops within its lease. (The release's timeout predates
// today's changes; the review looked for every way a cut-off Run can
// overstay.)
//
// Fix idea: bound a release begun while Run's context lives by that
// context's end too: e.g. cancel rctx a quarter LeaderTimeout after ctx
// ends (context.AfterFunc(ctx, ...) arming a timer), and set stopAt from
// there, or send such releases through closing whenever ctx ends before
// they return.
func TestCutOffWithAReleaseInFlight(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		shards := []string{"s0", "s1", "s2", "s3"}
		q := startQuitter(t, mem, "w1", shards)
		defer func() { q.cancel(); <-q.done }()
		time.Sleep(2 * testLT)
		if got := len(q.p.Leading()); got != 4 {
			t.Fatalf("a lone worker leads %d of 4 shards after 2 × LeaderTimeout; want 4", got)
		}
		// Between two ticks (the loop idle): the store hangs from now on,
		// and s0's Work returns; the pool resigns it and writes its release.
		untilSlot(testFI / 2)
		q.st.cut.Store(true)
		q.finish("s0")
		time.Sleep(time.Second)
		stopped := time.Now()
		q.cancel()
		select {
		case <-q.done:
		case <-time.After(time.Hour):
			t.Fatalf("Run did not return within an hour of its context's end, cut off from the store")
		}
		d := time.Since(stopped)
		t.Logf("Run returned %v after its context ended", d)
		if lease := testLT - testLT/10; d > lease {
			t.Errorf("Run returned %v (%.2f × LeaderTimeout) after its context ended, cut off from the store, with a release in flight; want within its lease (%v)",
				d, float64(d)/float64(testLT), lease)
		}
	})
}

// TestResignsDuringAnOutageAreNotSerial (rev28b's finding, fixed: the
// releases are written off the loop, 8 at a time, each under its own
// deadline, and Exit is told when each is written or given up; fails with
// -sim.mutate=serialrelease; the rest of this comment is the review's,
// describing the failure before the fix): a worker leading 10 shards
// is cut off from the store (its calls hang), and every Work, failing with
// the outage, calls lead.Resign(context.Background()) (the release is
// written at once, as an elector's). The pool writes each release in
// turn on its loop (loopState.release, with a timeout of 3 ×
// FrequentInterval + 2 s each, 16.1 s of retries here), so the k-th
// Resign returns after k releases have given up: the last after about
// 161 s, 10.7 × LeaderTimeout, and the loop does nothing else meanwhile
// (no tick, no claim, no event). The issue's "a worker cut off from the
// store takes minutes to stop: its Run releases its shards one at a time"
// was fixed for Run's end (releaseAll) only.
//
// Fix idea: write releases off the loop, in parallel (8 at a time, as
// releaseAll), each under its own deadline, their outcomes taken in as
// events; so every Resign returns within one release's retries.
func TestResignsDuringAnOutageAreNotSerial(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		var shards []string
		for i := range 10 {
			shards = append(shards, fmt.Sprintf("s%d", i))
		}
		var (
			mu    sync.Mutex
			took  []time.Duration
			quits = map[string]chan struct{}{}
		)
		st := &crashStore{Store: mem}
		p, err := New(Config{Store: st, Prefix: "pool/", ID: "w1", Shards: shards, Logger: quiet,
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
				ch := make(chan struct{})
				mu.Lock()
				quits[shard] = ch
				mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-ch:
				}
				called := time.Now()
				l.Resign(context.Background())
				mu.Lock()
				took = append(took, time.Since(called))
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.Run(ctx) }()
		defer func() { cancel(); <-done }()
		time.Sleep(2 * testLT)
		if got := len(p.Leading()); got != 10 {
			t.Fatalf("a lone worker leads %d of 10 shards after 2 × LeaderTimeout; want 10", got)
		}
		untilSlot(testFI / 2) // between two ticks
		st.cut.Store(true)
		mu.Lock()
		for _, ch := range quits {
			close(ch)
		}
		mu.Unlock()
		time.Sleep(20 * testLT)
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(took)
		t.Logf("Resign calls returned after %v", took)
		if len(took) != 10 {
			t.Fatalf("%d of 10 Resign calls returned within 20 × LeaderTimeout", len(took))
		}
		if last, bound := took[9], 3*testFI+2*time.Second; last > bound {
			t.Errorf("the last Resign returned %v (%.1f × LeaderTimeout) after it was called, cut off from the store; want every one within one release's retries (%v)",
				last, float64(last)/float64(testLT), bound)
		}
	})
}
