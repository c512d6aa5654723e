package simworld

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// A call whose caller gives up while it is on its way still lands: the
// write is there after the caller saw its context's error.
func TestWriteLandsAfterTheCallerGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWorld(Faults{Latency: time.Second})
		st := w.NewStore(rand.New(rand.NewPCG(1, 2)), true)
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			_, err := st.PutIfMatch(ctx, "k", []byte("v"), "")
			cancel()
			if err == nil {
				t.Fatalf("try %d: the put returned within 1 ms with up to 1 s each way", i)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("PutIfMatch() = %v; want the caller's deadline", err)
			}
			time.Sleep(3 * time.Second)
			if d, _, err := w.Mem.Get(context.Background(), "k"); err == nil {
				if string(d) != "v" {
					t.Fatalf("the store holds %q; want v", d)
				}
				return
			}
			if i == 20 {
				t.Fatal("20 writes given up on, none landed")
			}
		}
	})
}

// A partition after the next write cuts the node off right after that
// write lands: the caller loses the reply, and later calls never arrive.
// Heal lets them through again; Calm ends a crash's cut only by restart.
func TestPartitionAfterTheNextWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWorld(Faults{})
		st := w.NewStore(rand.New(rand.NewPCG(1, 2)), true)
		st.Partition(true)
		if _, err := st.PutIfMatch(context.Background(), "k", []byte("v"), ""); err != nil {
			t.Fatalf("the write before the cut: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, _, err := st.Get(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get() after the cut = %v; want it to hang until the caller gives up", err)
		}
		st.Heal()
		if d, _, err := st.Get(context.Background(), "k"); err != nil || string(d) != "v" {
			t.Fatalf("Get() after Heal = %q, %v; want v", d, err)
		}
		st.Crash()
		st.Heal()
		if crashed := st.Calm(); !crashed || !st.Crashed() {
			t.Fatalf("Calm() = %v, Crashed() = %v after a crash; want true, true", crashed, st.Crashed())
		}
	})
}

// A paused node's calls are sent when it runs again.
func TestPauseHoldsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWorld(Faults{})
		st := w.NewStore(rand.New(rand.NewPCG(1, 2)), true)
		st.Pause(5 * time.Second)
		start := time.Now()
		if _, err := st.PutIfMatch(context.Background(), "k", []byte("v"), ""); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("the write returned after %v; want 5s, the pause", d)
		}
	})
}

// A Rewind store that crashes loses its last writes, is down for the
// outage, and hands the lost revisions out again for other bytes.
func TestRewindLosesAndReusesRevisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rw := &Rewind{}
		ctx := context.Background()
		tag1, _ := rw.PutIfMatch(ctx, "k", []byte("a"), "")
		tag2, _ := rw.PutIfMatch(ctx, "k", []byte("b"), tag1)
		kept, lost := rw.Crash(1, time.Second)
		if len(kept) != 1 || len(lost) != 1 || string(lost[0].Data) != "b" {
			t.Fatalf("Crash(1) kept %d, lost %+v; want 1 kept, b lost", len(kept), lost)
		}
		if _, _, err := rw.Get(ctx, "k"); !errors.Is(err, ErrStoreDown) || !rw.Down() {
			t.Fatalf("Get() during the outage = %v; want ErrStoreDown", err)
		}
		time.Sleep(time.Second)
		if _, err := rw.PutIfMatch(ctx, "k", []byte("c"), tag2); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("a write on the lost revision = %v; want ErrPreconditionFailed", err)
		}
		tag3, err := rw.PutIfMatch(ctx, "k", []byte("c"), tag1)
		if err != nil || tag3 != tag2 {
			t.Fatalf("a write on the kept revision = %q, %v; want the lost revision %q again", tag3, err, tag2)
		}
	})
}

// Overlap finds a leadership that began before the one before it ended,
// or while it was live.
func TestLedgerOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Ledger
		a := l.Start("x", "n1", 1)
		time.Sleep(time.Second)
		l.End(a)
		b := l.Start("x", "n2", 2)
		if i := Overlap(l.Snapshot()["x"]); i != -1 {
			t.Fatalf("Overlap() = %d for leaderships one after the other", i)
		}
		l.Start("x", "n3", 3)
		if i := Overlap(l.Snapshot()["x"]); i != 2 {
			t.Fatalf("Overlap() = %d with n3 starting while n2 leads; want 2", i)
		}
		if node, ok := l.Live("x"); !ok || node != "n2" {
			t.Fatalf("Live() = %s, %v; want n2", node, ok)
		}
		l.Kill("n2")
		if b.End.IsZero() {
			t.Fatal("Kill left n2's leadership live")
		}
	})
}
