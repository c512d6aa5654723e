package s3lect

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/s3lect/s3lect/store"
)

// This file holds the election's decisions: a pure function of the
// elector's state, one event and the local time, returning the new state
// and the effects to perform (reads, writes, answers, announcements). It
// does no I/O, starts no goroutine and reads no clock; the run loop
// (loop.go) owns the state, feeds it events and performs the effects.
// docs/protocol.md gives the rules this code follows.

// params are the fixed inputs of the decisions.
type params struct {
	id, addr string
	fi       time.Duration // FrequentInterval
	ii       time.Duration // InfrequentInterval
	lt       time.Duration // LeaderTimeout
	margin   time.Duration // the leader's safety margin, LeaderTimeout/10
	peerMode bool
	slot     uint32 // spreads followers' infrequent reads over the leader's renewals
}

// mode is how a follower watches the lockfile.
type mode int

const (
	frequent   mode = iota // leadership is changing or unknown: read every FrequentInterval
	infrequent             // a leader has renewed steadily for LeaderTimeout: read every InfrequentInterval
	peerWatch              // the leader is asked over HTTPS instead (PeerMode)
)

var modeNames = [...]string{frequent: "frequent", infrequent: "infrequent", peerWatch: "peer"}

func (m mode) String() string { return modeNames[m] }

// opKind is what a store call is for.
type opKind int

const (
	opNone    opKind = iota
	opRead           // a follower's read
	opClaim          // a takeover
	opRenew          // a leader's renewal
	opRelease        // a leader's release after it resigned
)

// campState is the Campaign call waiting for leadership, if id != 0.
type campState struct {
	id         uint64
	lease      string    // a random value; each takeover write derives its lease from it
	claims     int       // takeover writes sent for this campaign
	withdrawn  error     // why Campaign gave up while a takeover was in flight
	claimAfter time.Time // no takeover before this, after a failed one
}

// leadState is the leadership this elector holds or is ending, if id != 0.
type leadState struct {
	id       uint64    // the campaign that won it
	handed   bool      // a Leadership was returned to Campaign
	rec      Record    // the record last written
	etag     string    // its ETag
	sum      [32]byte  // the SHA-256 of its bytes
	first    time.Time // when the leadership's first write was sent
	sentAt   time.Time // when the first attempt of the last successful write was sent
	deadline time.Time // the lease's end: sentAt + LeaderTimeout - margin
	ending   error     // the cause, once the leadership has ended
	unsure   []byte    // a renewal cut off with its outcome unknown
}

// state is everything the election knows. Only the run loop holds one.
type state struct {
	p params

	gen    uint64    // numbers store calls; a result is for the call in flight only if its gen matches
	io     opKind    // the store call in flight, opNone if none
	ioData []byte    // what a write in flight sends
	ioSent time.Time // when it was sent

	camp campState
	lead leadState

	v           view        // the follower's knowledge of the lockfile
	mode        mode        // how it watches
	nextRead    time.Time   // the next storage read is due then (zero: now)
	readErr     error       // the last read's failure, nil after a success
	stale       bool        // the view is known to be out of date: no takeover before the next read
	unsureClaim unsureClaim // a failed takeover that may have landed
	aligned     bool        // the next read is timed just after one of the leader's renewals is due
	stable      leaseKey    // the leadership seen renewing since stableAt
	stableAt    time.Time
	peerGen     uint64  // numbers peer targets, to recognise stale reports
	peerNoETag  bool    // the leader's peer answers carry no ETag (the original s3lect)
	peerOn      peerKey // the poller's target while it has one

	maxTerm uint64    // the highest term seen or written
	stamp   time.Time // the last lastUpdated written; stamps only rise

	closing bool
	closed  bool
	pub     Change // what was announced last
	known   bool   // pub reflects at least one read or write
}

func newState(p params) state { return state{p: p} }

// unsureClaim is a takeover write that failed with its outcome unknown.
type unsureClaim struct {
	data   []byte
	sentAt time.Time
	camp   uint64
}

// peerKey names the poller's target: a leadership at an address.
type peerKey struct {
	lease leaseKey
	addr  string
}

// Events.
type (
	evTimer    struct{} // a timer fired: do what is due
	evCampaign struct {
		id    uint64
		lease string
	} // Campaign was called
	evWithdraw struct {
		id    uint64
		cause error
	} // Campaign gave up
	evLeadDone struct{ cause error } // the leadership's context ended
	evClose    struct{}              // Close was called
	evPeer     peerReport            // the peer poller heard something
	evStore    struct {              // a store call finished
		gen    uint64
		data   []byte // what a read returned
		etag   string // "" with a nil err: absent
		err    error
		unsure bool // a write attempt's outcome is unknown
	}
)

// Effects.
type (
	doRead  struct{ gen uint64 }
	doWrite struct {
		gen      uint64
		kind     opKind
		data     []byte
		ifMatch  string    // "" creates
		orOver   []byte    // release: if ifMatch is refused and the lockfile holds these bytes, write over them
		over     [32]byte  // the SHA-256 of the content ifMatch names
		notAfter time.Time // renewals: no attempt is sent from then on
	}
	doLead struct {
		campID   uint64
		term     uint64
		rec      Record
		etag     string
		deadline time.Time
	}
	doRenewed struct {
		rec      Record
		etag     string
		deadline time.Time
	}
	doEnd    struct{ cause error } // cancel the live leadership's context
	doExited struct{ err error }   // the leadership is over; err: its release failed
	doAnswer struct {
		campID uint64
		err    error
	}
	doPeer    struct{ t peerTarget } // addr "" stops the poller
	doPublish struct{ c Change }
	doLog     struct {
		msg  string
		args []any
	}
	doClosed struct{}
)

type event any
type effect any

// Mutations, for measuring what the safety simulation catches: each
// breaks one rule of the protocol when set. Never set outside tests.
var (
	mutDeltaZero   bool // no stretch of the leader's reported time (δ = 0)
	mutMarginZero  bool // no safety margin on the leader's lease
	mutETagOnly    bool // a sighting is its ETag alone, whatever the bytes
	mutPeerNoCheck bool // a follower that relies on the peer never checks the takeover time
)

// renewalSlack is how long after a renewal is due a follower reads to see
// it: the renewal's latency and scheduling delay.
func renewalSlack(fi time.Duration) time.Duration { return fi / 8 }

// errSlowTakeover ends a leadership whose winning write returned after its
// lease had already run out.
var errSlowTakeover = errors.New("s3lect: takeover took longer than the lease")

// next applies ev at local time now to the state. It returns the effects
// to perform in order, and when the loop must call it again (zero: only on
// an event). It changes nothing but s: no I/O, no clock, no goroutine. (It
// works on s in place rather than on a copy, to keep the run loop's stack
// small: a thousand electors in one process each have one.)
func (s *state) next(ev event, now time.Time) ([]effect, time.Time) {
	var fx []effect
	emit := func(e effect) { fx = append(fx, e) }
	readNow := false

	switch ev := ev.(type) {
	case evTimer:
	case evCampaign:
		switch {
		case s.closing:
			emit(doAnswer{ev.id, ErrClosed})
		case s.camp.id != 0 || (s.lead.id != 0 && s.lead.ending == nil):
			emit(doAnswer{ev.id, ErrCampaigning})
		default:
			s.camp = campState{id: ev.id, lease: ev.lease}
		}
	case evWithdraw:
		if s.camp.id != ev.id {
			break // answered already
		}
		if s.io == opClaim {
			s.camp.withdrawn = ev.cause // the write in flight decides
			break
		}
		emit(doAnswer{s.camp.id, ev.cause})
		s.camp = campState{}
	case evLeadDone:
		if s.lead.id != 0 && s.lead.ending == nil {
			s.lead.ending = ev.cause
		}
	case evClose:
		s.closing = true
		if s.lead.id != 0 && s.lead.ending == nil {
			s.lead.ending = errCloseResign
			emit(doEnd{errCloseResign})
		}
		if s.camp.id != 0 && s.io != opClaim {
			emit(doAnswer{s.camp.id, ErrClosed})
			s.camp = campState{}
		}
	case evPeer:
		s.heardPeer(peerReport(ev), now, emit)
	case evStore:
		if ev.gen != s.gen || s.io == opNone {
			break // a call the loop no longer waits for
		}
		kind, data, sent := s.io, s.ioData, s.ioSent
		s.io, s.ioData = opNone, nil
		switch kind {
		case opRead:
			s.readDone(ev, now, emit)
			readNow = ev.err == nil
		case opClaim:
			s.claimDone(ev, data, sent, now, emit)
		case opRenew:
			s.renewDone(ev, data, sent, emit)
		case opRelease:
			s.releaseDone(ev, now, emit)
		}
	default:
		panic(fmt.Sprintf("s3lect: unknown event %T", ev))
	}

	wake := s.act(now, readNow, emit)
	return fx, wake
}

// act does what is due at now and returns when something next falls due.
// readNow says a read has just returned, so that an infrequent follower may
// take over on what it read.
func (s *state) act(now time.Time, readNow bool, emit func(effect)) time.Time {
	if s.closed {
		return time.Time{}
	}
	if s.lead.id != 0 {
		return s.actLeader(now, emit)
	}
	if s.closing {
		if s.io == opNone {
			s.closed = true
			emit(doPeer{})
			emit(doClosed{})
		}
		return time.Time{}
	}
	if s.v.kind != kindUnknown || s.readErr != nil {
		s.announce(Change{Leader: s.watched(now), Err: s.readErr}, emit) // never a made-up "no leader" before the first read
	}

	var wake time.Time
	soonest := func(t time.Time) {
		// What is due by now is done by now, or waits for an event.
		if t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	at, ok := s.v.takeoverAt(s.p.lt)
	if ok && s.v.kind == kindHeld && s.mode == frequent {
		soonest(at) // for a watcher, the observed lease's end
	}
	if s.io != opNone {
		return wake
	}

	if s.camp.id != 0 && ok && s.camp.withdrawn == nil && !s.stale {
		// A takeover is written only on what a read has just returned:
		// a store that rewound and handed the watched ETag out again for
		// other content fails the If-Match of a fresh sighting, not of
		// one read before the rewind. When the takeover time comes
		// between reads, the follower reads first.
		timed := s.mode == frequent || s.v.kind != kindHeld
		switch {
		case now.Before(s.camp.claimAfter):
			soonest(s.camp.claimAfter)
		case !now.Before(at) && readNow:
			s.claim(now, emit)
			return wake
		case !now.Before(at) && timed:
			s.nextRead = now
		case timed:
			soonest(at)
		}
	}

	if s.mode == peerWatch {
		switch {
		case ok && s.v.kind == kindHeld && !now.Before(at) && !mutPeerNoCheck:
			// No newer write was heard by the takeover time: stop
			// believing the peer and read the store.
			s.mode, s.nextRead, s.peerOn = frequent, now, peerKey{}
			emit(doPeer{})
		case s.peerNoETag:
			// The leader answers without ETags: reads go on at the
			// infrequent pace.
		default:
			if ok && s.v.kind == kindHeld && !mutPeerNoCheck {
				soonest(at)
			}
			return wake // the poller speaks for the leader
		}
	}
	if !now.Before(s.nextRead) {
		s.gen++
		s.io, s.ioSent = opRead, now
		emit(doRead{s.gen})
		return wake
	}
	soonest(s.nextRead)
	return wake
}

// actLeader renews, fences and ends the leadership.
func (s *state) actLeader(now time.Time, emit func(effect)) time.Time {
	l := &s.lead
	if l.ending == nil && !now.Before(l.deadline) {
		l.ending = ErrLeaseExpired
		emit(doEnd{ErrLeaseExpired})
	}
	if l.ending != nil {
		s.announce(Change{}, emit) // no leader this elector knows of while it ends
		if s.io == opNone {
			s.finishLead(now, emit)
			if s.lead.id == 0 {
				return s.act(now, false, emit)
			}
		}
		return time.Time{}
	}
	renewAt := l.sentAt.Add(s.p.fi)
	if s.io == opNone && !now.Before(renewAt) {
		rec := l.rec
		rec.LastUpdated = s.nextStamp(now)
		rec.Held = now.Sub(l.first).Milliseconds()
		s.write(opRenew, rec.encode(), l.etag, l.sum, nil, l.deadline, now, emit)
		return l.deadline
	}
	if s.io != opNone {
		return l.deadline
	}
	return renewAt
}

// finishLead ends a leadership whose last write has returned: it writes the
// release when the end allows one, then hands the lockfile back to the
// follower's view.
func (s *state) finishLead(now time.Time, emit func(effect)) {
	l := &s.lead
	switch {
	case errors.Is(l.ending, ErrLeadershipLost):
		s.v, s.nextRead = view{}, now // someone else wrote: see who
	case errors.Is(l.ending, ErrLeaseExpired):
		// The store did not take our renewals; the record stays as it is.
		// Others wait LeaderTimeout for it; this elector, knowing it has
		// stopped, may take it over at once.
		s.v = view{kind: kindOurs, etag: l.etag, rec: l.rec, term: l.rec.Term, seenAt: now}
		s.nextRead = now.Add(s.p.fi)
	default:
		rec := l.rec
		rec.LastUpdated = time.Time{}
		s.write(opRelease, rec.encode(), l.etag, l.sum, l.unsure, time.Time{}, now, emit)
		return
	}
	s.leadOver(nil, now, emit)
}

// leadOver forgets the ended leadership and answers whoever waits for it.
func (s *state) leadOver(err error, now time.Time, emit func(effect)) {
	l := s.lead
	s.lead = leadState{}
	s.mode = frequent
	emit(doLog{"leadership ended", []any{"term", l.rec.Term, "cause", l.ending}})
	emit(doExited{err})
	if !l.handed && s.camp.id == l.id {
		// Won for a Campaign that gave up, or during Close: it never had
		// the leadership, and now nothing of it is left.
		switch {
		case s.closing:
			emit(doAnswer{s.camp.id, ErrClosed})
			s.camp = campState{}
		case s.camp.withdrawn != nil:
			emit(doAnswer{s.camp.id, s.camp.withdrawn})
			s.camp = campState{}
		default:
			s.camp.claimAfter = now.Add(s.p.fi) // a slow takeover: try again later
		}
	}
	s.announce(Change{Leader: s.watched(now)}, emit)
}

// watched returns the live leader the follower knows of at now. A leader
// seen renewing steadily is trusted until the next read or peer answer
// says otherwise; while leadership is changing, its lease ends when a
// takeover would be allowed.
func (s *state) watched(now time.Time) Record {
	if s.mode != frequent && s.v.kind == kindHeld {
		return s.v.rec
	}
	return s.v.leader(now, s.p.lt)
}

// claim writes a takeover over the view's ETag.
func (s *state) claim(now time.Time, emit func(effect)) {
	base := max(s.v.term, s.maxTerm)
	if base == math.MaxUint64 {
		emit(doAnswer{s.camp.id, fmt.Errorf("the lockfile holds term %d, which cannot be raised: "+
			"fencing tokens would repeat; write a record with a lower term or use a new LockfilePath", base)})
		s.camp = campState{}
		return
	}
	// Every takeover write starts a leadership of its own, with its own
	// lease value: an earlier attempt that failed may still have landed,
	// and its held times count from another first write.
	s.camp.claims++
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", s.camp.lease, s.camp.claims)
	rec := Record{LeaderID: s.p.id, LeaderAddr: s.p.addr, LastUpdated: s.nextStamp(now),
		Term: base + 1, Lease: fmt.Sprintf("%016x", h.Sum64())}
	s.write(opClaim, rec.encode(), s.v.etag, s.v.sum, nil, time.Time{}, now, emit)
}

func (s *state) write(kind opKind, data []byte, ifMatch string, over [32]byte, orOver []byte, notAfter, now time.Time, emit func(effect)) {
	s.gen++
	s.io, s.ioData, s.ioSent = kind, data, now
	emit(doWrite{gen: s.gen, kind: kind, data: data, ifMatch: ifMatch, over: over, orOver: orOver, notAfter: notAfter})
}

// nextStamp returns a lastUpdated for a new write: the wall clock, but
// always after every stamp written before, so that no two writes of this
// elector have the same bytes even if the wall clock steps back.
func (s *state) nextStamp(now time.Time) time.Time {
	t := now.UTC().Round(0)
	if !t.After(s.stamp) {
		t = s.stamp.Add(time.Nanosecond)
	}
	s.stamp = t
	return t
}

// readDone takes in a follower's read.
func (s *state) readDone(ev evStore, now time.Time, emit func(effect)) {
	if ev.err != nil {
		if s.closing {
			return // Close cut the read short
		}
		s.readErr, s.mode = ev.err, frequent
		if store.IsPermanent(ev.err) {
			if s.camp.id != 0 {
				emit(doAnswer{s.camp.id, ev.err})
				s.camp = campState{}
			}
			s.mode = infrequent // keep watching, without hammering a store that refuses us
		}
		s.nextRead = s.ioSent.Add(s.interval())
		emit(doLog{"reading the lockfile failed", []any{"err", ev.err}})
		return
	}
	s.readErr, s.stale = nil, false
	if u := s.unsureClaim; u.data != nil {
		s.unsureClaim = unsureClaim{}
		if bytes.Equal(ev.data, u.data) && s.camp.id == u.camp && s.camp.withdrawn == nil && !s.closing {
			// A takeover whose outcome was unknown had landed: it won,
			// its lease counted from its first attempt, as an adopted
			// write's is.
			emit(doLog{"adopted a takeover whose reply was lost", []any{"etag", ev.etag}})
			s.v = s.v.observe(ev.data, ev.etag, now)
			s.claimDone(evStore{etag: ev.etag}, u.data, u.sentAt, now, emit)
			return
		}
	}
	before := s.v
	s.v = s.v.observe(ev.data, ev.etag, now)
	if s.v.term > s.maxTerm {
		s.maxTerm = s.v.term
	}
	fresh := !before.same(s.v)
	if s.v.kind == kindCorrupt && fresh {
		emit(doLog{"lockfile is unreadable; it will be taken over after LeaderTimeout", []any{"etag", ev.etag}})
	}

	key := s.v.key()
	if s.v.kind != kindHeld || key != s.stable {
		s.stable, s.stableAt = key, now
	}
	// lastUpdated is the writer's wall clock: a hint that may change when
	// the follower reads, never let it take over sooner. A read timed just
	// after a renewal was due (below) expects a record younger than half a
	// FrequentInterval; any other read, younger than one and a half.
	age := now.Sub(s.v.rec.LastUpdated)
	limit := s.p.fi + s.p.fi/2
	if s.aligned {
		limit = s.p.fi/2 + renewalSlack(s.p.fi)
	}
	late := age > limit
	if s.v.kind == kindHeld && fresh && !late && now.Sub(s.stableAt) >= s.p.lt {
		s.mode = infrequent
	} else {
		s.mode = frequent
	}
	s.nextRead, s.aligned = s.ioSent.Add(s.interval()), false
	if s.mode == infrequent && age > -s.p.ii && age < s.p.ii {
		// Time the next read just after one of the leader's renewals is
		// due, by the phase its stamps give (renewals go out every
		// FrequentInterval): a renewal missing then shows as a late
		// record, so after a crash the follower moves to the frequent
		// pace at once and takes over at the exact time the lease
		// allows, instead of a whole InfrequentInterval later. The read
		// never comes sooner than InfrequentInterval after the last one.
		//
		// Followers spread their reads over the renewals by a slot drawn
		// from their ServerID, so that a group's followers do not all read
		// at once and a release is seen by the first of them.
		//
		// The renewal is chosen by rounding, not by rounding up, so that a
		// renewal a little earlier than its due time does not push the
		// read a whole cycle later; in the steady state reads are k
		// renewals apart, never less than InfrequentInterval.
		wrote := now.Add(-age).Add(renewalSlack(s.p.fi))
		n := (s.nextRead.Sub(wrote) + s.p.fi/2) / s.p.fi
		if k := int64((s.p.ii + s.p.fi - 1) / s.p.fi); k > 1 {
			idx := (s.v.rec.Held + s.p.fi.Milliseconds()/2) / max(s.p.fi.Milliseconds(), 1) // this record's renewal number
			j := idx + int64(n)
			n += time.Duration(((int64(s.p.slot)-j)%k + k) % k)
		}
		s.nextRead, s.aligned = wrote.Add(n*s.p.fi), true
	}
	if s.p.peerMode && s.mode == infrequent && s.v.rec.LeaderAddr != "" {
		was := s.peerOn
		s.mode, s.peerOn = peerWatch, peerKey{s.v.key(), s.v.rec.LeaderAddr}
		if was != s.peerOn || !s.peerNoETag {
			s.peerGen++
			s.peerNoETag = false
			emit(doPeer{peerTarget{gen: s.peerGen, id: s.v.rec.LeaderID, term: s.v.rec.Term,
				lease: s.v.rec.Lease, addr: s.v.rec.LeaderAddr, etag: s.v.etag}})
		}
	} else {
		s.peerOn = peerKey{}
	}
}

func (s *state) interval() time.Duration {
	if s.mode == frequent {
		return s.p.fi
	}
	return s.p.ii
}

// heardPeer takes in a report of the peer poller. An answer with an ETag
// the follower has not seen, from the leadership it expects and with
// more held time, is a sighting at the time the answer arrived: the leader
// wrote it before answering. An answer without an ETag (the original
// s3lect) only says the leader is there: it moves no first-sight time, and
// the follower keeps reading the store every InfrequentInterval. A failure
// sends the follower back to the store at once.
func (s *state) heardPeer(r peerReport, now time.Time, emit func(effect)) {
	if s.mode != peerWatch || r.gen != s.peerGen {
		return // about a target the loop has since dropped
	}
	switch {
	case r.err != nil:
		emit(doLog{"peer check failed; reading the lockfile", []any{"err", r.err}})
		s.mode, s.nextRead, s.peerOn = frequent, now, peerKey{}
	case r.etag == "":
		s.peerNoETag = true // a hint only: reads go on at the infrequent pace
	case r.etag != s.v.etag && s.v.kind == kindHeld && r.rec.LeaderID == s.v.rec.LeaderID && r.rec.Term == s.v.rec.Term &&
		r.rec.Lease == s.v.rec.Lease && (r.rec.Held > s.v.rec.Held || r.rec.Lease == ""):
		s.v = s.v.observe(r.rec.encode(), r.etag, r.at)
		s.nextRead = now.Add(s.p.ii)
	}
}

// claimDone takes in the result of a takeover.
func (s *state) claimDone(ev evStore, data []byte, sentAt, now time.Time, emit func(effect)) {
	switch {
	case ev.err == nil:
		rec, _ := ParseRecord(data)
		s.maxTerm = max(s.maxTerm, rec.Term)
		s.lead = leadState{id: s.camp.id, rec: rec, etag: ev.etag, sum: sha256.Sum256(data), first: sentAt, sentAt: sentAt,
			deadline: sentAt.Add(s.p.lt - s.p.margin)}
		s.stable, s.mode = leaseKey{}, frequent
		switch {
		case !now.Before(s.lead.deadline):
			// The write took longer than a lease: it may not be led on.
			// Give it back so that nobody waits for it.
			s.lead.ending = errSlowTakeover
			emit(doLog{"takeover took longer than the lease; releasing it", nil})
		case s.closing:
			s.lead.ending = errCloseResign
		case s.camp.withdrawn != nil:
			s.lead.ending = s.camp.withdrawn
		default:
			s.lead.handed = true
			emit(doLead{campID: s.camp.id, term: rec.Term, rec: rec, etag: ev.etag, deadline: s.lead.deadline})
			emit(doLog{"became leader", []any{"term", rec.Term}})
			s.camp = campState{}
			s.announce(Change{Leader: rec, IsLeader: true}, emit)
		}
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		s.nextRead, s.stale = now, true // someone else wrote first: see who
		s.mode = frequent
		s.answerWithdrawn(emit)
	default:
		s.camp.claimAfter = now.Add(s.p.fi)
		emit(doLog{"takeover failed", []any{"err", ev.err}})
		if store.IsPermanent(ev.err) && s.camp.withdrawn == nil && !s.closing {
			emit(doAnswer{s.camp.id, ev.err})
			s.camp = campState{}
		}
		s.answerWithdrawn(emit)
		if ev.unsure && s.camp.id != 0 {
			// It may have landed: if the next read finds exactly these
			// bytes, the takeover won (readDone).
			s.unsureClaim = unsureClaim{data: data, sentAt: sentAt, camp: s.camp.id}
			s.nextRead = now
		}
	}
}

// answerWithdrawn answers a Campaign that gave up, or Close, once a
// takeover in flight has lost.
func (s *state) answerWithdrawn(emit func(effect)) {
	switch {
	case s.camp.id == 0:
	case s.closing:
		emit(doAnswer{s.camp.id, ErrClosed})
		s.camp = campState{}
	case s.camp.withdrawn != nil:
		emit(doAnswer{s.camp.id, s.camp.withdrawn})
		s.camp = campState{}
	}
}

// renewDone takes in the result of a renewal.
func (s *state) renewDone(ev evStore, data []byte, sentAt time.Time, emit func(effect)) {
	l := &s.lead
	switch {
	case ev.err == nil:
		rec, _ := ParseRecord(data)
		l.rec, l.etag, l.sum, l.unsure = rec, ev.etag, sha256.Sum256(data), nil
		l.sentAt, l.deadline = sentAt, sentAt.Add(s.p.lt-s.p.margin)
		if l.ending == nil {
			emit(doRenewed{rec: rec, etag: ev.etag, deadline: l.deadline})
			s.announce(Change{Leader: rec, IsLeader: true}, emit) // recorded for Leader(), not announced again
		}
	case l.ending != nil:
		if ev.unsure {
			l.unsure = data
		}
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		emit(doLog{"renewal found another writer", []any{"term", l.rec.Term, "err", ev.err}})
		l.ending = ErrLeadershipLost
		emit(doEnd{ErrLeadershipLost})
	default:
		emit(doLog{"renewal failed", []any{"term", l.rec.Term, "err", ev.err}})
		l.ending = ErrLeaseExpired
		emit(doEnd{ErrLeaseExpired})
	}
}

// releaseDone takes in the result of the release.
func (s *state) releaseDone(ev evStore, now time.Time, emit func(effect)) {
	l := s.lead
	var err error
	switch {
	case ev.err == nil:
		rec := l.rec
		rec.LastUpdated = time.Time{}
		s.v = view{}.observe(rec.encode(), ev.etag, now)
		s.nextRead = now.Add(s.p.fi)
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		s.v, s.nextRead = view{}, now // another holder wrote since: nothing of ours is left
	default:
		err = ev.err
		emit(doLog{"release failed; followers take over after LeaderTimeout", []any{"term", l.rec.Term, "err", ev.err}})
		s.v = view{kind: kindOurs, etag: l.etag, rec: l.rec, term: l.rec.Term, seenAt: now}
		s.nextRead = now.Add(s.p.fi)
	}
	s.leadOver(err, now, emit)
}

// announce publishes c if it differs from what was announced last in
// leader, term, IsLeader or error.
func (s *state) announce(c Change, emit func(effect)) {
	p := s.pub
	if s.known && p.IsLeader == c.IsLeader && p.Leader.LeaderID == c.Leader.LeaderID &&
		p.Leader.Term == c.Leader.Term && sameErr(p.Err, c.Err) {
		s.pub = c // same announcement; keep the newest record for Leader()
		return
	}
	s.pub, s.known = c, true
	emit(doPublish{c})
}

func sameErr(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}
