package s3lect

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/retry"
	"github.com/s3lect/s3lect/store"
)

// The election's decisions, table-tested without goroutines or clocks: a
// row per rule of docs/protocol.md. Each row drives a state machine
// through events at given times and checks the effects.

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

var coreParams = params{id: "me", addr: "me:1", fi: time.Second, ii: 5 * time.Second, lt: 3 * time.Second, margin: 300 * time.Millisecond}

// slack is how long after a renewal is due a follower reads, at
// coreParams' FrequentInterval (docs/protocol.md, 3.3): FrequentInterval/16.
// A record stamped at s and read at s is next read at s + FrequentInterval
// + slack, frequent or not, so the tests' reads come at whole seconds plus
// slack.
const slack = 62500 * time.Microsecond

// machine drives a state through events and keeps what it emitted.
type machine struct {
	t     *testing.T
	lease string // the lease of the leadership won, once won
	c     core
	fx    []effect // the last step's effects
	wake  time.Time

	// The term object (docs/protocol.md, 1.1). Unless manualTerm is set,
	// on answers a takeover's read and write of it at once, as a store
	// holding termData would, and keeps the effects of every step but
	// those two calls.
	manualTerm bool
	termData   []byte
	termETag   string
	termWrites int
	claims     map[uint64]bool // the term claims created
}

func newMachine(t *testing.T, p params) *machine {
	m := &machine{t: t, c: newCore(p)}
	return m
}

func (m *machine) on(ev event, now time.Time) *machine {
	m.t.Helper()
	m.fx, m.wake = m.c.next(ev, now)
	for !m.manualTerm && (calling[doReadTerm](m) || calling[doRaiseTerm](m) || calling[doClaimTerm](m) || calling[doFindTerm](m)) {
		var r evStore
		switch call := m.c.sh.call.(type) {
		case doReadTerm:
			r = evStore{gen: m.c.sh.gen, data: m.termData, etag: m.termETag}
		case doClaimTerm:
			if m.claims[call.term] {
				r = evStore{gen: m.c.sh.gen, err: store.ErrPreconditionFailed}
			} else {
				if m.claims == nil {
					m.claims = map[uint64]bool{}
				}
				m.claims[call.term] = true
				r = evStore{gen: m.c.sh.gen, etag: fmt.Sprintf(`"c%d"`, call.term)}
			}
		case doFindTerm:
			t := call.from
			for m.claims[t+1] {
				t++
			}
			r = evStore{gen: m.c.sh.gen, term: t}
		default:
			w := mustEffect[doRaiseTerm](m.t, m, "term object write")
			if w.ifMatch != m.termETag {
				r = evStore{gen: m.c.sh.gen, err: store.ErrPreconditionFailed}
			} else {
				m.termWrites++
				m.termData, m.termETag = w.data, fmt.Sprintf(`"t%d"`, m.termWrites)
				r = evStore{gen: m.c.sh.gen, etag: m.termETag}
			}
		}
		var fx []effect
		for _, f := range m.fx { // the term step's own calls are answered here
			switch f.(type) {
			case doReadTerm, doRaiseTerm, doClaimTerm, doFindTerm:
				continue
			}
			fx = append(fx, f)
		}
		m.fx, m.wake = m.c.next(r, now)
		m.fx = append(fx, m.fx...)
	}
	return m
}

// read answers the read in flight with data and etag ("" for absent).
func (m *machine) read(data []byte, etag string, now time.Time) *machine {
	m.t.Helper()
	if !calling[doRead](m) {
		m.t.Fatalf("at %v: read answered, but the call in flight is %T", now.Sub(t0), m.c.sh.call)
	}
	return m.on(evStore{gen: m.c.sh.gen, data: data, etag: etag}, now)
}

// wrote answers the write in flight.
func (m *machine) wrote(etag string, err error, now time.Time) *machine {
	m.t.Helper()
	if !calling[anyWrite](m) {
		m.t.Fatalf("at %v: write answered, but the call in flight is %T", now.Sub(t0), m.c.sh.call)
	}
	return m.on(evStore{gen: m.c.sh.gen, etag: etag, err: err}, now)
}

// calling reports whether the store call in flight is a T.
func calling[T storeCall](m *machine) bool { return is[T](m.c.sh.call) }

// anyWrite is a store write of any kind (doRaiseTerm, doClaim, doRenew,
// doRelease), for a test that wants none at all.
type anyWrite interface {
	storeCall
	written() write
}

func (w write) written() write { return w }

// is reports whether f is a T.
func is[T effect](f effect) bool {
	_, ok := f.(T)
	return ok
}

// effect returns the last step's first effect of type T.
func effectOf[T any](m *machine) (T, bool) {
	for _, f := range m.fx {
		if v, ok := f.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

func mustEffect[T any](t *testing.T, m *machine, what string) T {
	t.Helper()
	v, ok := effectOf[T](m)
	if !ok {
		t.Fatalf("%s: no %T among %s", what, v, describe(m.fx))
	}
	return v
}

func noEffect[T any](t *testing.T, m *machine, what string) {
	t.Helper()
	if v, ok := effectOf[T](m); ok {
		t.Fatalf("%s: unexpected %T %+v", what, v, v)
	}
}

func describe(fx []effect) string {
	var b strings.Builder
	for _, f := range fx {
		fmt.Fprintf(&b, "%T ", f)
	}
	return b.String()
}

// held returns a version 3 record stating coreParams' LeaderTimeout as its
// lease.
func held(id string, term uint64, lease string, heldMS int64, stamp time.Duration) []byte {
	return Record{LeaderID: id, LeaderAddr: id + ":1", LastUpdated: at(stamp), Term: term, Lease: lease, Held: heldMS,
		TTL: coreParams.lt.Milliseconds()}.encode()
}

// heldTTL is held with a lease of ttl.
func heldTTL(id string, term uint64, lease string, heldMS int64, stamp, ttl time.Duration) []byte {
	return Record{LeaderID: id, LeaderAddr: id + ":1", LastUpdated: at(stamp), Term: term, Lease: lease, Held: heldMS,
		TTL: ttl.Milliseconds()}.encode()
}

// campaignAt starts a Campaign at time now and answers the first read.
func campaignAt(t *testing.T, m *machine, data []byte, etag string, now time.Time) *machine {
	t.Helper()
	m.on(evCampaign{id: 1, lease: "l1"}, now)
	return m.read(data, etag, now)
}

// TestCoreTakeoverTimes: when the takeover write goes out after a first
// read, for each kind of content (docs/protocol.md, 1, 3.1, 3.2 and 4,
// Takeover).
func TestCoreTakeoverTimes(t *testing.T) {
	lt := coreParams.lt
	cases := []struct {
		name string
		data []byte
		etag string
		want time.Duration // when the takeover write is sent, after the first read at 0
	}{
		{"T1 (4) takeover: an absence never preceded by a record is created at once", nil, "", 0},
		{"T2 (1) a released record (lastUpdated zero) with ttl is taken over at once", Record{LeaderID: "x", Term: 4, Lease: "a", TTL: 3000}.encode(), `"r"`, 0},
		{"T3 (3.1) a record without a lease waits LeaderTimeout of observed silence", held("x", 4, "", 0, 0), `"h"`, lt},
		{"T5 (3.2) a record with a lease seen once waits LeaderTimeout, as 3.1", held("x", 4, "a", 9000, 0), `"h"`, lt},
		{"T3 (3.1) the record's lease: a longer ttl is waited out", heldTTL("x", 4, "a", 9000, 0, 15*time.Second), `"h"`, 15 * time.Second},
		{"T3 (3.1) the record's lease: a shorter ttl waits the follower's own LeaderTimeout", heldTTL("x", 4, "a", 9000, 0, time.Second), `"h"`, lt},
		{"T4 (3.1) a record without ttl (the original s3lect) waits the lease assumed for it", Record{LeaderID: "x", LastUpdated: at(0)}.encode(), `"o"`, noTTLLease},
		{"T4 (3.1) a record without ttl (version 2) waits the lease assumed for it", Record{LeaderID: "x", LastUpdated: at(0), Term: 4, Lease: "a", Held: 9000}.encode(), `"v"`, noTTLLease},
		{"T4 (3.1) a release without ttl may follow an unsafe takeover: the lease assumed", Record{LeaderID: "x", Term: 4, Lease: "a"}.encode(), `"r"`, noTTLLease},
		{"T4 (1) unreadable content is a holder that never renews and states no lease", []byte("not json"), `"c"`, noTTLLease},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, coreParams)
			campaignAt(t, m, tc.data, tc.etag, at(0))
			// Reads every FrequentInterval see the same thing; the claim
			// goes out exactly at the takeover time, not at a read.
			for now := time.Duration(0); now <= 2*tc.want+lt; now += time.Millisecond {
				if now > 0 {
					m.on(evTimer{}, at(now))
				}
				if calling[doRead](m) { // the store answers at once
					m.read(tc.data, tc.etag, at(now))
				}
				if w, ok := effectOf[anyWrite](m); ok {
					if now != tc.want {
						t.Fatalf("takeover sent at %v; want %v", now, tc.want)
					}
					if c, ok := w.(doClaim); !ok || c.ifMatch != tc.etag {
						t.Fatalf("write = %+v; want a claim over %q", w, tc.etag)
					}
					return
				}
			}
			t.Fatalf("no takeover within %v", 2*tc.want+lt)
		})
	}
}

// TestCoreAbsenceAfterHeldWaitsOutTheLease: an absence after a held record
// is watched for the lease before the create (docs/protocol.md, 4; 9, 3).
func TestCoreAbsenceAfterHeldWaitsOutTheLease(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, held("x", 4, "", 0, 0), `"h"`, at(0))
	// The next read (3.3) is a slack after the renewal due at 1s.
	m.on(evTimer{}, at(time.Second+slack)).read(nil, "", at(time.Second+slack)) // deleted under a live leader
	noEffect[anyWrite](t, m, "absence after a held record")
	if got, _ := m.c.fol().v.takeoverAt(coreParams.lt); !got.Equal(at(time.Second + slack + coreParams.lt)) {
		t.Errorf("takeover of a deleted lockfile at %v; want LeaderTimeout after the absence was seen", got.Sub(t0))
	}
}

// TestCoreElapsedTimeRule: a follower that saw two records of one
// leadership may take over at p_i + stretch(held_k - held_i + 1ms) + LT,
// earlier than LeaderTimeout after its first sight of record k
// (docs/protocol.md, 3.2).
func TestCoreElapsedTimeRule(t *testing.T) {
	p := coreParams
	m := newMachine(t, p)
	campaignAt(t, m, held("x", 4, "a", 10_000, 0), `"1"`, at(0)) // record i, first seen at 0
	// Record k, written 2 s of the leader's time later, first seen at 4.5 s
	// by the read sent a slack after the renewal due at 1 s (3.3).
	m.on(evTimer{}, at(time.Second+slack)).read(held("x", 4, "a", 12_000, 0), `"2"`, at(4500*time.Millisecond))
	got, _ := m.c.fol().v.takeoverAt(p.lt)
	want := at(0).Add(stretch(2001 * time.Millisecond)).Add(p.lt) // 2.251 s + 3 s
	if !got.Equal(want) {
		t.Fatalf("takeoverAt = %v; want %v (not first sight + LT = %v)", got.Sub(t0), want.Sub(t0), (4500*time.Millisecond + p.lt))
	}
	// δ = 1/8 exactly.
	if d := stretch(8 * time.Second); d != 9*time.Second {
		t.Errorf("stretch(8s) = %v; want 9s", d)
	}
	// A leader whose reported time goes backwards (a rewound store, a
	// liar) is trusted no more than observed silence allows.
	m.on(evTimer{}, at(5*time.Second)).read(held("x", 4, "a", 11_000, 0), `"3"`, at(5*time.Second))
	if got, _ := m.c.fol().v.takeoverAt(p.lt); got.Before(at(5*time.Second + p.lt)) {
		t.Errorf("takeoverAt after held went backwards = %v; want no earlier than first sight + LT", got.Sub(t0))
	}
	// Another leadership (a new lease) starts afresh.
	m.on(evTimer{}, at(6*time.Second)).read(held("x", 4, "b", 50_000, 0), `"4"`, at(6*time.Second))
	if got, _ := m.c.fol().v.takeoverAt(p.lt); !got.Equal(at(6*time.Second + p.lt)) {
		t.Errorf("takeoverAt of a new leadership = %v; want first sight + LT", got.Sub(t0))
	}
}

// TestCoreTakeoverOnlyOnAFreshRead: when the takeover time comes between
// reads, the follower reads first and writes only on what it read, so that
// an ETag a rewound store handed out again for other bytes is not
// overwritten on the strength of an old sighting (docs/protocol.md, 2; 9,
// 15).
func TestCoreTakeoverOnlyOnAFreshRead(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, held("x", 4, "", 0, 0), `"7"`, at(0))
	for now := time.Second + slack; now < coreParams.lt; now += time.Second { // 3.3: a slack after each renewal due
		m.on(evTimer{}, at(now)).read(held("x", 4, "", 0, 0), `"7"`, at(now))
	}
	m.on(evTimer{}, at(coreParams.lt))
	noEffect[anyWrite](t, m, "takeover time between reads")
	mustEffect[doRead](t, m, "takeover time between reads")
	m.read(held("y", 5, "", 0, 0), `"7"`, at(coreParams.lt)) // the same ETag, other bytes
	noEffect[anyWrite](t, m, "the ETag came back with other bytes")
	if !m.c.fol().v.seenAt.Equal(at(coreParams.lt)) {
		t.Errorf("seenAt %v; want a new sighting at the read", m.c.fol().v.seenAt.Sub(t0))
	}
}

// TestCoreSightingIsETagAndBytes: a store that reuses an ETag for other
// content has changed; the first-sight time moves (docs/protocol.md, 2; 9,
// 11).
func TestCoreSightingIsETagAndBytes(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, held("x", 4, "a", 0, 0), `"7"`, at(0))
	// Reads come a slack after each renewal due (3.3); the other bytes
	// were written at 1s.
	m.on(evTimer{}, at(time.Second+slack)).read(held("y", 4, "b", 0, time.Second), `"7"`, at(time.Second+slack))
	if !m.c.fol().v.seenAt.Equal(at(time.Second+slack)) || m.c.fol().v.rec.LeaderID != "y" {
		t.Fatalf("same ETag, other bytes: seenAt %v leader %q; want a new sighting of y at the read", m.c.fol().v.seenAt.Sub(t0), m.c.fol().v.rec.LeaderID)
	}
	m.on(evTimer{}, at(2*time.Second+slack)).read(held("y", 4, "b", 0, time.Second), `"7"`, at(2*time.Second+slack))
	if !m.c.fol().v.seenAt.Equal(at(time.Second + slack)) {
		t.Errorf("same ETag, same bytes: seenAt moved to %v; want the first read's", m.c.fol().v.seenAt.Sub(t0))
	}
}

// TestCoreLeaderRenewsReleasesAndFences: the leader's rules
// (docs/protocol.md, 3.1 and 4, Leader), a row each.
func TestCoreLeaderRenewsReleasesAndFences(t *testing.T) {
	p := coreParams
	win := func(t *testing.T) *machine {
		m := newMachine(t, p)
		campaignAt(t, m, nil, "", at(0))
		w := mustEffect[doClaim](t, m, "claim of an absent lockfile")
		if w.ifMatch != "" {
			t.Fatalf("claim = %+v; want a create", w)
		}
		rec, _ := ParseRecord(w.data)
		if rec.Term != 1 || len(rec.Lease) != 16 || rec.Held != 0 || rec.LeaderID != "me" {
			t.Fatalf("claim record = %+v; want me, term 1, a lease, held 0", rec)
		}
		m.lease = rec.Lease
		m.wrote(`"c"`, nil, at(100*time.Millisecond))
		l := mustEffect[doLead](t, m, "winning write")
		if !l.deadline.Equal(at(p.lt - p.margin)) {
			t.Fatalf("lease deadline %v; want LT - margin after the claim was sent", l.deadline.Sub(t0))
		}
		if !m.wake.Equal(at(p.fi)) {
			t.Fatalf("next wake %v; want the renewal at FrequentInterval", m.wake.Sub(t0))
		}
		return m
	}
	t.Run("L1 L2 (4) leader renews with one If-Match PUT carrying held (3.2), its lease from the send (3.1)", func(t *testing.T) {
		m := win(t)
		m.on(evTimer{}, at(p.fi))
		w := mustEffect[doRenew](t, m, "renewal")
		noEffect[doRead](t, m, "renewal")
		rec, _ := ParseRecord(w.data)
		if w.ifMatch != `"c"` || rec.Held != 1000 || rec.Term != 1 || rec.Lease != m.lease {
			t.Fatalf("renewal = %+v %+v; want If-Match \"c\", held 1000, term 1, the claim's lease", w, rec)
		}
		if !w.notAfter.Equal(at(p.lt - p.margin)) {
			t.Errorf("renewal notAfter %v; want the lease deadline", w.notAfter.Sub(t0))
		}
		m.wrote(`"d"`, nil, at(p.fi+50*time.Millisecond))
		r := mustEffect[doRenewed](t, m, "renewed")
		if !r.deadline.Equal(at(p.fi + p.lt - p.margin)) {
			t.Errorf("deadline after renewal %v; want from the renewal's send", r.deadline.Sub(t0))
		}
	})
	t.Run("L3 (4) leader: precondition failed on a round's first attempt is lost, after one read in storage mode (11.5), nothing written", func(t *testing.T) {
		m := win(t)
		m.on(evTimer{}, at(p.fi)).wrote("", store.ErrPreconditionFailed, at(p.fi))
		noEffect[anyWrite](t, m, "lost leadership") // no release over someone else's record
		mustEffect[doStepRead](t, m, "refused renewal: the read for a step-down request (section 11.5), within the lease")
		noEffect[doEnd](t, m, "refused renewal, before its read")
		m.on(evStore{gen: m.c.sh.gen, data: held("x", 2, "b", 0, p.fi), etag: `"x"`}, at(p.fi+10*time.Millisecond))
		if e := mustEffect[doEnd](t, m, "412, then another's record"); !errors.Is(e.cause, ErrLeadershipLost) {
			t.Fatalf("cause %v; want ErrLeadershipLost", e.cause)
		}
		noEffect[anyWrite](t, m, "lost leadership to another") // no release over someone else's record
		mustEffect[doExited](t, m, "lost leadership")
		mustEffect[doRead](t, m, "lost leadership: see who")
	})
	t.Run("L5 (4) leader: retries exhausted is expired, record left as it is", func(t *testing.T) {
		m := win(t)
		m.on(evTimer{}, at(p.fi)).wrote("", errors.New("timeout"), at(p.fi+time.Second))
		if e := mustEffect[doEnd](t, m, "failed renewal"); !errors.Is(e.cause, ErrLeaseExpired) {
			t.Fatalf("cause %v; want ErrLeaseExpired", e.cause)
		}
		noEffect[anyWrite](t, m, "expired leadership")
		if m.c.fol().v.kind != kindOurs {
			t.Errorf("view after expiry = %v; want our own record, which this elector may take over at once", m.c.fol().v.kind)
		}
	})
	t.Run("T8 E5 (4.3) ex-leader: its own last acknowledged write is waited out from the first read that finds it", func(t *testing.T) {
		// docs/protocol.md, 4.3: the same bytes under the same ETag may be
		// an operator's restore of the ex-leader's write, made while
		// another led; nothing tells them apart, so the ex-leader waits
		// its own record out like anyone else's, from its first read.
		m := newMachine(t, p)
		campaignAt(t, m, nil, "", at(0))
		last := mustEffect[doClaim](t, m, "claim").data
		m.wrote(`"c"`, nil, at(100*time.Millisecond))
		m.on(evTimer{}, at(p.fi)).wrote("", errors.New("timeout"), at(p.fi+time.Second))
		mustEffect[doEnd](t, m, "failed renewal")
		m.on(evLeadDone{ErrLeaseExpired}, at(p.fi+time.Second))
		m.on(evCampaign{id: 2, lease: "l2"}, at(p.fi+time.Second))
		// The first read comes long after the leadership ended (a
		// partition), and finds exactly its own record.
		m.on(evTimer{}, at(10*time.Minute))
		if !calling[doRead](m) {
			t.Fatal("no read after the partition")
		}
		first := m.c.sh.sent
		m.read(last, `"c"`, first)
		noEffect[anyWrite](t, m, "its own record, first read now")
		for n := 0; ; n++ {
			if n == 100 {
				t.Fatal("no takeover of its own record within 100 steps")
			}
			m.on(evTimer{}, m.wake)
			if !calling[doRead](m) {
				continue
			}
			m.read(last, `"c"`, m.c.sh.sent)
			if calling[doClaim](m) {
				break
			}
			noEffect[anyWrite](t, m, "its own record, before a LeaderTimeout from the first read")
		}
		if got := m.c.sh.sent.Sub(first); got < p.lt {
			t.Fatalf("takeover %v after the first read of its own record; want at least LeaderTimeout %v", got, p.lt)
		}
		w := mustEffect[doClaim](t, m, "its own record, a LeaderTimeout after the first read")
		if rec, _ := ParseRecord(w.data); w.ifMatch != `"c"` || rec.Term != 2 {
			t.Fatalf("claim %s over %q; want a takeover at term 2 over its own record", w.data, w.ifMatch)
		}
	})
	t.Run("L6 (3.1) leader: the lease deadline ends the leadership", func(t *testing.T) {
		m := win(t)
		m.on(evTimer{}, at(p.fi)) // renewal sent, reply never comes
		m.on(evTimer{}, at(p.lt-p.margin))
		if e := mustEffect[doEnd](t, m, "deadline"); !errors.Is(e.cause, ErrLeaseExpired) {
			t.Fatalf("cause %v; want ErrLeaseExpired", e.cause)
		}
	})
	t.Run("L7 E1 E2 (4) leader: Resign releases with lastUpdated zero, same term", func(t *testing.T) {
		m := win(t)
		m.on(evLeadDone{ErrResigned}, at(500*time.Millisecond))
		w := mustEffect[doRelease](t, m, "resign")
		rec, _ := ParseRecord(w.data)
		if w.ifMatch != `"c"` || !rec.LastUpdated.IsZero() || rec.Term != 1 {
			t.Fatalf("release = %+v %+v; want lastUpdated zero, same term, over \"c\"", w, rec)
		}
		m.wrote(`"r"`, nil, at(600*time.Millisecond))
		if x := mustEffect[doExited](t, m, "released"); x.err != nil {
			t.Errorf("exited with %v; want nil", x.err)
		}
		if m.c.fol().v.kind != kindVacant {
			t.Errorf("view after release = %v; want vacant", m.c.fol().v.kind)
		}
	})
	t.Run("E1 (4) leader: a release after an unsure renewal goes over it if it landed", func(t *testing.T) {
		m := win(t)
		m.on(evTimer{}, at(p.fi))
		renewal := mustEffect[doRenew](t, m, "renewal")
		m.on(evLeadDone{ErrResigned}, at(p.fi+10*time.Millisecond))
		m.on(evStore{gen: m.c.sh.gen, err: errors.New("cut"), unsure: true}, at(p.fi+20*time.Millisecond))
		w := mustEffect[doRelease](t, m, "release")
		if string(w.orOver) != string(renewal.data) {
			t.Fatalf("release = %+v; want it to go over the unsure renewal if that landed", w)
		}
	})
	t.Run("C2 C3 (4) Campaign again after Done waits for the release, then a fresh read", func(t *testing.T) {
		m := win(t)
		m.on(evCampaign{id: 2, lease: "l2"}, at(200*time.Millisecond))
		if a := mustEffect[doAnswer](t, m, "campaign while leading"); a.err != ErrCampaigning {
			t.Fatalf("answer %v; want ErrCampaigning", a.err)
		}
		m.on(evLeadDone{ErrResigned}, at(300*time.Millisecond))
		m.on(evCampaign{id: 3, lease: "l3"}, at(300*time.Millisecond)) // Done is closed: accepted
		noEffect[doAnswer](t, m, "campaign after Done")
		m.wrote(`"r"`, nil, at(400*time.Millisecond))
		noEffect[doRead](t, m, "campaign after the release: its own released record is left to the others first (section 11)")
		m.on(evTimer{}, m.wake)
		mustEffect[doRead](t, m, "campaign after the release: a takeover goes only on a fresh read")
		m.read(Record{LeaderID: "me", Term: 1, Lease: "l1", TTL: 3000}.encode(), `"r"`, at(410*time.Millisecond))
		w := mustEffect[doClaim](t, m, "campaign after the release")
		rec, _ := ParseRecord(w.data)
		if rec.Term != 2 || rec.Lease == m.lease || len(rec.Lease) != 16 {
			t.Fatalf("claim = %+v %+v; want term 2 with a new lease", w, rec)
		}
	})
}

// TestCoreEveryTakeoverHasItsOwnLease: a takeover that failed may have
// landed anyway; the next attempt starts a leadership of its own, so that
// no follower measures its held times from the other's first write
// (docs/protocol.md, 1, lease; 9, 16).
func TestCoreEveryTakeoverHasItsOwnLease(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, nil, "", at(0))
	first, _ := ParseRecord(mustEffect[doClaim](t, m, "first takeover").data)
	m.wrote("", errors.New("timeout"), at(time.Second)) // outcome unknown
	for now := 2 * time.Second; ; now += time.Second {
		m.on(evTimer{}, at(now))
		if calling[doRead](m) {
			m.read(nil, "", at(now))
		}
		if w, ok := effectOf[doClaim](m); ok {
			second, _ := ParseRecord(w.data)
			if second.Lease == first.Lease {
				t.Fatalf("second takeover reuses lease %s", first.Lease)
			}
			return
		}
		if now > time.Minute {
			t.Fatal("no second takeover")
		}
	}
}

// TestCoreCorruptLockfileKeepsTermsRising: unreadable content is taken
// over with its term salvaged and raised (docs/protocol.md, 1; 9, 2).
func TestCoreCorruptLockfileKeepsTermsRising(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, []byte(`{"term": 41, "leaderID": 7}`), `"x"`, at(0))
	for now := time.Second; now <= noTTLLease; now += time.Second {
		m.on(evTimer{}, at(now))
		if calling[doRead](m) {
			m.read([]byte(`{"term": 41, "leaderID": 7}`), `"x"`, at(now))
		}
	}
	w := mustEffect[doClaim](t, m, "takeover of unreadable content")
	if rec, _ := ParseRecord(w.data); rec.Term != 42 || w.ifMatch != `"x"` {
		t.Fatalf("takeover = term %d over %s; want term 42 over \"x\"", rec.Term, w.ifMatch)
	}
}

// TestCoreTermNeverWraps: a term that cannot be raised is refused with an
// error naming the lockfile (docs/protocol.md, 1, term).
func TestCoreTermNeverWraps(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, Record{LeaderID: "x", Term: math.MaxUint64, TTL: 3000}.encode(), `"r"`, at(0))
	a := mustEffect[doAnswer](t, m, "released record at the largest term")
	if a.err == nil || !strings.Contains(a.err.Error(), "cannot be raised") {
		t.Fatalf("answer %v; want an error saying the term cannot be raised", a.err)
	}
	noEffect[anyWrite](t, m, "term overflow")
}

// TestCoreIntervals: the follower's pace (docs/protocol.md, 4, the
// follower states, and 3.3): frequent reads a slack after each renewal is
// due until a leader has renewed steadily for LeaderTimeout, then
// infrequent reads timed after a renewal, and back to frequent on a late
// record.
func TestCoreIntervals(t *testing.T) {
	p := coreParams
	m := newMachine(t, p)
	// A leader renewing every second from 400 ms, the follower's first
	// read at 700 ms: each later frequent read comes a slack after a renewal
	// is due (3.3), every FrequentInterval, and sees that renewal; after
	// LT of steady renewals the follower reads every InfrequentInterval.
	const phase = 400 * time.Millisecond
	stamp := func(now time.Duration) time.Duration { return (now-phase)/p.fi*p.fi + phase } // the last renewal due by now
	now, last := 700*time.Millisecond, time.Duration(-1)
	m.on(evTimer{}, at(now))
	for m.c.fol().mode != infrequent {
		if now > p.lt+2*p.fi {
			t.Fatalf("still %v at %v, after steady renewals since %v", m.c.fol().mode, now, phase)
		}
		if last >= 0 {
			if want := stamp(now) + slack; now != want || now-last > p.fi {
				t.Errorf("frequent read at %v, %v after the last; want %v, a slack after the renewal due at %v, at most FrequentInterval after the last",
					now, now-last, want, stamp(now))
			}
		}
		m.read(held("x", 1, "a", int64((stamp(now)-phase)/time.Millisecond), stamp(now)), fmt.Sprintf(`"%d"`, stamp(now)), at(now))
		last = now
		for !calling[doRead](m) && m.c.fol().mode != infrequent {
			now = m.wake.Sub(t0)
			m.on(evTimer{}, at(now))
		}
	}
	// The next read is timed just after one of the leader's renewals is
	// due (by its stamps, every FrequentInterval), no sooner than
	// InfrequentInterval after the last read.
	for !calling[doRead](m) {
		now = m.wake.Sub(t0)
		m.on(evTimer{}, at(now))
	}
	if gap := now - last; gap < p.fi || gap > time.Duration((p.ii+p.fi-1)/p.fi)*p.fi {
		t.Errorf("infrequent read %v after the last; want within the k renewals after it (the one of its slot), k = InfrequentInterval/FrequentInterval rounded up", gap)
	}
	if got := now - stamp(now); got != slack {
		t.Errorf("infrequent read %v after a renewal was due; want %v", got, slack)
	}
	// The renewal due just before that read is missing: the record is late
	// by the hint, and the follower reads every FrequentInterval again.
	m.read(held("x", 1, "a", 99_000, now-slack-p.fi), `"late"`, at(now))
	if m.c.fol().mode != frequent {
		t.Errorf("mode after a late-looking record = %v; want frequent", m.c.fol().mode)
	}
}

// TestCorePeerReports: what a peer-mode follower makes of the poller's
// reports (docs/protocol.md, 5), a row each.
func TestCorePeerReports(t *testing.T) {
	p := coreParams
	p.peerMode = true
	steady := func(t *testing.T) (*machine, time.Duration) {
		m := newMachine(t, p)
		m.on(evCampaign{id: 1, lease: "l1"}, at(0))
		now := time.Duration(0)
		for i := int64(0); m.c.fol().mode != peerWatch; i++ {
			// Renewal i is due at i s; after the first, the follower reads
			// a slack after each (3.3).
			m.read(held("x", 1, "a", i*1000, time.Duration(i)*p.fi), fmt.Sprintf(`"%d"`, i), at(now))
			if m.c.fol().mode == peerWatch {
				break
			}
			now = time.Duration(i+1)*p.fi + slack
			m.on(evTimer{}, at(now))
		}
		mustEffect[doPeer](t, m, "steady leader in peer mode")
		return m, now
	}
	t.Run("F11 (5) an answer with a new ETag and more held is a sighting", func(t *testing.T) {
		m, now := steady(t)
		rec, _ := ParseRecord(held("x", 1, "a", 99_000, now))
		m.on(evPeer{gen: m.c.sh.peerGen, rec: rec, etag: `"p"`, at: at(now + 2*time.Second)}, at(now+2*time.Second))
		if m.c.fol().v.etag != `"p"` || !m.c.fol().v.seenAt.Equal(at(now+2*time.Second)) {
			t.Fatalf("view after a peer answer = %s seen %v; want \"p\" seen when the answer came", m.c.fol().v.etag, m.c.fol().v.seenAt.Sub(t0))
		}
		noEffect[doRead](t, m, "honest peer")
	})
	t.Run("F14 (5) a stale peer cannot hold the election past the takeover time (9, 8)", func(t *testing.T) {
		m, now := steady(t)
		rec := m.c.fol().v.rec
		deadline, _ := m.c.fol().v.takeoverAt(m.c.sh.lease(m.c.fol().v))
		for d := now; d < deadline.Sub(t0); d += 100 * time.Millisecond {
			m.on(evPeer{gen: m.c.sh.peerGen, rec: rec, etag: m.c.fol().v.etag, at: at(d)}, at(d)) // the same record, forever
			noEffect[doRead](t, m, "before the takeover time")
		}
		m.on(evTimer{}, deadline)
		mustEffect[doRead](t, m, "takeover time passed with nothing new heard")
		m.read(m.c.fol().v.rec.encode(), m.c.fol().v.etag, deadline)
		if w, _ := effectOf[anyWrite](m); !is[doClaim](w) {
			t.Fatalf("write %T %+v; want a takeover", w, w)
		}
	})
	t.Run("F12 (5) an answer without an ETag is a hint: reads go on every InfrequentInterval", func(t *testing.T) {
		m, now := steady(t)
		seen := m.c.fol().v.seenAt
		rec := m.c.fol().v.rec
		m.on(evPeer{gen: m.c.sh.peerGen, rec: rec, at: at(now + time.Second)}, at(now+time.Second))
		if !m.c.fol().v.seenAt.Equal(seen) {
			t.Fatalf("an answer without an ETag moved the first sight to %v", m.c.fol().v.seenAt.Sub(t0))
		}
		m.on(evTimer{}, at(now+p.ii))
		mustEffect[doRead](t, m, "no-ETag peer: the store is read every InfrequentInterval")
	})
	t.Run("F13 (5) a peer failure reads the store at once", func(t *testing.T) {
		m, now := steady(t)
		m.on(evPeer{gen: m.c.sh.peerGen, err: errors.New("connection refused"), at: at(now + time.Second)}, at(now+time.Second))
		mustEffect[doRead](t, m, "peer failure")
		if m.c.fol().mode != frequent {
			t.Errorf("mode after a peer failure = %v; want frequent", m.c.fol().mode)
		}
	})
	t.Run("F15 (5) a report about a dropped target is ignored", func(t *testing.T) {
		m, now := steady(t)
		m.on(evPeer{gen: m.c.sh.peerGen - 1, err: errors.New("refused")}, at(now+time.Second))
		noEffect[doRead](t, m, "report about a dropped target")
	})
}

// TestCoreWithdrawAndCloseDuringTakeover: a takeover in flight decides the
// outcome of a Campaign that gave up or of Close (docs/protocol.md, 4).
func TestCoreWithdrawAndCloseDuringTakeover(t *testing.T) {
	claim := func(t *testing.T) *machine {
		m := newMachine(t, coreParams)
		campaignAt(t, m, nil, "", at(0))
		mustEffect[doClaim](t, m, "claim")
		return m
	}
	t.Run("C19 (4) a Campaign withdrawn during its takeover releases what it won", func(t *testing.T) {
		m := claim(t)
		cause := errors.New("caller gave up")
		m.on(evWithdraw{id: 1, cause: cause}, at(10*time.Millisecond))
		noEffect[doAnswer](t, m, "withdrawal while the takeover is in flight")
		m.wrote(`"c"`, nil, at(20*time.Millisecond))
		noEffect[doLead](t, m, "won for a withdrawn campaign")
		if w := mustEffect[anyWrite](t, m, "won for a withdrawn campaign"); !is[doRelease](w) {
			t.Fatalf("write %+v; want the release", w)
		}
		m.wrote(`"r"`, nil, at(30*time.Millisecond))
		if a := mustEffect[doAnswer](t, m, "released"); a.err != cause {
			t.Fatalf("answer %v; want the withdrawal's cause", a.err)
		}
	})
	t.Run("C19 (4) a Campaign withdrawn during a takeover that loses is answered", func(t *testing.T) {
		m := claim(t)
		m.on(evWithdraw{id: 1, cause: errors.New("gave up")}, at(10*time.Millisecond))
		m.wrote("", store.ErrPreconditionFailed, at(20*time.Millisecond))
		mustEffect[doAnswer](t, m, "lost takeover of a withdrawn campaign")
	})
	t.Run("C19 X2 (4) Close during a takeover releases what it won, then closes", func(t *testing.T) {
		m := claim(t)
		m.on(evClose{}, at(10*time.Millisecond))
		noEffect[doClosed](t, m, "close with a takeover in flight")
		m.wrote(`"c"`, nil, at(20*time.Millisecond))
		if w := mustEffect[anyWrite](t, m, "won during Close"); !is[doRelease](w) {
			t.Fatalf("write %+v; want the release", w)
		}
		m.wrote(`"r"`, nil, at(30*time.Millisecond))
		if a := mustEffect[doAnswer](t, m, "closed"); a.err != ErrClosed {
			t.Fatalf("answer %v; want ErrClosed", a.err)
		}
		mustEffect[doClosed](t, m, "after the release")
	})
	t.Run("X1 (2) a result of an earlier store call is ignored", func(t *testing.T) {
		m := claim(t)
		m.on(evStore{gen: m.c.sh.gen - 1, etag: `"old"`}, at(10*time.Millisecond))
		noEffect[doLead](t, m, "result of an earlier call")
		if !calling[doClaim](m) {
			t.Fatalf("call in flight %T; want the claim still", m.c.sh.call)
		}
	})
}

// TestCoreAdoptsATakeoverThatLanded: a takeover that failed with its
// outcome unknown, whose bytes the next read finds, won; the lease counts
// from its first attempt (docs/protocol.md, 4, Takeover; 9, 1).
func TestCoreAdoptsATakeoverThatLanded(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, nil, "", at(0))
	w := mustEffect[doClaim](t, m, "takeover")
	m.on(evStore{gen: m.c.sh.gen, err: errors.New("timeout"), unsure: true}, at(time.Second))
	mustEffect[doRead](t, m, "a takeover with an unknown outcome")
	m.read(w.data, `"won"`, at(time.Second+10*time.Millisecond))
	l := mustEffect[doLead](t, m, "our bytes in the store")
	if !l.deadline.Equal(at(coreParams.lt - coreParams.margin)) {
		t.Errorf("deadline %v; want from the takeover's first attempt", l.deadline.Sub(t0))
	}
	if m.c.lead().etag != `"won"` {
		t.Errorf("etag %s; want the one read", m.c.lead().etag)
	}
}

// TestCoreAlignedRead checks the timing of a follower's reads
// (docs/protocol.md, 3.3) on the pure helper: FrequentInterval 1s,
// InfrequentInterval 5s (k = 5 renewals a cycle), slack 62.5 ms. A
// frequent read is the case ii = FrequentInterval (k = 1).
func TestCoreAlignedRead(t *testing.T) {
	const fi, ii = time.Second, 5 * time.Second
	ms := time.Millisecond
	cases := []struct {
		name    string
		due     time.Duration // when the read would be due without alignment
		stamped time.Duration // the local time the record's stamp names
		held    int64
		slot    uint32
		ii      time.Duration
		want    time.Duration
		halves  bool // InfrequentInterval = FrequentInterval
	}{
		{"F4 (3.3) infrequent read lands just after a renewal is due", 5 * time.Second, 0, 0, 0, ii, 5*time.Second + slack, false},
		{"F4 (3.3) the follower's slot picks which renewal of the k ending with the one due it reads after", 5 * time.Second, 0, 0, 2, ii, 2*time.Second + slack, false},
		{"F4 (3.3) renewals are numbered by the record's held, so slots agree across followers", 5 * time.Second, 0, 3000, 0, ii, 2*time.Second + slack, false},
		{"F4 (3.3) a slot below the renewal number wraps within the k renewals", 5 * time.Second, 0, 4000, 3, ii, 4*time.Second + slack, false},
		{"F4 (3.3) due between renewals: the nearest one, by rounding (here before due)", 5500 * ms, 0, 0, 0, ii, 5*time.Second + slack, false},
		{"F4 (3.3) due past the midpoint: the next renewal (slot 1 reads after renewal 6)", 5700 * ms, 0, 0, 1, ii, 6*time.Second + slack, false},
		{"F3 (3.3) one renewal per InfrequentInterval (k = 1): no slots", time.Second, 0, 0, 3, fi, time.Second + slack, false},
		{"F4 (3.3) the phase comes from the stamp, not from the read", 5*time.Second + 300*ms, 300 * ms, 0, 0, ii, 5*time.Second + 300*ms + slack, false},
		{"F3 (3.3) frequent read (k = 1): a slack after the next renewal, for a record read as it was stamped", time.Second, 0, 0, 0, fi, time.Second + slack, false},
		{"F3 (3.3) frequent read: a record read before the midpoint of its cycle is read again a slack after the next renewal, before due", 1400 * ms, 0, 0, 0, fi, time.Second + slack, false},
		{"F3 (3.3) frequent read: the phase comes from the stamp (renewals due at 300 ms), and slots play no part", 2 * time.Second, 300 * ms, 0, 5, fi, 2*time.Second + 300*ms + slack, false},
		{"F3 (3.3) frequent read: a dead leader's phase is kept, one read every FrequentInterval", 5*time.Second + slack, 0, 0, 0, fi, 5*time.Second + slack, false},
		{"F3 (3.3) InfrequentInterval = FrequentInterval: at some renewals a slot reads half a FrequentInterval later (slot 0, renewal 1)", time.Second, 0, 0, 0, fi, time.Second + slack + fi/2, true},
		{"F3 (3.3) InfrequentInterval = FrequentInterval: at the same renewal another slot reads a slack after it (slot 1, renewal 1)", time.Second, 0, 0, 1, fi, time.Second + slack, true},
		{"F3 (3.3) InfrequentInterval = FrequentInterval: the half slot changes with the renewal (slot 1, renewal 2)", 2 * time.Second, 0, 0, 1, fi, 2*time.Second + slack + fi/2, true},
		{"F3 (3.3) InfrequentInterval = FrequentInterval: renewals are numbered by held, so followers agree on them (slot 1, renewal 1 + 1)", time.Second, 0, 1000, 1, fi, time.Second + slack + fi/2, true},
		{"F3 (3.3) InfrequentInterval = FrequentInterval: a dead leader's phase is kept (renewal 7 of slot 0: the half slot)", 7*time.Second + slack, 0, 0, 0, fi, 7*time.Second + slack + fi/2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, off := alignedRead(at(tc.due), at(tc.stamped), tc.held, tc.slot, "", fi, tc.ii, tc.halves)
			if !got.Equal(at(tc.want)) {
				t.Errorf("alignedRead(due %v, stamped %v, held %d, slot %d) = %v; want %v",
					tc.due, tc.stamped, tc.held, tc.slot, got.Sub(t0), tc.want)
			}
			if wantOff := (tc.want - tc.stamped - slack) % fi; off != wantOff {
				t.Errorf("alignedRead(due %v, stamped %v, held %d, slot %d): offset %v; want %v", tc.due, tc.stamped, tc.held, tc.slot, off, wantOff)
			}
		})
	}
}

// TestCoreHalfSlots checks the half slots' bits (docs/protocol.md, 3.3):
// about half the renewals of a leadership, different for two followers,
// and different from one leadership to the next, so that a group whose
// leaders resign after the same number of renewals does not meet the same
// bits every time.
func TestCoreHalfSlots(t *testing.T) {
	bits := func(slot uint32, lease string) (set int, pattern uint64) {
		for j := range int64(64) {
			if halfSlot(slot, lease, j) {
				set++
				pattern |= 1 << j
			}
		}
		return set, pattern
	}
	a, pa := bits(1, "5d1c0b7e93aa4f20")
	b, pb := bits(2, "5d1c0b7e93aa4f20")
	_, pa2 := bits(1, "0e92c1fb45413076")
	for _, n := range []int{a, b} {
		if n < 20 || n > 44 {
			t.Errorf("%d of 64 renewals in the half slot; want about half", n)
		}
	}
	if pa == pb {
		t.Errorf("slots 1 and 2 take the half slot at the same renewals (%064b)", pa)
	}
	if pa == pa2 {
		t.Errorf("slot 1 takes the half slot at the same renewals in two leaderships (%064b)", pa)
	}
}

// TestCoreReadLag checks how a follower's timed reads learn to come later
// when renewals land later than the slack after their stamps
// (docs/protocol.md, 3.3, the lag): FrequentInterval 1s, slack 62.5 ms, a
// timed read's lateness bound 562.5 ms.
func TestCoreReadLag(t *testing.T) {
	const fi = time.Second
	ms := time.Millisecond
	cases := []struct {
		name     string
		lag, age time.Duration
		want     time.Duration
	}{
		{"F6 (3.3) a timed read that found its renewal keeps no lag", 0, 80 * ms, 0},
		{"F6 (3.3) a timed read that found the renewal before its own came too early: the slack is added", 0, fi + 80*ms, slack},
		{"F6 (3.3) another read too early: twice the lag and the slack", slack, fi + 150*ms, 3 * slack},
		{"F6 (3.3) the lag stops at a quarter of FrequentInterval", 200 * ms, fi + 500*ms, fi / 4},
		{"F6 (3.3) a read that found its renewal shrinks the lag by a thirty-second", 320 * ms, 400 * ms, 310 * ms},
		{"F6 (3.3) the bound is the infrequent timed read's lateness: at it, a hit", 32 * ms, 562500 * time.Microsecond, 31 * ms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextLag(tc.lag, tc.age, fi); got != tc.want {
				t.Errorf("nextLag(%v, age %v) = %v; want %v", tc.lag, tc.age, got, tc.want)
			}
		})
	}
}

// TestCoreSlowWritesMoveReadsLater: a leader renews every second, but each
// renewal becomes visible only 200 ms after its stamp, later than the
// slack (a slow store, or a follower's clock ahead of the leader's). The
// follower's timed reads find the renewal before the one they were timed
// for, learn a lag (docs/protocol.md, 3.3), and from then on find each
// renewal after it landed, but for a rare read where the shrinking lag is
// tried; the reads come no closer together than before.
func TestCoreSlowWritesMoveReadsLater(t *testing.T) {
	p := coreParams
	const landing = 200 * time.Millisecond
	visible := func(now time.Duration) int64 { return int64((now - landing) / p.fi) } // the last renewal landed by now
	m := newMachine(t, p)
	now := 1500 * time.Millisecond
	m.on(evTimer{}, at(now))
	var misses []int
	last := now
	for i := 0; i < 60; i++ {
		r := visible(now)
		if age := now - time.Duration(r)*p.fi; i > 0 && age > p.fi/2 {
			misses = append(misses, i)
		}
		m.read(held("x", 1, "a", r*1000, time.Duration(r)*p.fi), fmt.Sprintf(`"%d"`, r), at(now))
		for !calling[doRead](m) {
			now = m.wake.Sub(t0)
			m.on(evTimer{}, at(now))
		}
		if i > 0 && now-last < p.fi-p.fi/64 {
			t.Errorf("read %d came %v after the last; want about FrequentInterval", i+1, now-last)
		}
		last = now
	}
	t.Logf("reads that found the renewal before the one they were timed for: %v; lag %v", misses, m.c.fol().lag)
	if len(misses) == 0 || misses[0] > 3 {
		t.Fatalf("misses %v; want the first timed reads to come too early", misses)
	}
	late := 0
	for _, i := range misses {
		if i > 5 { // learnt by then
			late++
		}
	}
	if late > 55/15 {
		t.Errorf("%d of the last 55 reads came before their renewal landed (%v); want at most one in fifteen, where the shrinking lag is tried", late, misses)
	}
	if m.c.fol().lag > p.fi/4 {
		t.Errorf("lag %v; want at most a quarter of FrequentInterval", m.c.fol().lag)
	}
}

// TestCoreHalfSlotReads: with InfrequentInterval = FrequentInterval a
// stable follower reads either a slack after each renewal or half a
// FrequentInterval later (docs/protocol.md, 3.3, half slots). A read in
// the half slot that finds its renewal is not late and teaches no lag, so
// the follower stays stable; once the renewals stop, its next read, in
// either slot, finds the record late and goes to the frequent pace.
func TestCoreHalfSlotReads(t *testing.T) {
	p := coreParams
	p.ii = p.fi
	m := newMachine(t, p)
	now := 1500 * time.Millisecond
	m.on(evTimer{}, at(now))
	const crashAfter = 30 // the last renewal
	halves, firsts := 0, 0
	for i := 0; i < 40; i++ {
		r := min(int64(now/p.fi), crashAfter) // the last renewal written by now
		now += 20 * time.Millisecond          // the read's round trip
		m.read(held("x", 1, "a", r*1000, time.Duration(r)*p.fi), fmt.Sprintf(`"%d"`, r), at(now))
		f := m.c.fol()
		switch {
		case r < crashAfter && i >= 5 && f.mode != infrequent:
			t.Fatalf("read %d at %v found renewal %d: mode %v; want infrequent", i, now, r, f.mode)
		case r == crashAfter && now >= time.Duration(crashAfter+1)*p.fi+slack && f.mode != frequent:
			t.Fatalf("read %d at %v found renewal %d after renewal %d was due: mode %v; want frequent", i, now, r, r+1, f.mode)
		}
		if f.lag != 0 {
			t.Fatalf("read %d at %v: lag %v; want none, every renewal landed at once", i, now, f.lag)
		}
		for !calling[doRead](m) {
			now = m.wake.Sub(t0)
			m.on(evTimer{}, at(now))
		}
		if r == crashAfter && f.mode == frequent {
			break
		}
		switch now % p.fi {
		case slack:
			firsts++
		case slack + p.fi/2:
			halves++
		default:
			t.Fatalf("read at %v; want a slack after a renewal is due, or half a FrequentInterval later", now)
		}
	}
	if halves < 5 || firsts < 5 {
		t.Errorf("%d reads a slack after the renewal, %d half a FrequentInterval later; want both, often", firsts, halves)
	}
}

// TestCoreLateRecord checks when a record counts as late (docs/protocol.md,
// 3.3), which sends a follower to the frequent pace.
func TestCoreLateRecord(t *testing.T) {
	const fi = time.Second
	cases := []struct {
		name    string
		aligned bool
		want    time.Duration
	}{
		{"F3 (3.3) a record older than one and a half FrequentIntervals is late", false, 1500 * time.Millisecond},
		{"F5 (3.3) at an infrequent read timed after a renewal, older than half a FrequentInterval and the slack is late", true, 562500 * time.Microsecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lateAge(fi, tc.aligned); got != tc.want {
				t.Errorf("lateAge(%v, aligned %v) = %v; want %v", fi, tc.aligned, got, tc.want)
			}
		})
	}
}

// TestCoreRolesDoNotOverlap: a follower's state does not live while
// leading, and a new follower starts after the leadership ends
// (docs/protocol.md, 4).
func TestCoreRolesDoNotOverlap(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, nil, "", at(0))
	if m.c.fol() == nil || m.c.lead() != nil {
		t.Fatalf("while the takeover is in flight: follower %v leader %v; want a follower only", m.c.fol() != nil, m.c.lead() != nil)
	}
	m.wrote(`"c"`, nil, at(10*time.Millisecond))
	if m.c.fol() != nil || m.c.lead() == nil {
		t.Fatalf("after the win: follower %v leader %v; want a leader only", m.c.fol() != nil, m.c.lead() != nil)
	}
	if st := mustEffect[doStatus](t, m, "win"); st.st.mode != "leader" || !st.st.holding || !st.st.change.IsLeader {
		t.Errorf("status after the win = %+v; want leader, holding, IsLeader", st.st)
	}
	m.on(evLeadDone{ErrResigned}, at(20*time.Millisecond))
	m.wrote(`"r"`, nil, at(30*time.Millisecond))
	if m.c.fol() == nil || m.c.lead() != nil {
		t.Fatalf("after the release: follower %v leader %v; want a follower only", m.c.fol() != nil, m.c.lead() != nil)
	}
	if m.c.fol().v.kind != kindVacant || m.c.fol().mode != frequent {
		t.Errorf("new follower: view %v mode %v; want the released record, frequent", m.c.fol().v.kind, m.c.fol().mode)
	}
	// The status that says the leadership is over comes before the
	// Leadership is told it is over, so that Leader() says so first.
	var sawStatus bool
	for _, f := range m.fx {
		switch f := f.(type) {
		case doStatus:
			sawStatus = !f.st.holding && !f.st.change.IsLeader
		case doExited:
			if !sawStatus {
				t.Fatalf("doExited before a status without the leadership: %s", describe(m.fx))
			}
		}
	}
}

// TestCoreNoTTLRecordWaitsLongestLeaseSeen: a record without ttl after one
// that stated a lease longer than noTTLLease is waited out with that lease
// (docs/protocol.md, 3.1, records without a lease).
func TestCoreNoTTLRecordWaitsLongestLeaseSeen(t *testing.T) {
	m := newMachine(t, coreParams)
	campaignAt(t, m, heldTTL("x", 4, "a", 0, 0, 20*time.Second), `"a"`, at(0))
	first := time.Second + slack // the next read, a slack after the renewal due at 1s (3.3)
	m.on(evTimer{}, at(first))
	v1 := Record{LeaderID: "y", LastUpdated: at(time.Second)}.encode() // the original s3lect took over
	m.read(v1, `"b"`, at(first))
	for now := 2 * time.Second; now < first+20*time.Second; now += time.Second {
		m.on(evTimer{}, at(now))
		if calling[doRead](m) {
			m.read(v1, `"b"`, at(now))
		}
		noEffect[anyWrite](t, m, fmt.Sprintf("%v after first seeing a record without ttl, having seen a 20s lease", now-time.Second))
	}
	m.on(evTimer{}, at(first+20*time.Second))
	if calling[doRead](m) {
		m.read(v1, `"b"`, at(first+20*time.Second))
	}
	mustEffect[doClaim](t, m, "20s after first seeing the record without ttl")
}

// TestCoreTermObject: every takeover reads the term object, raises it over
// the ETag read to one more than the highest term it knows, and only then
// writes the lockfile with that term (docs/protocol.md, 1.1).
func TestCoreTermObject(t *testing.T) {
	defer setMutation(t)()
	t.Run("C8 C10 (1.1) the term object is raised before the takeover, whose term it gives", func(t *testing.T) {
		m := newMachine(t, coreParams)
		m.manualTerm = true
		campaignAt(t, m, nil, "", at(0))
		mustEffect[doReadTerm](t, m, "takeover of an absent lockfile")
		if !calling[doReadTerm](m) {
			t.Fatalf("first call of a takeover = %T; want a read of the term object", m.c.sh.call)
		}
		noEffect[anyWrite](t, m, "before the term object is read")
		m.on(evStore{gen: m.c.sh.gen}, at(0)) // absent
		cl := mustEffect[doClaimTerm](t, m, "term object absent")
		if cl.ifMatch != "" || cl.term != 1 {
			t.Fatalf("claim of term %d over %q; want a create of term 1's claim", cl.term, cl.ifMatch)
		}
		noEffect[doRaiseTerm](t, m, "before the claim is created")
		m.on(evStore{gen: m.c.sh.gen, etag: `"c1"`}, at(0))
		w := mustEffect[doRaiseTerm](t, m, "term 1 claimed")
		var obj termObject
		if err := json.Unmarshal(w.data, &obj); err != nil || w.ifMatch != "" || obj.Term != 1 {
			t.Fatalf("raise %s over %q; want a create of the term object at term 1", w.data, w.ifMatch)
		}
		m.on(evStore{gen: m.c.sh.gen, etag: `"t1"`}, at(0))
		c := mustEffect[doClaim](t, m, "term object raised")
		if rec, _ := ParseRecord(c.data); rec.Term != 1 || rec.Lease != obj.Lease {
			t.Fatalf("claim %s; want the takeover at term 1 with the term object's lease", c.data)
		}
	})
	t.Run("C8 (1.1) a foreign write without a term: the next term still rises past the term object", func(t *testing.T) {
		// Terms 1 and 2 were held; the original s3lect wrote a record
		// without a term; a freshly started elector must not use 1 again.
		m := termMachine(t, 2)
		foreign := Record{LeaderID: "orig", LastUpdated: at(0)}.encode()
		campaignAt(t, m, foreign, `"f"`, at(0))
		for now := time.Second; ; now += time.Second {
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				m.read(foreign, `"f"`, at(now))
			}
			if w, ok := effectOf[doClaim](m); ok {
				if rec, _ := ParseRecord(w.data); rec.Term != 3 {
					t.Fatalf("takeover after a foreign write at term %d; want 3, above the term object's 2", rec.Term)
				}
				return
			}
			if now > time.Minute {
				t.Fatal("no takeover")
			}
		}
	})
	t.Run("T7 C7 (4) an absent lockfile beside a term object was deleted: waited out with the lease assumed without ttl (3.1)", func(t *testing.T) {
		// A fresh elector finds no lockfile but a term object: the
		// lockfile was deleted, maybe under a live lease. The term object
		// states no lease here: the one assumed for records without ttl.
		m := termMachine(t, 7)
		campaignAt(t, m, nil, "", at(0))
		noEffect[anyWrite](t, m, "absent lockfile with a term object")
		for now := time.Second; now < noTTLLease; now += time.Second {
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				m.read(nil, "", at(now))
			}
			noEffect[anyWrite](t, m, fmt.Sprintf("%v after first seeing a deleted lockfile", now))
		}
		m.on(evTimer{}, at(noTTLLease))
		if calling[doRead](m) {
			m.read(nil, "", at(noTTLLease))
		}
		w := mustEffect[doClaim](t, m, "the lease assumed for a deleted lockfile has passed")
		if rec, _ := ParseRecord(w.data); w.ifMatch != "" || rec.Term != 8 {
			t.Fatalf("claim %s over %q; want a create at term 8", w.data, w.ifMatch)
		}
	})
	t.Run("C14 C22 (4) a recreated lockfile's leadership is handed out a lease after the create", func(t *testing.T) {
		// A leader whose record was deleted, and that this elector never
		// saw, may renew until the deletion: its lease can run a lease
		// past it. The create holds everyone else off; Campaign returns
		// only once that lease has passed.
		m := termMachine(t, 7)
		campaignAt(t, m, nil, "", at(0))
		now := time.Duration(0)
		for ; ; now += 100 * time.Millisecond {
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				m.read(nil, "", at(now))
			}
			if _, ok := effectOf[doClaim](m); ok {
				break
			}
		}
		created := now
		m.wrote(`"c"`, nil, at(now))
		for ; now < created+noTTLLease; now += 100 * time.Millisecond {
			if calling[doRenew](m) {
				m.wrote(fmt.Sprintf(`"r%d"`, now), nil, at(now))
			}
			noEffect[doLead](t, m, fmt.Sprintf("%v after recreating the lockfile", now-created))
			m.on(evTimer{}, at(now+100*time.Millisecond))
		}
		for ; now < created+noTTLLease+time.Second; now += 100 * time.Millisecond {
			if _, ok := effectOf[doLead](m); ok {
				return
			}
			if calling[doRenew](m) {
				m.wrote(fmt.Sprintf(`"r%d"`, now), nil, at(now))
				if _, ok := effectOf[doLead](m); ok {
					return
				}
			}
			m.on(evTimer{}, at(now+100*time.Millisecond))
		}
		t.Fatal("the leadership was not handed out once the lease had passed")
	})
	t.Run("T3 (2.1) a record below a claimed term is waited out for the longest lease known, not its own ttl", func(t *testing.T) {
		// This elector (LeaderTimeout 3 s) read b's record of term 2
		// (ttl 9 s); then a record of term 1 with ttl 3 s, a restore,
		// is put back and b is cut off.
		m := newMachine(t, coreParams)
		b := Record{LeaderID: "b", Term: 2, Lease: "b2", LastUpdated: at(0), TTL: 9000}.encode()
		a := Record{LeaderID: "a", Term: 1, Lease: "a1", TTL: 3000}.encode() // a's release
		campaignAt(t, m, b, `"b"`, at(0))
		var first time.Duration // when the restored record was first read
		for now := 100 * time.Millisecond; ; now += 100 * time.Millisecond {
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				if first == 0 {
					first = now
				}
				m.read(a, `"a"`, at(now))
			}
			if _, ok := effectOf[doClaim](m); ok {
				if first == 0 || now-first < 9*time.Second {
					t.Fatalf("takeover %v after first seeing a restored record of term 1 below b's term 2; want none before b's 9 s lease", now-first)
				}
				return
			}
			if now > time.Minute {
				t.Fatal("no takeover")
			}
		}
	})
	t.Run("C26 (1.2) a version 2 writer's terms are claimed before the takeover's own; a refused one is a refused claim", func(t *testing.T) {
		for _, refused := range []bool{false, true} {
			// The term object says 1; a version 2 writer took over at 3
			// (no claim, no ttl) and released.
			m := newMachine(t, coreParams)
			m.manualTerm = true
			v2 := Record{LeaderID: "v2", Term: 3, Lease: "00000000000000f2"}.encode()
			campaignAt(t, m, v2, `"v2"`, at(0))
			for now := time.Second; !calling[doReadTerm](m); now += time.Second {
				m.on(evTimer{}, at(now))
				if calling[doRead](m) {
					m.read(v2, `"v2"`, at(now))
				}
				if now > time.Minute {
					t.Fatal("no takeover of a version 2 release")
				}
			}
			m.on(evStore{gen: m.c.sh.gen, data: termObj(1), etag: `"t1"`}, at(time.Minute))
			want := []uint64{3, 2}
			if refused {
				want = want[:1]
			}
			for _, term := range want {
				cl := mustEffect[doClaimTerm](t, m, "a version 2 writer's term above the term object's")
				if !cl.gap || cl.term != term {
					t.Fatalf("claim of term %d (for a version 2 writer: %v); want the version 2 writer's term %d first", cl.term, cl.gap, term)
				}
				if refused {
					m.on(evStore{gen: m.c.sh.gen, err: store.ErrPreconditionFailed}, at(time.Minute))
					if f := mustEffect[doFindTerm](t, m, "a version 2 writer's term claimed by another"); f.from != term {
						t.Fatalf("search for the highest claim from %d; want from %d", f.from, term)
					}
					noEffect[anyWrite](t, m, "a version 2 writer's term claimed by another")
					return
				}
				m.on(evStore{gen: m.c.sh.gen, etag: `"g"`}, at(time.Minute))
			}
			if cl := mustEffect[doClaimTerm](t, m, "the version 2 writer's terms claimed"); cl.gap || cl.term != 4 {
				t.Fatalf("claim of term %d (for a version 2 writer: %v); want the takeover's own, 4", cl.term, cl.gap)
			}
		}
	})
	t.Run("C26 (1.2) no claim for a version 2 term at or below a claim found", func(t *testing.T) {
		// As C26, the claim of the version 2 writer's term 3 refused: a
		// takeover made it and failed before its own (the term object
		// still says 1). The search finds 3; the next takeover claims its
		// own term, 4, not 3 again (before: refused at 3, a lease waited,
		// and again, with no leader ever; restorer seed 10 with the
		// version 2 history).
		m := newMachine(t, coreParams)
		m.manualTerm = true
		v2 := Record{LeaderID: "v2", Term: 3, Lease: "00000000000000f2"}.encode()
		campaignAt(t, m, v2, `"v2"`, at(0))
		takeover := func(from time.Duration) time.Duration {
			now := from
			for ; !calling[doReadTerm](m); now += time.Second {
				m.on(evTimer{}, at(now))
				if calling[doRead](m) {
					m.read(v2, `"v2"`, at(now))
				}
				if now > from+3*time.Minute {
					t.Fatal("no takeover of a version 2 release")
				}
			}
			m.on(evStore{gen: m.c.sh.gen, data: termObj(1), etag: `"t1"`}, at(now))
			return now
		}
		now := takeover(0)
		if cl := mustEffect[doClaimTerm](t, m, "a version 2 writer's term above the term object's"); !cl.gap || cl.term != 3 {
			t.Fatalf("claim of term %d (for a version 2 writer: %v); want the version 2 writer's term 3", cl.term, cl.gap)
		}
		m.on(evStore{gen: m.c.sh.gen, err: store.ErrPreconditionFailed}, at(now))
		mustEffect[doFindTerm](t, m, "a version 2 writer's term claimed by another")
		m.on(evStore{gen: m.c.sh.gen, term: 3, data: termObj(3)}, at(now))
		now = takeover(now + time.Second)
		if cl := mustEffect[doClaimTerm](t, m, "a takeover after the claim of 3 was found"); cl.gap || cl.term != 4 {
			t.Fatalf("claim of term %d (for a version 2 writer: %v); want the takeover's own, 4", cl.term, cl.gap)
		}
	})
	t.Run("C11 (1.1) the term object raised by another first: read the lockfile again", func(t *testing.T) {
		m := newMachine(t, coreParams)
		m.manualTerm = true
		campaignAt(t, m, nil, "", at(0))
		m.on(evStore{gen: m.c.sh.gen}, at(0))
		m.on(evStore{gen: m.c.sh.gen, etag: `"c1"`}, at(0)) // term 1 claimed
		m.on(evStore{gen: m.c.sh.gen, err: store.ErrPreconditionFailed}, at(0))
		noEffect[anyWrite](t, m, "term object raised by another takeover first")
		mustEffect[doRead](t, m, "term object raised by another takeover first: read the lockfile again")
	})
	// takeoverAfter drives m, whose view was first read at 0, with a read
	// of data (ETag etag) whenever one is due, until a lockfile write goes
	// out, and returns when (false: none within limit).
	takeoverAfter := func(m *machine, data []byte, etag string, limit time.Duration) (time.Duration, bool) {
		for now := time.Duration(0); now <= limit; now += 10 * time.Millisecond {
			if _, ok := effectOf[doClaim](m); ok {
				return now - 10*time.Millisecond, true
			}
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				m.read(data, etag, at(now))
			}
		}
		return 0, false
	}
	release := Record{LeaderID: "x", Term: 3, Lease: "a", TTL: 3000}.encode()
	t.Run("C23 (1.1) a release below a term claimed since it was first seen is waited out from then", func(t *testing.T) {
		// The term object says term 5 was claimed, which this elector
		// learns only at its term read: a takeover at 5 may still be
		// writing over this release (mutation claimnowait).
		m := termMachine(t, 5, 4, 5)
		campaignAt(t, m, release, `"r"`, at(0))
		noEffect[doClaim](t, m, "a release below term 5")
		when, ok := takeoverAfter(m, release, `"r"`, 2*coreParams.lt)
		if !ok || when < coreParams.lt {
			t.Fatalf("takeover of the release at %v (%v); want a LeaderTimeout (%v) after the term read found term 5", when, ok, coreParams.lt)
		}
		if rec, _ := ParseRecord(mustEffect[doClaim](t, m, "release waited out").data); rec.Term != 6 {
			t.Fatalf("takeover at term %d; want 6", rec.Term)
		}
	})
	t.Run("T2 (2.1) a release below the term this elector saw held is waited out from its first sight", func(t *testing.T) {
		// A restore of an earlier release while x leads at term 5, seen
		// by a follower that read x's record (mutation releaseatonce).
		m := termMachine(t, 5, 4, 5)
		campaignAt(t, m, heldTTL("x", 5, "b", 0, 0, 3*time.Second), `"h"`, at(0))
		for now := 10 * time.Millisecond; now < 2*time.Second; now += 10 * time.Millisecond {
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				m.read(release, `"r"`, at(now)) // the restore, first seen now
				first := now
				when, ok := takeoverAfter(m, release, `"r"`, first+2*coreParams.lt)
				if !ok || when < first+coreParams.lt {
					t.Fatalf("takeover of the restored release at %v (%v); want a LeaderTimeout after its first sight at %v", when, ok, first)
				}
				return
			}
		}
		t.Fatal("no read")
	})
	t.Run("T2 (2.1) a release of the highest claimed term is taken at once", func(t *testing.T) {
		m := termMachine(t, 3, 3)
		campaignAt(t, m, release, `"r"`, at(0))
		mustEffect[doClaim](t, m, "the release of the last leadership")
	})
	t.Run("C24 (1.1) a refused claim: the highest claim is found and the view waited out anew", func(t *testing.T) {
		// The term object was restored to 3 (or a takeover raised it
		// late): claims 4 to 9 exist, one of them perhaps still being
		// written over this release.
		m := termMachine(t, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9)
		campaignAt(t, m, release, `"r"`, at(0))
		noEffect[doClaim](t, m, "claim of term 4 refused")
		if m.c.sh.maxTerm != 9 {
			t.Fatalf("highest term known = %d after the search; want 9", m.c.sh.maxTerm)
		}
		when, ok := takeoverAfter(m, release, `"r"`, 2*coreParams.lt)
		if !ok || when < coreParams.lt {
			t.Fatalf("takeover at %v (%v); want a LeaderTimeout (%v) after the refused claim", when, ok, coreParams.lt)
		}
		if rec, _ := ParseRecord(mustEffect[doClaim](t, m, "waited out").data); rec.Term != 10 {
			t.Fatalf("takeover at term %d; want 10, above the highest claim", rec.Term)
		}
	})
	t.Run("C24 (1.1) a refused claim over an absence: waited out for the highest claim's ttl, not the lease assumed when none is known", func(t *testing.T) {
		// No lockfile, no term object; another takeover claimed term 1
		// (ttl 3 s) and may be writing the lockfile. Its lease is waited
		// out, not the 15 s assumed for a lease unknown (restorer seed
		// 5581: no leader 16 s after the faults stopped).
		m := newMachine(t, coreParams)
		m.manualTerm = true
		campaignAt(t, m, nil, "", at(0))
		m.on(evStore{gen: m.c.sh.gen}, at(0))                                   // term object absent: claim 1
		m.on(evStore{gen: m.c.sh.gen, err: store.ErrPreconditionFailed}, at(0)) // claimed by another
		mustEffect[doFindTerm](t, m, "claim of term 1 refused")
		m.on(evStore{gen: m.c.sh.gen, term: 1, data: []byte(`{"term":1,"by":"x","lease":"l","ttl":3000}`)}, at(0))
		for now := 100 * time.Millisecond; !calling[doReadTerm](m); now += 100 * time.Millisecond {
			if now > 2*coreParams.lt {
				t.Fatalf("no takeover %v after the refused claim; want one a LeaderTimeout (the claim's ttl, %v) after it", now, coreParams.lt)
			}
			m.on(evTimer{}, at(now))
			if calling[doRead](m) {
				m.read(nil, "", at(now))
			}
		}
	})
	t.Run("C12 (1.1) a permanent failure on the term object names it", func(t *testing.T) {
		m := newMachine(t, coreParams)
		m.manualTerm = true
		campaignAt(t, m, nil, "", at(0))
		m.on(evStore{gen: m.c.sh.gen, err: store.Permanent(errors.New("AccessDenied"))}, at(0))
		a := mustEffect[doAnswer](t, m, "term object denied")
		if a.err == nil || !strings.Contains(a.err.Error(), "term object") || !strings.Contains(a.err.Error(), "AccessDenied") {
			t.Fatalf("answer %v; want an error naming the term object and the store's refusal", a.err)
		}
	})
}

// TestCoreForeignRecordsCountedAndLoggedOnce: every new record without the
// version 2 fields is counted; the first is logged (docs/protocol.md, 1.2).
func TestCoreForeignRecordsCountedAndLoggedOnce(t *testing.T) {
	m := newMachine(t, coreParams)
	orig := func(stamp time.Duration) []byte { return Record{LeaderID: "orig", LastUpdated: at(stamp)}.encode() }
	logged := 0
	tally := func() {
		for _, f := range m.fx {
			if f, ok := f.(doLog); ok && strings.Contains(f.msg, "original s3lect") {
				logged++
			}
		}
	}
	m.on(evTimer{}, at(0)).read(orig(0), `"1"`, at(0))
	tally()
	// Reads come a slack after each renewal due (3.3).
	m.on(evTimer{}, at(time.Second+slack)).read(orig(0), `"1"`, at(time.Second+slack)) // the same record again
	tally()
	m.on(evTimer{}, at(2*time.Second+slack)).read(orig(2*time.Second), `"2"`, at(2*time.Second+slack))
	tally()
	m.on(evTimer{}, at(3*time.Second+slack)).read(held("x", 1, "a", 0, 3*time.Second), `"3"`, at(3*time.Second+slack))
	tally()
	st := mustEffect[doStatus](t, m, "a step").st
	if st.foreign != 2 || logged != 1 {
		t.Errorf("two records of the original s3lect, one read twice, and one of version 3: counted %d, logged %d; want 2 and 1", st.foreign, logged)
	}
}

// TestCoreLeaderTrustedUntil: the leader a follower shows runs out when a
// takeover would be allowed, or, for a stable follower reading the store,
// when its next read is overdue (Elector.Leader's doc).
func TestCoreLeaderTrustedUntil(t *testing.T) {
	m := newMachine(t, coreParams)
	m.on(evTimer{}, at(0)).read(held("x", 1, "a", 0, 0), `"0"`, at(0))
	if st := mustEffect[doStatus](t, m, "a frequent follower").st; !st.until.Equal(at(coreParams.lt)) {
		t.Errorf("frequent follower trusts the leader until %v; want the takeover time %v", st.until.Sub(t0), coreParams.lt)
	}
	now := time.Duration(0)
	for i := int64(1); m.c.fol().mode != infrequent; i++ { // renewal i is read a slack after it is due (3.3)
		now = time.Duration(i)*coreParams.fi + slack
		m.on(evTimer{}, at(now)).read(held("x", 1, "a", i*1000, now-slack), fmt.Sprintf(`"%d"`, i), at(now))
	}
	st := mustEffect[doStatus](t, m, "a stable follower").st
	if want := m.c.fol().nextRead.Add(3*coreParams.fi + retry.Waits); !st.until.Equal(want) {
		t.Errorf("stable follower trusts the leader until %v; want its next read's end %v", st.until.Sub(t0), want.Sub(t0))
	}
}

// TestCoreOperatorStepDownIsWaitedOut: an operator's step-down (s3lect
// release) writes a held record with a new lease value and held 0 over the
// leader's: the leader's next renewal fails, and followers wait that
// record out in full, max(own LeaderTimeout, ttl) from first sight
// (docs/protocol.md, 3.1 and 3.2), however long they watched the leader.
func TestCoreOperatorStepDownIsWaitedOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease string
		ttl   time.Duration
	}{
		{"T5 (3.2) a new lease value with held 0 starts a new leadership", "op", 5 * time.Second},
		{"T5 (3.2) the same lease with held 0 is trusted only from its own sighting", "a", 5 * time.Second},
		{"T4 (3.1) a record without ttl is waited out with the lease assumed for it", "op", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, coreParams)
			m.on(evCampaign{id: 1, lease: "l1"}, at(0))
			now := time.Duration(0)
			for ; now < 10*time.Second; now += 100 * time.Millisecond { // the leader renews every second, with a 5s lease
				m.on(evTimer{}, at(now))
				if calling[doRead](m) {
					i := int64(now / time.Second)
					m.read(heldTTL("x", 7, "a", i*1000, time.Duration(i)*time.Second, 5*time.Second), fmt.Sprintf(`"%d"`, i), at(now))
				}
			}
			stepDown := heldTTL("x", 7, tc.lease, 0, now, tc.ttl)
			for !calling[doRead](m) {
				now += 100 * time.Millisecond
				m.on(evTimer{}, at(now))
			}
			m.read(stepDown, `"op"`, at(now))
			first := now
			want := max(coreParams.lt, tc.ttl)
			if tc.ttl == 0 {
				want = noTTLLease
			}
			for ; now < first+want; now += 100 * time.Millisecond {
				m.on(evTimer{}, at(now))
				if calling[doRead](m) {
					m.read(stepDown, `"op"`, at(now))
				}
				noEffect[anyWrite](t, m, fmt.Sprintf("%v after first seeing the step-down", now-first))
			}
			m.on(evTimer{}, at(first+want))
			if calling[doRead](m) {
				m.read(stepDown, `"op"`, at(first+want))
			}
			mustEffect[doClaim](t, m, "the step-down's lease has passed")
		})
	}
}

// leading returns a machine that has won an absent lockfile: its claim
// written at 0, its lockfile write answered at 100 ms.
func leading(t *testing.T, p params) *machine {
	t.Helper()
	m := newMachine(t, p)
	campaignAt(t, m, nil, "", at(0))
	mustEffect[doClaim](t, m, "claim")
	m.wrote(`"c"`, nil, at(100*time.Millisecond))
	mustEffect[doLead](t, m, "winning write")
	return m
}

// refusedRenewal returns a leading machine whose first renewal, at
// FrequentInterval, is refused 10 ms later.
func refusedRenewal(t *testing.T, p params) *machine {
	t.Helper()
	m := leading(t, p)
	m.on(evTimer{}, at(p.fi)).wrote("", store.ErrPreconditionFailed, at(p.fi+10*time.Millisecond))
	return m
}

// termObj is a term object's content at term.
func termObj(term uint64) []byte { return fmt.Appendf(nil, `{"term":%d,"by":"x","lease":"l"}`, term) }

// termMachine returns a machine of coreParams whose store holds the term
// object at term (ETag "t0") and, when claimed names any, those terms'
// claims.
func termMachine(t *testing.T, term uint64, claimed ...uint64) *machine {
	t.Helper()
	m := newMachine(t, coreParams)
	m.termData, m.termETag = termObj(term), `"t0"`
	if len(claimed) > 0 {
		m.claims = map[uint64]bool{}
		for _, c := range claimed {
			m.claims[c] = true
		}
	}
	return m
}
