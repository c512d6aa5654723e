package s3lect

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// Changes and Observe: the first value, errors, slow readers, and
// channels given up before Close.

func subscriptions(t *testing.T, e *Elector) int {
	t.Helper()
	r := countSubsReq{make(chan int, 1)}
	if !e.ask(t.Context(), r) {
		t.Fatal("the run loop did not take the request")
	}
	return <-r.n
}

// bubbleGoroutines counts the goroutines of the synctest bubble that calls
// it (tests of this package never run in parallel, so there is one).
// runtime.NumGoroutine would count the process's other goroutines too,
// such as an earlier test's TLS handshakes still winding down.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), ", synctest bubble ")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestObserveLeavesNoResidue: a thousand Observe calls whose contexts end
// leave no subscription, goroutine or channel behind.
func TestObserveLeavesNoResidue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, memstore.New(), "w")
		base := n.e.Observe(t.Context())
		<-base // the first read is done
		synctest.Wait()
		goroutines := bubbleGoroutines()
		if goroutines < 2 {
			t.Fatalf("%d goroutines in the bubble; want the test's and the elector's (is the stack format understood?)", goroutines)
		}
		chans := make([]<-chan Change, 1000)
		cancels := make([]context.CancelFunc, 1000)
		for i := range chans {
			ctx, cancel := context.WithCancel(t.Context())
			chans[i], cancels[i] = n.e.Observe(ctx), cancel
		}
		if got := subscriptions(t, n.e); got != 1001 {
			t.Fatalf("%d subscriptions; want 1001", got)
		}
		for _, cancel := range cancels {
			cancel()
		}
		synctest.Wait()
		for i, ch := range chans {
			for range ch { // drain the first value; then it must be closed
			}
			_ = i
		}
		if got := subscriptions(t, n.e); got != 1 {
			t.Errorf("%d subscriptions after their contexts ended; want 1", got)
		}
		synctest.Wait()
		if got := bubbleGoroutines(); got != goroutines {
			t.Errorf("%d goroutines after the contexts ended; want %d as before", got, goroutines)
		}
		// Changes keeps working as before, and is closed by Close.
		ch := n.e.Changes()
		if c := <-ch; c.Leader.LeaderID != "" || c.Err != nil {
			t.Errorf("first Changes() value = %+v; want no leader, no error", c)
		}
		n.e.Close()
		if _, ok := <-ch; ok {
			t.Error("Changes() channel still open after Close")
		}
	})
}

// brokenStore fails every call with err until fixed.
type brokenStore struct {
	store.Store
	err   error
	fixed chan struct{}
}

func (b *brokenStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	select {
	case <-b.fixed:
		return b.Store.Get(ctx, key)
	default:
		return nil, "", b.err
	}
}

// TestChangeErrTellsNoLeaderFromNoStore: a watcher sees the store's error
// while reads fail, and nil once they succeed again.
func TestChangeErrTellsNoLeaderFromNoStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		missing := store.Permanent(errors.New("NoSuchBucket: the bucket does not exist"))
		st := &brokenStore{Store: memstore.New(), err: missing, fixed: make(chan struct{})}
		e := newTestElector(t, testConfig(st, "w"))
		ch := e.Observe(t.Context())
		c := <-ch
		if !errors.Is(c.Err, missing) {
			t.Fatalf("Change.Err = %v; want the store's error", c.Err)
		}
		if msg := c.Err.Error(); strings.Count(msg, "s3lect:") != 1 || strings.Count(msg, testKey) != 1 {
			t.Errorf("Change.Err = %q; want the s3lect: prefix and the key once each", msg)
		}
		close(st.fixed)
		c = <-ch
		if c.Err != nil {
			t.Errorf("Change.Err after the store recovered = %v; want nil", c.Err)
		}
	})
}

func TestChangesSlowReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		a, b := newNode(t, mem, "a"), newNode(t, mem, "b")
		watcher := newNode(t, mem, "w")
		never := watcher.e.Changes() // never read until the end
		live := watcher.e.Changes()
		var seen []Change
		done := make(chan struct{})
		go func() {
			defer close(done)
			for c := range live {
				seen = append(seen, c)
			}
		}()
		terms := 0
		for range 5 { // leadership passes back and forth
			for _, n := range []*node{a, b} {
				l, err := n.e.Campaign(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				terms++
				time.Sleep(20 * time.Second)
				if err := l.Resign(t.Context()); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Second)
			}
		}
		last := <-never
		watcher.e.Close()
		<-done
		if _, ok := <-never; ok {
			t.Error("unread channel held more than one value")
		}
		if last.Leader.LeaderID != "" {
			t.Errorf("unread channel's value = %+v; want the latest state, no leader", last)
		}
		leaders := 0
		for _, c := range seen {
			if c.Leader.LeaderID != "" {
				leaders++
			}
		}
		if leaders != terms {
			t.Errorf("watcher saw %d leaders; want %d (%+v)", leaders, terms, seen)
		}
	})
}
