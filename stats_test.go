package s3lect

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

func TestStatsFollowAnElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, a, w := soleLeader(t)
		b := newNode(t, mem, "b")
		b.e.Changes()
		time.Sleep(2 * testLT) // a renews; b settles into infrequent reads
		// A renewal is due at this very instant: let every call made now
		// return and be counted before comparing with the store's log.
		synctest.Wait()
		sa, sb := a.e.Stats(), b.e.Stats()
		if sa.Term != w.l.Term() || sa.Mode != "leader" || sa.Won != 1 {
			t.Errorf("leader Stats = Term %d Mode %q Won %d; want %d leader 1", sa.Term, sa.Mode, sa.Won, w.l.Term())
		}
		if puts := sa.StoreRequests["put"]["ok"]; puts != uint64(a.fs.count("put")) {
			t.Errorf("leader put/ok = %d; want the %d puts its store saw", puts, a.fs.count("put"))
		}
		if age := time.Since(sa.LastRenewal); age < 0 || age > testFI {
			t.Errorf("leader's LastRenewal %v ago; want within a FrequentInterval", age)
		}
		if sb.Term != w.l.Term() || sb.Mode != "infrequent" || sb.Won != 0 || !sb.LastRenewal.IsZero() {
			t.Errorf("follower Stats = %+v; want a follower in infrequent mode that knows term %d", sb, w.l.Term())
		}
		if got := sb.StoreRequests["get"]["ok"]; got == 0 || sb.LastRead.IsZero() {
			t.Errorf("follower get/ok = %d, LastRead %v; want reads counted", got, sb.LastRead)
		}

		b.fs.set(func(f *faultStore) { f.failAll = true })
		time.Sleep(testII + 2*time.Second)
		synctest.Wait()
		failed := 0
		for _, c := range b.fs.log() {
			if c.op == "get" && c.err != nil {
				failed++
			}
		}
		sb = b.e.Stats()
		if got := sb.StoreRequests["get"]["error"]; got == 0 || got != uint64(failed) {
			t.Errorf("follower get/error = %d; want the %d failed gets its store saw", got, failed)
		}
		for _, op := range []string{"get", "put"} {
			var sum uint64
			for _, n := range sb.StoreRequests[op] {
				sum += n
			}
			if sum != uint64(b.fs.count(op)) {
				t.Errorf("follower %s calls = %d over %v; want the %d its store saw", op, sum, sb.StoreRequests[op], b.fs.count(op))
			}
		}
		b.fs.set(func(f *faultStore) { f.failAll = false })

		if err := w.l.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		sa = a.e.Stats()
		if sa.Ended["resigned"] != 1 || sa.Mode == "leader" {
			t.Errorf("after Resign: Ended %v Mode %q; want one resigned, a follower mode", sa.Ended, sa.Mode)
		}
		l, err := b.e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mem.Set(testKey, []byte(`{"leaderID":"intruder","leaderAddr":"","lastUpdated":"2026-01-01T00:00:00Z","term":99}`))
		<-l.Context().Done()
		synctest.Wait()
		for l.e.Stats().Ended["lost"] != 1 {
			time.Sleep(time.Millisecond)
		}
	})
}

func TestStatsClassifies(t *testing.T) {
	var r recorder
	for _, err := range []error{nil, store.ErrNotFound, store.ErrPreconditionFailed, context.DeadlineExceeded,
		context.Canceled, store.Permanent(errors.New("denied")), errors.New("boom")} {
		r.storeCall("get", err)
	}
	r.peerCall(nil)
	r.peerCall(context.DeadlineExceeded)
	for _, c := range []error{ErrLeadershipLost, ErrLeaseExpired, errSlowTakeover, errCloseResign, context.Canceled, errors.New("parent")} {
		r.won()
		r.ended(c)
	}
	s := r.counters()
	for _, res := range []string{"ok", "not_found", "precondition_failed", "timeout", "canceled", "permanent", "error"} {
		if s.StoreRequests["get"][res] != 1 {
			t.Errorf("StoreRequests[get %s] = %d; want 1 (all: %v)", res, s.StoreRequests["get"][res], s.StoreRequests)
		}
	}
	if s.PeerRequests["ok"] != 1 || s.PeerRequests["timeout"] != 1 {
		t.Errorf("PeerRequests = %v; want ok 1 timeout 1", s.PeerRequests)
	}
	want := map[string]uint64{"lost": 1, "expired": 2, "resigned": 1, "canceled": 1, "other": 1}
	for k, v := range want {
		if s.Ended[k] != v {
			t.Errorf("Ended = %v; want %v", s.Ended, want)
			break
		}
	}
	if s.Won != 6 {
		t.Errorf("Won = %d; want 6", s.Won)
	}
}
