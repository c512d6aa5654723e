package s3lect

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/s3lect/s3lect/store/memstore"
)

// TestRetrySchedule: docs/protocol.md, 6: an attempt, a retry 100 ms after
// the first failure, another 1 s after the second, then the election
// decides.
func TestRetrySchedule(t *testing.T) {
	b := retrySchedule()
	for round := range 2 { // and again after a Reset, as every call starts
		var got []time.Duration
		for d := b.NextBackOff(); d != backoff.Stop; d = b.NextBackOff() {
			got = append(got, d)
			if len(got) > 5 {
				break
			}
		}
		if len(got) != 2 || got[0] != 100*time.Millisecond || got[1] != time.Second {
			t.Fatalf("round %d: retry delays %v; want [100ms 1s]", round, got)
		}
		b.Reset()
	}
}

// TestCloseReturnsAFailedRelease: a release Close had to write that could
// not be written reaches Close's return.
func TestCloseReturnsAFailedRelease(t *testing.T) {
	synctest.Test(t, closeReturnsAFailedRelease)
}

func closeReturnsAFailedRelease(t *testing.T) {
	fs := newFaultStore(memstore.New())
	e, err := New(ElectorConfig{Store: fs, LockfilePath: testKey, ServerID: "w",
		FrequentInterval: 20 * time.Millisecond, InfrequentInterval: 40 * time.Millisecond, LeaderTimeout: 100 * time.Millisecond,
		Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(t.Context()); err != nil {
		t.Fatal(err)
	}
	fs.set(func(f *faultStore) { f.failAll = true })
	err = e.Close()
	if !errors.Is(err, errInjected) {
		t.Fatalf("Close() = %v; want the release's failure (%v)", err, errInjected)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}
