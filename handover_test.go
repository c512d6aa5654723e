package s3lect

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestCoreHandover: moving a leader on purpose (docs/protocol.md, section
// 11), a row per rule, on the pure decisions. -sim.mutate=stepnowait or
// nohold (with -tags s3lect_mutations) switches a rule off, and rows fail.
func TestCoreHandover(t *testing.T) {
	defer setMutation(t)()
	p := coreParams
	// resign ends the leadership at 500 ms, answers its release at 600 ms
	// and returns the released record's bytes.
	resign := func(t *testing.T, m *machine, ev event) []byte {
		t.Helper()
		m.on(ev, at(500*time.Millisecond))
		w := mustEffect[doRelease](t, m, "release")
		m.wrote(`"r"`, nil, at(600*time.Millisecond))
		mustEffect[doExited](t, m, "released")
		return w.data
	}
	// readUntil answers every read with data until the elector writes,
	// and returns the write and the time its read returned.
	readUntil := func(t *testing.T, m *machine, data []byte, etag string, limit time.Time) (doClaim, time.Time) {
		t.Helper()
		for m.wake.Before(limit) && !m.wake.IsZero() {
			now := m.wake
			if !calling[doRead](m) {
				m.on(evTimer{}, now)
			}
			if calling[doRead](m) {
				m.read(data, etag, now)
				if w, ok := effectOf[doClaim](m); ok {
					return w, now
				}
			}
		}
		return doClaim{}, time.Time{}
	}

	t.Run("11 a resigner that campaigns again leaves its released record to the others for the hold-off", func(t *testing.T) {
		m := leading(t, p)
		rel := resign(t, m, evLeadDone{ErrResigned})
		m.on(evCampaign{id: 2, lease: "l2"}, at(700*time.Millisecond))
		w, when := readUntil(t, m, rel, `"r"`, at(time.Minute))
		if w.data == nil {
			t.Fatalf("no takeover of its own release within a minute")
		}
		// The last renewal (the takeover) was sent at 0 and the release
		// acknowledged at 600 ms: every follower reads it by the fifth
		// renewal due from the first (k = 5), 5 s, and its slack, lag and
		// round trip (section 11.1): 5.375 s, before the phase-free bound,
		// 600 ms + handoverHold.
		if earliest := at(5*p.fi + p.fi/8 + p.fi/4); when.Before(earliest) {
			t.Errorf("took its own release back at %v; want no sooner than the hold-off's end %v", when.Sub(t0), earliest.Sub(t0))
		}
		if when.After(at(600*time.Millisecond + p.handoverHold())) {
			t.Errorf("a group of one led again at %v; want by the phase-free bound %v", when.Sub(t0), (600*time.Millisecond + p.handoverHold()))
		}
	})
	t.Run("11 another member takes a release at once", func(t *testing.T) {
		m := leading(t, p)
		rel := resign(t, m, evLeadDone{ErrResigned})
		o := newMachine(t, params{id: "b", addr: "b:1", fi: p.fi, ii: p.ii, lt: p.lt, margin: p.margin})
		campaignAt(t, o, rel, `"r"`, at(700*time.Millisecond))
		mustEffect[doClaim](t, o, "the other member's read of the release: a takeover at once")
	})
	t.Run("11 Transfer names the member; it takes over at once, everyone else after the transfer window", func(t *testing.T) {
		m := leading(t, p)
		rel := resign(t, m, evResign{to: "b"})
		if rec, _ := ParseRecord(rel); rec.To != "b" || !rec.LastUpdated.IsZero() {
			t.Fatalf("released record %s; want lastUpdated zero and to b", rel)
		}
		target := newMachine(t, params{id: "b", addr: "b:1", fi: p.fi, ii: p.ii, lt: p.lt, margin: p.margin})
		campaignAt(t, target, rel, `"r"`, at(700*time.Millisecond))
		mustEffect[doClaim](t, target, "the target's read: a takeover at once")
		other := newMachine(t, params{id: "c", addr: "c:1", fi: p.fi, ii: p.ii, lt: p.lt, margin: p.margin})
		campaignAt(t, other, rel, `"r"`, at(700*time.Millisecond))
		noEffect[anyWrite](t, other, "another member's first read")
		w, when := readUntil(t, other, rel, `"r"`, at(time.Minute))
		if w.data == nil || when.Before(at(700*time.Millisecond).Add(other.c.sh.transferWait(other.c.fol().v))) {
			t.Errorf("another member took the transfer over at %v; want no sooner than its transfer window after it first saw it", when.Sub(t0))
		}
	})
	// stepDown wins, has its renewal refused at FrequentInterval and finds
	// the operator's request (to b) in the lockfile.
	stepDown := func(t *testing.T) (*machine, []byte) {
		t.Helper()
		m := leading(t, p)
		m.on(evTimer{}, at(p.fi)).wrote("", store.ErrPreconditionFailed, at(p.fi+10*time.Millisecond))
		mustEffect[doStepRead](t, m, "refused renewal")
		req := m.c.lead().rec
		req.StepDown, req.To = "q1", "b"
		data := req.encode()
		m.on(evStore{gen: m.c.sh.gen, data: data, etag: `"q"`}, at(p.fi+20*time.Millisecond))
		if e := mustEffect[doEnd](t, m, "a request without releaseAt"); !errors.Is(e.cause, ErrLeadershipLost) {
			t.Fatalf("cause %v; want ErrLeadershipLost", e.cause)
		}
		noEffect[anyWrite](t, m, "the request, before the holder is done")
		noEffect[doExited](t, m, "the request, before the holder is done")
		if !m.wake.Equal(m.c.lead().deadline) {
			t.Fatalf("wake %v; want the lease deadline %v", m.wake.Sub(t0), m.c.lead().deadline.Sub(t0))
		}
		return m, data
	}
	for _, done := range []struct {
		name string
		ev   event
	}{{"Resign", evResign{}}, {"a new Campaign", evCampaign{id: 2, lease: "l2"}}, {"Close", evClose{}}} {
		t.Run("11 a step-down request is released over once the holder is done: "+done.name, func(t *testing.T) {
			m, _ := stepDown(t)
			m.on(done.ev, at(p.fi+300*time.Millisecond))
			w := mustEffect[doRelease](t, m, "holder done")
			rec, _ := ParseRecord(w.data)
			if w.ifMatch != `"q"` || !rec.LastUpdated.IsZero() || rec.To != "b" || rec.StepDown != "" || rec.Term != 1 {
				t.Fatalf("release over %s: %s; want the release over the request, handed to b", w.ifMatch, w.data)
			}
			m.wrote(`"r"`, nil, at(p.fi+400*time.Millisecond))
			mustEffect[doExited](t, m, "released")
		})
	}
	t.Run("11 a step-down request whose holder never says it is done is left to the lease rules", func(t *testing.T) {
		m, data := stepDown(t)
		m.on(evTimer{}, m.wake)
		noEffect[anyWrite](t, m, "deadline")
		mustEffect[doExited](t, m, "deadline")
		if v := m.c.fol().v; v.kind != kindHeld || v.etag != `"q"` || m.c.fol().hold != v.key() {
			t.Errorf("view %v %s, hold %v; want the request, held, with the hold-off on it", v.kind, v.etag, m.c.fol().hold)
		}
		other := newMachine(t, params{id: "c", addr: "c:1", fi: p.fi, ii: p.ii, lt: p.lt, margin: p.margin})
		campaignAt(t, other, data, `"q"`, at(p.fi+30*time.Millisecond))
		noEffect[anyWrite](t, other, "a request over a live lease") // its lease is waited out like any held record
	})
	t.Run("11 a refused renewal over someone else's record is a loss: nothing is released", func(t *testing.T) {
		m := leading(t, p)
		m.on(evTimer{}, at(p.fi)).wrote("", store.ErrPreconditionFailed, at(p.fi+10*time.Millisecond))
		rec := m.c.lead().rec
		rec.StepDown, rec.Lease = "q1", "another-lease" // a request, but over another leadership
		m.on(evStore{gen: m.c.sh.gen, data: rec.encode(), etag: `"q"`}, at(p.fi+20*time.Millisecond))
		noEffect[anyWrite](t, m, "someone else's record")
		mustEffect[doExited](t, m, "lost")
	})
	t.Run("11 a nudge renews within an eighth of a FrequentInterval", func(t *testing.T) {
		m := leading(t, p)
		m.on(evNudge{}, at(110*time.Millisecond))
		if want := at(p.fi / 8); !m.wake.Equal(want) {
			t.Fatalf("wake after a nudge %v; want %v (an eighth of a FrequentInterval after the last write's send)", m.wake.Sub(t0), want.Sub(t0))
		}
		m.on(evTimer{}, m.wake)
		mustEffect[doRenew](t, m, "early renewal")
		m.wrote(`"d"`, nil, at(p.fi/8+10*time.Millisecond))
		if want := at(p.fi/8 + p.fi); !m.wake.Equal(want) {
			t.Errorf("wake after the early renewal %v; want the usual interval %v", m.wake.Sub(t0), want.Sub(t0))
		}
	})
}

// TestHandoverLandsOnAnother: three electors in a testing/synctest bubble,
// each campaigning again as soon as its leadership ends (the README's
// loop); the leader resigns after a while, at many phases of its renewal
// cycle, or transfers to a named member. Every handover lands on another
// member (the named one for a transfer), the next leadership starts only
// after the last one's context ended, and a group of one leads again
// after the hold-off.
func TestHandoverLandsOnAnother(t *testing.T) {
	for _, tc := range []struct {
		transfer bool
		ii       time.Duration
	}{{false, testII}, {true, testII}, {false, testFI}, {true, testFI}} {
		transfer := tc.transfer
		name := map[bool]string{false: "Resign", true: "Transfer"}[transfer]
		if tc.ii == testFI {
			name += ", InfrequentInterval = FrequentInterval"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				type lead struct {
					id         string
					start, end time.Time
				}
				var (
					mu    sync.Mutex
					leads []lead
					wg    sync.WaitGroup
				)
				ids := []string{"a", "b", "c"}
				for i, id := range ids {
					cfg := testConfig(newFaultStore(mem), id)
					cfg.InfrequentInterval = tc.ii
					e := newTestElector(t, cfg)
					n := &node{id: id, e: e}
					wg.Go(func() {
						for k := 0; ; k++ {
							l, err := n.e.Campaign(ctx)
							if err != nil {
								return
							}
							start := time.Now()
							// Lead for a while: a phase that moves through the
							// renewal cycle from one leadership to the next.
							select {
							case <-time.After(10*testFI + time.Duration(k*7+i*3)*testFI/10):
							case <-ctx.Done():
							}
							if transfer {
								l.Transfer(context.Background(), ids[(i+2)%3]) // the one before it
							} else {
								l.Resign(context.Background())
							}
							mu.Lock()
							leads = append(leads, lead{id, start, time.Now()})
							mu.Unlock()
						}
					})
				}
				time.Sleep(10 * time.Minute)
				cancel()
				wg.Wait()
				if len(leads) < 20 {
					t.Fatalf("%d leaderships in 10 minutes; want at least 20", len(leads))
				}
				for i := 1; i < len(leads); i++ {
					prev, next := leads[i-1], leads[i]
					switch {
					case next.id == prev.id:
						t.Errorf("leadership %d: %s handed over to itself", i, prev.id)
					case transfer && next.id != ids[(slices.Index(ids, prev.id)+2)%3]:
						t.Errorf("leadership %d: %s transferred, %s took over; want the named member", i, prev.id, next.id)
					}
					if next.start.Before(prev.end) {
						t.Errorf("leadership %d of %s started before %s's ended", i, next.id, prev.id)
					}
				}
			})
		})
	}
	// A group of one leads again when every follower it might have would
	// have read its release (docs/moves.md, 11.1): k renewals after the
	// one due next (one follower read in k), plus the slack, the largest
	// lag (FrequentInterval/4), a slack more and, with
	// InfrequentInterval = FrequentInterval, the half slot; resigning as
	// soon as it won, that is from the takeover's send.
	for _, tc := range []struct {
		name string
		ii   time.Duration
		want time.Duration
	}{
		{"group of one", testII, (testII+testFI-1)/testFI*testFI + testFI/8 + testFI/4},
		{"group of one, InfrequentInterval = FrequentInterval", testFI, testFI + testFI/8 + testFI/4 + testFI/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testConfig(newFaultStore(memstore.New()), "a")
				cfg.InfrequentInterval = tc.ii
				e := newTestElector(t, cfg)
				l, err := e.Campaign(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				won := time.Now()
				l.Resign(t.Context())
				if _, err := e.Campaign(t.Context()); err != nil {
					t.Fatal(err)
				}
				d, bound := time.Since(won), e.params().handoverHold()
				if d < tc.want || d > tc.want+testFI/16 {
					t.Errorf("a group of one led again %v after winning and resigning; want %v, when every follower would have read the release", d, tc.want)
				}
				if d > bound {
					t.Errorf("a group of one led again %v after resigning; want no later than the bound that knows no phase, %v", d, bound)
				}
			})
		})
	}
}

// TestTransferOnDetachedLeadership: a Leadership that no elector's run
// loop holds (package pool's) ends on Transfer as on Resign, instead of
// waiting for a loop that never answers.
func TestTransferOnDetachedLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lead, ctl := detachedLeaderships(lease.NewClock())(t.Context(), 1, time.Now().Add(time.Minute), func() {})
		go func() {
			<-lead.Context().Done()
			ctl.Exit(nil) // what the pool does once the leadership has ended
		}()
		if err := lead.Transfer(t.Context(), "b"); err != nil {
			t.Fatalf("Transfer() = %v; want nil", err)
		}
		if cause := context.Cause(lead.Context()); !errors.Is(cause, ErrResigned) {
			t.Errorf("cause %v; want ErrResigned", cause)
		}
	})
}

// TestPeerStepDownNudge: s3lect release's stepDown parameter at the
// leader's peer endpoint makes it renew within an eighth of a
// FrequentInterval, so it meets the step-down request there instead of at
// its next renewal; the parameter itself changes nothing else.
func TestPeerStepDownNudge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		n := newNode(t, mem, "a")
		lead, err := n.e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(testFI / 2) // half-way to the next renewal
		data, etag, err := mem.Get(t.Context(), testKey)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := ParseRecord(data)
		req.StepDown = "q1"
		if _, err := mem.PutIfMatch(t.Context(), testKey, req.encode(), etag); err != nil {
			t.Fatal(err)
		}
		asked := time.Now()
		w := httptest.NewRecorder()
		PeerHandler(n.e).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health/leadership?stepDown=q1", nil))
		<-lead.Context().Done()
		if d := time.Since(asked); d > testFI/8 {
			t.Errorf("the leadership ended %v after the nudge; want within FrequentInterval/8 (%v), not at the renewal %v after winning", d, testFI/8, testFI)
		}
		if cause := context.Cause(lead.Context()); !errors.Is(cause, ErrLeadershipLost) {
			t.Errorf("cause %v; want ErrLeadershipLost (the refused renewal)", cause)
		}
		lead.Resign(t.Context()) // the holder is done: the release goes over the request
		data, _, err = mem.Get(t.Context(), testKey)
		if rec, _ := ParseRecord(data); err != nil || !rec.LastUpdated.IsZero() || rec.StepDown != "" || rec.Lease != req.Lease {
			t.Errorf("lockfile after the holder resigned: %s, %v; want a's release", data, err)
		}
	})
}
