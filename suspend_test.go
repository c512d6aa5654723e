package s3lect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
)

// TestSuspendedLeaderIsNotTakenOverLive: issue 43's suspend. A leader's
// host is suspended for S right after a renewal (its monotonic clock
// stops, real time goes on, its calls wait for the resume), and the
// leader is cut off the store right after its next renewal lands. A
// follower that reads after every renewal (InfrequentInterval =
// FrequentInterval) saw the renewal before the suspend and the one
// after; its elapsed-time bound (docs/protocol.md, 3.2) trusts the held
// time between them. It must not take over before the leader's context
// has ended. With the local clock counting only monotonic time (mutation
// monoclock) the held time grows by a FrequentInterval where S more
// passed, and the follower took over during the live lease.
func TestSuspendedLeaderIsNotTakenOverLive(t *testing.T) {
	defer setMutation(t)()
	for _, sleep := range []time.Duration{4 * time.Second, 6 * time.Second, 8 * time.Second, 8400 * time.Millisecond, 12 * time.Second} {
		for _, after := range []time.Duration{time.Millisecond, 1500 * time.Millisecond, 4 * time.Second} {
			t.Run(fmt.Sprintf("suspend %v, %v after a renewal", sleep, after), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { suspendedLeader(t, sleep, after) })
			})
		}
	}
}

func suspendedLeader(t *testing.T, sleep, after time.Duration) {
	w := simworld.NewWorld(simworld.Faults{})
	cfg := func(id string, st *simworld.Store) ElectorConfig {
		return ElectorConfig{Store: st, LockfilePath: testKey, ServerID: id, FrequentInterval: 5 * time.Second,
			InfrequentInterval: 5 * time.Second, LeaderTimeout: 15 * time.Second, Logger: quietLogger}
	}
	ls := w.NewStore(rand.New(rand.NewPCG(1, 1)), false)
	le, err := New(cfg("leader", ls))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		suspAt   time.Time // zero until the suspend
		leadEnd  time.Time
		takenAt  time.Time
		takenErr error
		overlap  bool // the leader's context was live when the follower won
	)
	le.clock.Slept = func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if suspAt.IsZero() {
			return 0
		}
		return min(time.Since(suspAt), sleep)
	}
	start := time.Now()
	lead, err := le.Campaign(t.Context())
	if err != nil {
		t.Fatalf("Campaign() = %v", err)
	}
	context.AfterFunc(lead.Context(), func() {
		mu.Lock()
		defer mu.Unlock()
		leadEnd = time.Now()
	})
	fe, err := New(cfg("follower", w.NewStore(rand.New(rand.NewPCG(2, 2)), false)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		fl, err := fe.Campaign(ctx)
		live := lead.Context().Err() == nil // asks the leader's clocks too (not under mu: Slept takes it)
		mu.Lock()
		takenAt, takenErr, overlap = time.Now(), err, live
		mu.Unlock()
		if err == nil {
			fl.Resign(context.Background())
		}
	}()

	// The renewal at 20 s lands at once; the host sleeps after it.
	time.Sleep(time.Until(start.Add(20*time.Second + after)))
	mu.Lock()
	suspAt = time.Now()
	mu.Unlock()
	ls.Pause(sleep)
	ls.Partition(true) // cut off right after its next write lands
	<-done
	le.Close()
	fe.Close()

	mu.Lock()
	defer mu.Unlock()
	if takenErr != nil {
		t.Fatalf("follower's Campaign() = %v", takenErr)
	}
	if overlap || takenAt.Before(leadEnd) {
		t.Errorf("follower took over at %v while the leader's context was live (it ended at %v; suspended %v at %v)",
			takenAt.Sub(start), leadEnd.Sub(start), sleep, suspAt.Sub(start))
	}
}
