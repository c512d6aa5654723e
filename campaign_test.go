package s3lect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// Campaign as a caller sees it: waiting, giving up, a second call, Close
// during a call, the errors it returns, and what Leader() knows when it
// returns.

// TestCampaignRightAfterDone: once a Leadership's Done is closed, Campaign
// may be called again at once, even while the release is being written by
// a Resign running in another goroutine.
func TestCampaignRightAfterDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, memstore.New(), "a")
		l, err := n.e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 300 {
			go l.Resign(context.Background())
			<-l.Context().Done()
			next, err := n.e.Campaign(t.Context())
			if err != nil {
				t.Fatalf("trial %d: Campaign() right after Done = %v; want a leadership", trial, err)
			}
			if next.Term() != l.Term()+1 {
				t.Fatalf("trial %d: Term() = %d; want %d", trial, next.Term(), l.Term()+1)
			}
			l = next
		}
	})
}

// TestCampaignErrorChain: a permanent store failure reaches Campaign with
// the prefix and the key once.
func TestCampaignErrorChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		denied := store.Permanent(errors.New("AccessDenied"))
		st := &brokenStore{Store: memstore.New(), err: denied, fixed: make(chan struct{})}
		e := newTestElector(t, testConfig(st, "a"))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := e.Campaign(ctx)
		if !errors.Is(err, denied) {
			t.Fatalf("Campaign() = %v; want the permanent error", err)
		}
		if msg := err.Error(); strings.Count(msg, "s3lect:") != 1 || strings.Count(msg, testKey) != 1 {
			t.Errorf("Campaign() error = %q; want the s3lect: prefix and the key once each", msg)
		}
	})
}

// When Campaign returns, Leader() already names the new leader: the
// snapshot that Leader() and the peer handler read is published before
// the answer (it once lagged, and a peer asked right after the win heard
// "not the leader").
func TestLeaderKnownWhenCampaignReturns(t *testing.T) {
	for i := range 200 {
		e, err := New(ElectorConfig{Store: memstore.New(), LockfilePath: "k", ServerID: "w", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		lead, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		rec, ok := e.Leader()
		e.Close()
		if !ok || rec.LeaderID != "w" || rec.Term != lead.Term() {
			t.Fatalf("trial %d: Leader() right after Campaign = %+v, %v; want w at term %d", i, rec, ok, lead.Term())
		}
	}
}

func TestCampaignCancelledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, nodes, _ := stableGroup(t)
		n := newNode(t, old.n.fs.inner, "d")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := n.e.Campaign(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Campaign() = %v; want context.DeadlineExceeded", err)
		}
		if p := n.fs.count("put"); p != 0 {
			t.Errorf("a candidate that never won wrote %d times", p)
		}
		// The elector can campaign again, and wins after the leader resigns.
		out := make(chan won, 1)
		n.campaign(t.Context(), out)
		for _, m := range nodes[1:] {
			m.e.Close() // the other followers step aside
		}
		if err := old.l.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		w := mustWin(t, out)
		if w.l.Term() != old.l.Term()+1 {
			t.Errorf("Term() = %d; want %d", w.l.Term(), old.l.Term()+1)
		}
	})
}

func TestCampaignTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, memstore.New(), "a")
		l, err := n.e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.e.Campaign(t.Context()); !errors.Is(err, ErrCampaigning) {
			t.Errorf("Campaign while leading = %v; want ErrCampaigning", err)
		}
		if err := l.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		l2, err := n.e.Campaign(t.Context())
		if err != nil {
			t.Fatalf("Campaign after Resign = %v", err)
		}
		if l2.Term() != l.Term()+1 {
			t.Errorf("Term() = %d; want %d", l2.Term(), l.Term()+1)
		}
	})
}

func TestCloseDuringCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes, _ := stableGroup(t)
		n := newNode(t, nodes[0].fs.inner, "d")
		out := make(chan won, 1)
		n.campaign(t.Context(), out)
		time.Sleep(2 * time.Second)
		if err := n.e.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if w := <-out; !errors.Is(w.err, ErrClosed) {
			t.Errorf("Campaign() during Close = %v; want ErrClosed", w.err)
		}
	})
}

// TestNoteTermRaisesTheNextTakeover: a term handed in with NoteTerm (a
// fenced resource saw it, above what the election's objects show) makes
// the next takeover write a term above it; a lower one changes nothing.
func TestNoteTermRaisesTheNextTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, memstore.New(), "a")
		n.e.NoteTerm(41)
		l, err := n.e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if l.Term() != 42 {
			t.Fatalf("Term() after NoteTerm(41) = %d; want 42", l.Term())
		}
		l.Resign(t.Context())
		n.e.NoteTerm(7)
		if l, err = n.e.Campaign(t.Context()); err != nil {
			t.Fatal(err)
		}
		if l.Term() != 43 {
			t.Fatalf("Term() after NoteTerm(7) = %d; want 43", l.Term())
		}
	})
}
