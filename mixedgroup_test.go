package s3lect

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// Groups whose members differ, in virtual time: leases of mixed length
// (a rolling configuration change), records without a lease, terms across
// foreign writes and deleted lockfiles (docs/protocol.md, 1.1, 1.2, 3.1).

// TestRollingConfigChangeKeepsOneLeader is the bug that version 3 fixes
// (docs/protocol.md, 3.1, "the record's lease"): an old leader on the
// defaults (5s/15s), a follower restarted with 1s/3s. The leader is cut
// off right after a renewal; the follower must not win while the old
// leader's context is live, which it did when each follower waited only
// its own LeaderTimeout.
func TestRollingConfigChangeKeepsOneLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out := make(chan won, 2)
		oldCfg := defaultsConfig(nil, "old")
		a := newNodeWith(t, mem, oldCfg)
		a.campaign(t.Context(), out)
		old := mustWin(t, out)
		ended := endedAt(old.l)
		time.Sleep(20 * time.Second) // a few renewals

		b := newNode(t, mem, "new") // 1s / 5s / 3s
		b.campaign(t.Context(), out)
		puts := a.fs.count("put")
		for a.fs.count("put") == puts {
			time.Sleep(time.Millisecond)
		}
		a.fs.set(func(f *faultStore) { f.blackhole = true }) // cut off right after a renewal
		last := lastPut(a)

		w := mustWin(t, out)
		if w.n != b {
			t.Fatalf("winner %s; want new", w.n.id)
		}
		<-old.l.Context().Done()
		t.Logf("won at +%v, old ended at +%v, cause %v", w.at.Sub(last.at), ended().Sub(last.at), context.Cause(old.l.Context()))
		if end := ended(); w.at.Before(end) {
			t.Errorf("new won %v after the old leader's last write, while the old leader's context stayed live until %v after it",
				w.at.Sub(last.at), end.Sub(last.at))
		}
		if w.at.Before(last.at.Add(DefaultLeaderTimeout)) {
			t.Errorf("new won %v after the old leader's last write; want at least the old leader's LeaderTimeout %v",
				w.at.Sub(last.at), DefaultLeaderTimeout)
		}
	})
}

// newNodeWith is newNode with a config of its own; its Store is set here.
func newNodeWith(t *testing.T, mem store.Store, cfg ElectorConfig) *node {
	t.Helper()
	fs := newFaultStore(mem)
	cfg.Store = fs
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s) error = %v", cfg.ServerID, err)
	}
	t.Cleanup(func() { e.Close() })
	return &node{id: cfg.ServerID, fs: fs, e: e}
}

// TestTermsNeverRepeat: terms 1 and 2 are held; then the original s3lect
// writes a record without a term, or the lockfile is deleted; a freshly
// started elector, which never saw terms 1 and 2, must still win a higher
// term (docs/protocol.md, 1.1). Before the term object it won term 1.
func TestTermsNeverRepeat(t *testing.T) {
	cases := []struct {
		name  string
		after func(t *testing.T, mem *memstore.Store)
	}{
		{"ForeignWriteWithoutTerm", func(t *testing.T, mem *memstore.Store) {
			_, tag, err := mem.Get(t.Context(), testKey)
			if err != nil {
				t.Fatal(err)
			}
			orig := []byte(`{"leaderID":"orig","leaderAddr":"orig:1","lastUpdated":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`)
			if _, err := mem.PutIfMatch(t.Context(), testKey, orig, tag); err != nil {
				t.Fatal(err)
			}
		}},
		{"LockfileDeleted", func(t *testing.T, mem *memstore.Store) { mem.Delete(testKey) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				out := make(chan won, 1)
				for i, id := range []string{"a", "b"} {
					n := newNode(t, mem, id)
					n.campaign(t.Context(), out)
					w := mustWin(t, out)
					if w.l.Term() != uint64(i+1) {
						t.Fatalf("%s won term %d; want %d", id, w.l.Term(), i+1)
					}
					if err := w.l.Resign(t.Context()); err != nil {
						t.Fatal(err)
					}
					n.e.Close()
				}
				tc.after(t, mem)
				c := newNode(t, mem, "c")
				c.campaign(t.Context(), out)
				if w := mustWin(t, out); w.l.Term() != 3 {
					t.Errorf("fresh elector won term %d after terms 1 and 2; want 3", w.l.Term())
				}
			})
		})
	}
}

// TestErrCrossChecksTheWallClock: a VM paused and resumed has a monotonic
// clock that did not count the pause, but a wall clock set right on
// resume. Err then reports the lease's end, though the monotonic deadline
// has not passed; with the wall clock where the monotonic one is, Err
// reports nothing.
func TestErrCrossChecksTheWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out := make(chan won, 1)
		a := newNode(t, mem, "a")
		var jump atomic.Int64 // how far the wall clock is ahead; the expiry timer reads it
		a.e.clock.WallNow = func() time.Time { return time.Now().Add(time.Duration(jump.Load())) }
		a.campaign(t.Context(), out)
		w := mustWin(t, out)
		time.Sleep(testLT / 2)
		if err := w.l.Context().Err(); err != nil {
			t.Fatalf("Err() on a live leadership = %v; want nil", err)
		}
		jump.Store(int64(testLT)) // resumed: the wall clock jumped
		if err := w.l.Context().Err(); err == nil || !errors.Is(context.Cause(w.l.Context()), ErrLeaseExpired) {
			t.Fatalf("Err() after the wall clock passed the lease = %v (cause %v); want the lease's end", err, context.Cause(w.l.Context()))
		}
	})
}

// TestLeaderChecksExpiry: Leader() reports a follower's leader only until
// the follower's knowledge runs out, even when the run loop has not
// stepped since (a stuck or starved loop, a process resumed after a pause).
func TestLeaderChecksExpiry(t *testing.T) {
	e := newTestElector(t, testConfig(memstore.New(), "f"))
	rec := Record{LeaderID: "x", Term: 3}
	show := func(until time.Time) {
		e.snap.Store(&snapshot{status: status{change: Change{Leader: rec}, known: true, until: until}, next: make(chan struct{})})
	}
	show(e.clock.Now().Add(time.Hour))
	if got, ok := e.Leader(); !ok || got != rec {
		t.Errorf("Leader() before the knowledge runs out = %+v, %v; want x", got, ok)
	}
	show(e.clock.Now().Add(-time.Nanosecond))
	if got, ok := e.Leader(); ok {
		t.Errorf("Leader() after the knowledge ran out = %+v; want none", got)
	}
}
