package s3lect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// Scaled-down timings for the virtual-time tests.
const (
	testFI  = time.Second
	testII  = 5 * time.Second
	testLT  = 3 * time.Second
	testKey = "leader/test.json"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTestElector returns New(cfg), closed when the test ends; an error
// ends the test.
func newTestElector(t *testing.T, cfg ElectorConfig) *Elector {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// defaultsConfig is testConfig at the default intervals (5s, 30s, 15s).
func defaultsConfig(st store.Store, id string) ElectorConfig {
	c := testConfig(st, id)
	c.FrequentInterval, c.InfrequentInterval, c.LeaderTimeout = DefaultFrequentInterval, DefaultInfrequentInterval, DefaultLeaderTimeout
	return c
}

func testConfig(st store.Store, id string) ElectorConfig {
	return ElectorConfig{
		Store:              st,
		LockfilePath:       testKey,
		ServerID:           id,
		ServerAddr:         id + ".test:8443",
		FrequentInterval:   testFI,
		InfrequentInterval: testII,
		LeaderTimeout:      testLT,
		Logger:             quietLogger,
	}
}

// node is one elector on its own faultStore over a shared memstore.
type node struct {
	id string
	fs *faultStore
	e  *Elector
}

func newNode(t *testing.T, mem store.Store, id string) *node {
	t.Helper()
	fs := newFaultStore(mem)
	e, err := New(testConfig(fs, id))
	if err != nil {
		t.Fatalf("New(%s) error = %v", id, err)
	}
	t.Cleanup(func() { e.Close() })
	return &node{id: id, fs: fs, e: e}
}

// won is a Campaign's outcome, stamped with the virtual time it returned.
type won struct {
	n   *node
	l   *Leadership
	err error
	at  time.Time
}

// campaign starts n campaigning and reports its outcome on out.
func (n *node) campaign(ctx context.Context, out chan<- won) {
	go func() {
		l, err := n.e.Campaign(ctx)
		out <- won{n: n, l: l, err: err, at: time.Now()}
	}()
}

// endedAt returns a function reporting when l's context was cancelled.
func endedAt(l *Leadership) func() time.Time {
	var (
		mu sync.Mutex
		at time.Time
	)
	context.AfterFunc(l.Context(), func() {
		mu.Lock()
		defer mu.Unlock()
		at = time.Now()
	})
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

func mustWin(t *testing.T, out <-chan won) won {
	t.Helper()
	w := <-out
	if w.err != nil {
		t.Fatalf("Campaign(%s) error = %v; want a leadership", w.n.id, w.err)
	}
	return w
}

// lastPut returns n's last successful write of the lockfile.
func lastPut(n *node) call {
	var last call
	for _, c := range n.fs.log() {
		if c.op == "put" && c.key == testKey && c.err == nil {
			last = c
		}
	}
	return last
}

// firstSeen returns when n's reads first returned etag.
func firstSeen(t *testing.T, n *node, etag string) time.Time {
	t.Helper()
	for _, c := range n.fs.log() {
		if c.op == "get" && c.err == nil && c.etag == etag {
			return c.at
		}
	}
	t.Fatalf("%s never read etag %s", n.id, etag)
	return time.Time{}
}

func TestThreeCandidatesElectOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out := make(chan won, 3)
		var nodes []*node
		for _, id := range []string{"a", "b", "c"} {
			n := newNode(t, mem, id)
			nodes = append(nodes, n)
			n.campaign(t.Context(), out)
		}
		w := mustWin(t, out)
		if w.l.Term() != 1 {
			t.Errorf("first Term() = %d; want 1", w.l.Term())
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case other := <-out:
			t.Fatalf("second Campaign returned (%s, %v) while %s leads", other.n.id, other.err, w.n.id)
		default:
		}
		if err := w.l.Context().Err(); err != nil {
			t.Fatalf("leader context after a minute: %v; want live", err)
		}
		if puts := w.n.fs.count("put"); puts < 60 {
			t.Errorf("leader wrote %d times in a minute; want at least 60 renewals", puts)
		}
		for _, n := range nodes {
			got := <-n.e.Changes()
			want := Change{IsLeader: n == w.n}
			if got.IsLeader != want.IsLeader || got.Leader.LeaderID != w.n.id || got.Leader.Term != 1 {
				t.Errorf("%s: first Changes() value = %+v; want leader %s term 1, IsLeader %v", n.id, got, w.n.id, want.IsLeader)
			}
			if rec, ok := n.e.Leader(); !ok || rec.LeaderID != w.n.id {
				t.Errorf("%s: Leader() = %+v, %v; want %s", n.id, rec, ok, w.n.id)
			}
		}
	})
}

// stableGroup elects a as leader, then starts b and c campaigning and lets
// the group settle into the infrequent interval.
func stableGroup(t *testing.T) (lead won, nodes []*node, out chan won) {
	t.Helper()
	mem := memstore.New()
	out = make(chan won, 3)
	a := newNode(t, mem, "a")
	a.campaign(t.Context(), out)
	lead = mustWin(t, out)
	nodes = []*node{a}
	for _, id := range []string{"b", "c"} {
		n := newNode(t, mem, id)
		n.campaign(t.Context(), out)
		nodes = append(nodes, n)
	}
	time.Sleep(30 * time.Second)
	return lead, nodes, out
}

func TestLeaderCrashFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, nodes, out := stableGroup(t)
		oldEnd := endedAt(old.l)
		time.Sleep(1500 * time.Millisecond) // crash mid-way between renewals
		old.n.fs.set(func(f *faultStore) { f.blackhole = true })
		last := lastPut(old.n)

		w := mustWin(t, out)
		if w.l.Term() != old.l.Term()+1 {
			t.Errorf("new Term() = %d; want %d", w.l.Term(), old.l.Term()+1)
		}
		seen := firstSeen(t, w.n, last.reply)
		if latest := seen.Add(testLT); w.at.After(latest) {
			t.Errorf("takeover at %v; want no later than LeaderTimeout after the last write was first seen (%v)", w.at, latest)
		}
		if w.at.Sub(last.at) > testLT+testII {
			t.Errorf("takeover %v after the last write; want at most LeaderTimeout plus one poll (%v)", w.at.Sub(last.at), testLT+testII)
		}
		takeover := lastPut(w.n)
		if takeover.etag != last.reply {
			t.Errorf("takeover If-Match %s; want the crashed leader's last ETag %s", takeover.etag, last.reply)
		}
		if end := oldEnd(); end.IsZero() || !end.Before(w.at) {
			t.Errorf("old leader's context ended at %v; want before the takeover at %v", end, w.at)
		}
		if cause := context.Cause(old.l.Context()); !errors.Is(cause, ErrLeaseExpired) {
			t.Errorf("old leader's cause = %v; want ErrLeaseExpired", cause)
		}
		_ = nodes
	})
}

func TestHandover(t *testing.T) {
	cases := []struct {
		name      string
		end       func(t *testing.T, w won, cancel context.CancelCauseFunc)
		wantCause error
	}{
		{"Resign", func(t *testing.T, w won, _ context.CancelCauseFunc) {
			if err := w.l.Resign(t.Context()); err != nil {
				t.Fatalf("Resign() = %v; want nil", err)
			}
		}, ErrResigned},
		{"CampaignContextCancelled", func(t *testing.T, w won, cancel context.CancelCauseFunc) {
			cancel(errShutdown)
			<-w.l.exited
		}, errShutdown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				out := make(chan won, 3)
				ctx, cancel := context.WithCancelCause(t.Context())
				a := newNode(t, mem, "a")
				a.campaign(ctx, out)
				old := mustWin(t, out)
				var followers []*node
				for _, id := range []string{"b", "c"} {
					n := newNode(t, mem, id)
					n.campaign(t.Context(), out)
					followers = append(followers, n)
				}
				time.Sleep(30 * time.Second)

				ended := time.Now()
				tc.end(t, old, cancel)
				if cause := context.Cause(old.l.Context()); !errors.Is(cause, tc.wantCause) {
					t.Errorf("old leader's cause = %v; want %v", cause, tc.wantCause)
				}
				w := mustWin(t, out)
				// Two followers race: each may raise the term object
				// (docs/protocol.md, 1.1), so the term rises by one or two.
				if w.l.Term() <= old.l.Term() || w.l.Term() > old.l.Term()+2 {
					t.Errorf("new Term() = %d; want %d or %d", w.l.Term(), old.l.Term()+1, old.l.Term()+2)
				}
				reads := 0
				for _, c := range w.n.fs.log() {
					if c.op == "get" && c.key == testKey && !c.at.Before(ended) {
						reads++
					}
				}
				if reads != 1 {
					t.Errorf("new leader read the lockfile %d times between the release and its takeover; want 1", reads)
				}
				if w.at.Sub(ended) > testII {
					t.Errorf("handover took %v; want at most one infrequent poll (%v)", w.at.Sub(ended), testII)
				}
				if err := old.l.Resign(t.Context()); err != nil {
					t.Errorf("second Resign() = %v; want nil", err)
				}
			})
		})
	}
}

var errShutdown = errors.New("test: shutting down")

// soleLeader elects node a alone on a fresh store.
func soleLeader(t *testing.T) (*memstore.Store, *node, won) {
	t.Helper()
	mem := memstore.New()
	out := make(chan won, 1)
	a := newNode(t, mem, "a")
	a.campaign(t.Context(), out)
	return mem, a, mustWin(t, out)
}

func TestRenewalPreconditionFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _, w := soleLeader(t)
		end := endedAt(w.l)
		time.Sleep(testFI / 2)
		mem.Set(testKey, []byte(`{"leaderID":"intruder","leaderAddr":"","lastUpdated":"2026-01-01T00:00:00Z","term":9}`))
		renewal := w.at.Add(testFI)
		<-w.l.Context().Done()
		synctest.Wait() // let the AfterFunc record the time
		if cause := context.Cause(w.l.Context()); !errors.Is(cause, ErrLeadershipLost) {
			t.Errorf("cause = %v; want ErrLeadershipLost", cause)
		}
		if got := end(); !got.Equal(renewal) {
			t.Errorf("context cancelled at %v; want at the renewal, %v", got, renewal)
		}
	})
}

func TestRenewalRetriesThenExpires(t *testing.T) {
	cases := []struct {
		name  string
		fault func(f *faultStore)
	}{
		{"Errors", func(f *faultStore) { f.failAll = true }},
		{"Hangs", func(f *faultStore) { f.blackhole = true }},
		{"Slow", func(f *faultStore) { f.latency = 10 * time.Second }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, a, w := soleLeader(t)
				end := endedAt(w.l)
				time.Sleep(testFI / 2)
				last := lastPut(a)
				a.fs.set(tc.fault)
				<-w.l.Context().Done()
				synctest.Wait()
				if cause := context.Cause(w.l.Context()); !errors.Is(cause, ErrLeaseExpired) {
					t.Errorf("cause = %v; want ErrLeaseExpired", cause)
				}
				deadline := last.at.Add(testLT - testLT/10)
				if got := end(); got.After(deadline) {
					t.Errorf("context cancelled at %v; want no later than the deadline %v", got, deadline)
				}
				var attempts []time.Duration
				for _, c := range a.fs.log() {
					if c.at.After(last.at) { // a put, or the read that checks the lockfile before a retry
						attempts = append(attempts, c.at.Sub(last.at.Add(testFI)))
					}
				}
				if tc.name == "Errors" {
					want := []time.Duration{0, 100 * time.Millisecond, 1100 * time.Millisecond}
					if fmt.Sprint(attempts) != fmt.Sprint(want) {
						t.Errorf("renewal attempts at %v after the renewal was due; want %v", attempts, want)
					}
					if got := end(); !got.Equal(last.at.Add(testFI + 1100*time.Millisecond)) {
						t.Errorf("context cancelled at %v; want as the last retry failed", got)
					}
				}
			})
		})
	}
}

func TestLostReplyIsAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, a, w := soleLeader(t)
		a.fs.set(func(f *faultStore) { f.loseReplies = 1 })
		time.Sleep(10 * testFI)
		synctest.Wait() // a renewal due at this instant completes first
		if err := w.l.Context().Err(); err != nil {
			t.Fatalf("leadership ended (%v) after a lost reply; want it to adopt its own write", context.Cause(w.l.Context()))
		}
		// The retry reads the lockfile first, finds its own bytes there and
		// adopts them instead of writing again.
		var lost, adopted, rewritten bool
		for _, c := range a.fs.log() {
			switch {
			case c.op == "put" && errors.Is(c.err, faultstore.ErrReplyLost):
				lost = true
			case lost && !adopted && c.op == "get" && c.err == nil:
				adopted = true
			case lost && !adopted && c.op == "put":
				rewritten = true
			}
		}
		if !lost || !adopted || rewritten {
			t.Errorf("calls: lost reply %v, read back %v, written again before the read %v; want true, true, false", lost, adopted, rewritten)
		}
		rec, etag := lastWrite(w.l)
		data, cur, err := mem.Get(t.Context(), testKey)
		if err != nil || cur != etag {
			t.Errorf("store ETag %s (%v); leader believes %s", cur, err, etag)
		}
		if got, _ := ParseRecord(data); got.LeaderID != "a" || got.Term != rec.Term {
			t.Errorf("store holds %+v; want a's record", got)
		}
	})
}

func TestCorruptLockfileTakenOver(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		wantTerm uint64
	}{
		{"Garbage", []byte("\x00\xffnot json at all"), 1},
		{"Empty", []byte{}, 1},
		{"Null", []byte("null"), 1},
		{"WrongTypes", []byte(`{"leaderID":5,"leaderAddr":[],"lastUpdated":"yesterday","term":9}`), 10},
		{"NoLeader", []byte(`{"lastUpdated":"2026-01-01T00:00:00Z","term":4}`), 5},
		{"Huge", make([]byte, 10<<20), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				bad := mem.Set(testKey, tc.data)
				out := make(chan won, 1)
				b := newNode(t, mem, "b")
				start := time.Now()
				b.campaign(t.Context(), out)
				w := mustWin(t, out)
				// Unreadable content states no lease: it is waited out with
				// the longest one the follower can assume (docs/protocol.md, 3.1).
				if want := start.Add(max(testLT, noTTLLease)); !w.at.Equal(want) {
					t.Errorf("took over at %v; want exactly the lease assumed for a record without ttl after first seeing it, %v", w.at, want)
				}
				if p := lastPut(b); p.etag != bad {
					t.Errorf("takeover If-Match %q; want the corrupt object's ETag %q", p.etag, bad)
				}
				if w.l.Term() != tc.wantTerm {
					t.Errorf("Term() = %d; want %d", w.l.Term(), tc.wantTerm)
				}
			})
		})
	}
}

func TestDeletedLockfileWaitsOutTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lead, _, out := stableGroup(t)
		end := endedAt(lead.l)
		mem := lead.n.fs.inner.(*memstore.Store)
		mem.Delete(testKey) // an operator or a lifecycle rule
		w := mustWin(t, out)
		if got := end(); got.IsZero() || got.After(w.at) {
			t.Errorf("old leader ended at %v; want before the new one started at %v", got, w.at)
		}
		if w.l.Term() <= lead.l.Term() {
			t.Errorf("Term() after deletion = %d; want above %d", w.l.Term(), lead.l.Term())
		}
	})
}

// TestContextErrReadsTheClock stands for a process resumed after a pause:
// the lease deadline has passed but the expiry timer has not run yet.
// Err must already report the end, and the leader must not renew.
func TestContextErrReadsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a, w := soleLeader(t)
		puts := a.fs.count("put")
		w.l.deadline.Store(int64(time.Since(w.l.e.clock.Base))) // as if the process had slept through its lease
		if err := w.l.Context().Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Context().Err() after the deadline = %v; want it cancelled", err)
		}
		if cause := context.Cause(w.l.Context()); !errors.Is(cause, ErrLeaseExpired) {
			t.Errorf("cause = %v; want ErrLeaseExpired", cause)
		}
		<-w.l.exited
		if got := a.fs.count("put"); got != puts {
			t.Errorf("the expired leader wrote %d more times; want none", got-puts)
		}
	})
}

// lastWrite returns the record and ETag l last wrote, as its elector
// publishes them.
func lastWrite(l *Leadership) (Record, string) {
	s := l.e.snap.Load()
	return s.rec, s.etag
}
