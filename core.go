package s3lect

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/s3lect/s3lect/store"
)

// This file, core_follower.go and heartbeat.go (the leader) hold the election's
// decisions: a pure function of the elector's state, one event and the
// local time, returning the effects to perform (reads, writes, answers,
// announcements). They do no I/O, start no goroutine and read no clock;
// the run loop (loop.go) owns the state, feeds it events and performs the
// effects. docs/protocol.md gives the rules this code follows; comments
// name its sections.
//
// The state is split by role, as the protocol is: a follower (section 4,
// the follower states, and section 3's timing) or a leader (section 4,
// Leader), never both: the follower's view of the lockfile is dropped
// when a leadership is won and built afresh when it ends. The Campaign
// call waiting for leadership, and the few facts every role shares (the
// store call in flight, the highest term, what was published), live
// beside the role.

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

// opKind is what a store call is for.
type opKind int

const (
	opNone      opKind = iota
	opRead             // a follower's read
	opClaim            // a takeover
	opRenew            // a leader's renewal
	opRelease          // a leader's release after it resigned
	opTermRead         // a takeover's read of the term object (section 1.1)
	opTermWrite        // a takeover's raise of the term object, before the takeover write
)

// core is everything the election knows. Only the run loop holds one.
// Exactly one of fol and lead is set.
type core struct {
	sh   shared
	camp campaign  // the Campaign call waiting for leadership, if camp.id != 0
	fol  *follower // while following
	lead *leader   // while a leadership is held or ending
}

func newCore(p params) core { return core{sh: shared{p: p}, fol: &follower{}} }

// shared is what the election knows whatever its role.
type shared struct {
	p params

	gen     uint64  // numbers store calls; a result is for the call in flight only if its gen matches
	call    pending // the store call in flight; kind opNone if none
	peerGen uint64  // numbers peer targets, to recognise stale reports

	maxTerm uint64        // the highest term seen or written (section 1, term)
	maxTTL  time.Duration // the longest lease a record of this lockfile has stated (section 3.1)

	termSeen string    // the term object as last read: ETag and SHA-256 of its bytes (section 4)
	foreign  uint64    // records read without the version 2 fields (section 1.2); the first is logged
	stamp    time.Time // the last lastUpdated written; stamps only rise (section 9, 4)

	pub       Change    // what was announced last
	known     bool      // pub reflects at least one read or write
	lastWrite time.Time // when the last successful write of a handed leadership was sent
	lastRead  time.Time // when the last successful read returned

	closing bool
	closed  bool
}

// pending is a store call in flight.
type pending struct {
	kind opKind
	data []byte    // what a write sends
	sent time.Time // when it was sent
}

// campaign is the Campaign call waiting for leadership.
type campaign struct {
	id         uint64
	lease      string    // a random value; each takeover write derives its lease from it
	claims     int       // takeover writes sent for this campaign
	withdrawn  error     // why Campaign gave up while a takeover was in flight
	claimAfter time.Time // no takeover before this, after a failed one

	// unsure is a takeover write of this campaign that failed with its
	// outcome unknown, sent at unsureSent: if the next read finds exactly
	// these bytes, it won (section 4, Takeover).
	unsure     []byte
	unsureSent time.Time

	// term is the takeover record, its term raised in the term object
	// first (section 1.1), while the term object's write is in flight.
	term Record
	// recreate says the takeover creates a lockfile that was deleted
	// (section 4): its term object exists.
	recreate bool
}

// termObject is the content of the term object (section 1.1).
type termObject struct {
	Term  uint64 `json:"term"`
	By    string `json:"by"`    // the ServerID of the takeover that wrote it
	Lease string `json:"lease"` // that takeover's lease: no two writes have the same bytes
	TTL   int64  `json:"ttl"`   // that takeover's lease length, as the record's ttl
}

// next applies ev at local time now. It returns the effects to perform in
// order, and when the loop must call it again (zero: only on an event). It
// changes nothing but c: no I/O, no clock, no goroutine. (It works on c in
// place rather than on a copy, to keep the run loop's stack small: a
// thousand electors in one process each have one.)
func (c *core) next(ev event, now time.Time) ([]effect, time.Time) {
	var fx []effect
	emit := func(f effect) { fx = append(fx, f) }
	readNow := ev.on(c, now, emit)
	wake := c.act(now, readNow, emit)
	emit(doStatus{c.status()})
	return fx, wake
}

// status is what the core shows outside, for the run loop's snapshot.
func (c *core) status() status {
	st := status{change: c.sh.pub, known: c.sh.known, lastWrite: c.sh.lastWrite, lastRead: c.sh.lastRead, foreign: c.sh.foreign}
	switch l := c.lead; {
	case l == nil:
		st.mode = c.fol.mode.String()
		st.until = c.fol.trustedUntil(&c.sh)
	case l.handed:
		st.holding, st.rec, st.etag, st.mode = true, l.rec, l.etag, frequent.String()
		if l.ending == nil {
			st.mode = "leader"
		}
	default:
		st.mode = frequent.String()
	}
	return st
}

func (c *core) onCampaign(ev evCampaign, emit func(effect)) {
	switch {
	case c.sh.closing:
		emit(doAnswer{ev.id, ErrClosed})
	case c.camp.id != 0 || (c.lead != nil && c.lead.ending == nil):
		emit(doAnswer{ev.id, ErrCampaigning})
	default:
		c.camp = campaign{id: ev.id, lease: ev.lease}
	}
}

func (c *core) onWithdraw(ev evWithdraw, emit func(effect)) {
	if c.camp.id != ev.id {
		return // answered already
	}
	if c.sh.call.kind == opClaim {
		c.camp.withdrawn = ev.cause // the write in flight decides (section 4)
		return
	}
	emit(doAnswer{c.camp.id, ev.cause})
	c.camp = campaign{}
}

func (c *core) onLeadDone(ev evLeadDone) {
	if c.lead != nil && c.lead.ending == nil {
		c.lead.ending = ev.cause
	}
}

func (c *core) onClose(emit func(effect)) {
	c.sh.closing = true
	if c.lead != nil && c.lead.ending == nil {
		c.endLead(errCloseResign, emit)
	}
	if c.camp.id != 0 && c.sh.call.kind != opClaim {
		emit(doAnswer{c.camp.id, ErrClosed})
		c.camp = campaign{}
	}
}

func (c *core) onPeer(r peerReport, now time.Time, emit func(effect)) {
	if c.fol != nil {
		c.fol.heardPeer(&c.sh, r, now, emit)
	}
}

// onStore takes in a store result and reports whether it is a read that
// has just returned.
func (c *core) onStore(ev evStore, now time.Time, emit func(effect)) bool {
	if ev.gen != c.sh.gen || c.sh.call.kind == opNone {
		return false // a call the loop no longer waits for
	}
	k := c.sh.call
	c.sh.call = pending{}
	switch k.kind {
	case opRead:
		c.readDone(ev, k.sent, now, emit)
		return ev.err == nil
	case opClaim:
		c.claimDone(ev, k.data, k.sent, now, emit)
	case opRenew:
		if cause := c.lead.renewDone(&c.sh, ev, k.data, k.sent, emit); cause != nil {
			c.endLead(cause, emit)
		}
	case opRelease:
		c.releaseDone(ev, now, emit)
	case opTermRead:
		c.termReadDone(ev, now, emit)
	case opTermWrite:
		c.termWriteDone(ev, k.data, k.sent, now, emit)
	}
	return false
}

// act does what is due at now and returns when something next falls due.
// readNow says a read has just returned, so that an infrequent follower may
// take over on what it read.
func (c *core) act(now time.Time, readNow bool, emit func(effect)) time.Time {
	if c.sh.closed {
		return time.Time{}
	}
	if l := c.lead; l != nil {
		if l.ending == nil && !now.Before(l.deadline) {
			c.endLead(ErrLeaseExpired, emit) // section 3.1: the lease's end
		}
		if l.ending == nil && !l.handed && !l.handAt.IsZero() {
			// A recreated lockfile's leadership, not handed out yet.
			switch {
			case c.camp.id != l.campID || c.camp.withdrawn != nil:
				l.ending = errPendingGiven // its Campaign was answered, or gave up
			case !now.Before(l.handAt):
				c.hand(now, emit)
			}
		}
		if l.ending == nil {
			wake := l.renew(&c.sh, now, emit)
			if !l.handed && l.handAt.Before(wake) {
				wake = l.handAt
			}
			return wake
		}
		c.sh.announce(Change{}, emit) // no leader this elector knows of while it ends
		if c.sh.call.kind != opNone || !c.finishLead(now, emit) {
			return time.Time{}
		}
		readNow = false
	}
	if c.sh.closing {
		if c.sh.call.kind == opNone {
			c.sh.closed = true
			emit(doPeer{})
			emit(doClosed{})
		}
		return time.Time{}
	}
	return c.follow(now, readNow, emit)
}

// endLead ends the live leadership with cause. Leader(), Stats and the
// peer handler say so before its context is cancelled.
func (c *core) endLead(cause error, emit func(effect)) {
	c.lead.ending = cause
	c.sh.announce(Change{}, emit)
	emit(doStatus{c.status()})
	emit(doEnd{cause})
}

// follow is the follower's step (section 4, the follower states): it
// announces the leader it knows of, takes over when the rules allow, and
// reads when a read is due.
func (c *core) follow(now time.Time, readNow bool, emit func(effect)) time.Time {
	f := c.fol
	if f.v.kind != kindUnknown || f.readErr != nil {
		c.sh.announce(Change{Leader: f.watched(now, c.sh.lease(f.v)), Err: f.readErr}, emit) // never a made-up "no leader" before the first read
	}

	var wake time.Time
	soonest := func(t time.Time) {
		// What is due by now is done by now, or waits for an event.
		if t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	at, ok := f.v.takeoverAt(c.sh.lease(f.v))
	if ok && f.v.kind == kindHeld && f.mode == frequent {
		soonest(at) // for a watcher, the observed lease's end
	}
	if c.sh.call.kind != opNone {
		return wake
	}

	if c.camp.id != 0 && ok && c.camp.withdrawn == nil && !f.stale {
		// A takeover is written only on what a read has just returned
		// (section 2, and section 9, 15): a store that rewound and handed
		// the watched ETag out again for other content fails the If-Match
		// of a fresh sighting, not of one read before the rewind. When the
		// takeover time comes between reads, the follower reads first.
		timed := f.mode == frequent || f.v.kind != kindHeld
		switch {
		case now.Before(c.camp.claimAfter):
			soonest(c.camp.claimAfter)
		case !now.Before(at) && readNow:
			c.claim(now, emit)
			return wake
		case !now.Before(at) && timed:
			f.nextRead = now
		case timed:
			soonest(at)
		}
	}

	if f.mode == peerWatch {
		switch {
		case ok && f.v.kind == kindHeld && !now.Before(at) && !mutPeerNoCheck:
			// Section 5: no newer write was heard by the takeover time:
			// stop believing the peer and read the store.
			f.mode, f.nextRead, f.peerOn = frequent, now, peerKey{}
			emit(doPeer{})
		case f.peerNoETag:
			// The leader answers without ETags: reads go on at the
			// infrequent pace.
		default:
			if ok && f.v.kind == kindHeld && !mutPeerNoCheck {
				soonest(at)
			}
			return wake // the poller speaks for the leader
		}
	}
	if !now.Before(f.nextRead) {
		c.sh.read(now, emit)
		return wake
	}
	soonest(f.nextRead)
	return wake
}

// claim starts a takeover of what a read has just returned: it reads the
// term object first (termReadDone), raises it (termWriteDone), then writes
// the lockfile over the view's ETag (sections 1, term and lease, and 1.1).
func (c *core) claim(now time.Time, emit func(effect)) {
	if mutNoTermObject {
		// Version 2: the term from the lockfile and this elector alone.
		if c.termReadDone(evStore{}, now, emit) {
			c.termWriteDone(evStore{}, nil, now, now, emit)
		}
		return
	}
	c.sh.gen++
	c.sh.call = pending{kind: opTermRead, sent: now}
	emit(doRead{c.sh.gen, opTermRead})
}

// termReadDone takes in the takeover's read of the term object (section
// 1.1). The new term exceeds the replaced record's, every term this
// elector has seen, and the term object's; the term object is raised to
// it before the takeover is written, so that no takeover, by any elector,
// ever uses a term the term object has held. It reports whether it wrote
// (with mutNoTermObject: would have written) the term object.
func (c *core) termReadDone(ev evStore, now time.Time, emit func(effect)) bool {
	if c.camp.id == 0 || c.camp.withdrawn != nil || c.sh.closing {
		c.answerWithdrawn(emit)
		return false
	}
	if ev.err != nil {
		c.termFailed(ev.err, now, emit)
		return false
	}
	v := &c.fol.v
	var high uint64
	var longest int64 // the longest lease the term object states
	if ev.etag != "" {
		var obj termObject
		if json.Unmarshal(ev.data, &obj) != nil || obj.TTL < 0 {
			obj = termObject{Term: salvageTerm(ev.data)} // damaged: its lease is unknown
		}
		high, longest = obj.Term, obj.TTL
		sum := sha256.Sum256(ev.data)
		seen := ev.etag + "/" + string(sum[:])
		if v.kind == kindAbsent && seen != c.sh.termSeen {
			// Section 4: the lockfile is absent, and a takeover has raised
			// the term object since this elector last read it: the
			// lockfile was created and deleted, perhaps under a live
			// lease, or a takeover is being written. Watch the absence
			// anew, from now, for the lease the deleted record held:
			// the one this elector saw, and the one the last takeover
			// states.
			c.sh.termSeen = seen
			v.heldBefore = true
			v.ttl = max(v.ttl, time.Duration(obj.TTL)*time.Millisecond)
			if now.After(v.seenAt) {
				v.seenAt = now
			}
			emit(doLog{"lockfile is absent but its term object changed; waiting out a lease before creating it", []any{"term", high}})
			return false
		}
		c.sh.termSeen = seen
	}
	// Creating the lockfile where a term object exists recreates a
	// deleted lockfile: the leadership it wins is handed out only once a
	// lease has passed since it landed (section 4).
	c.camp.recreate = v.kind == kindAbsent && ev.etag != ""
	if c.camp.recreate {
		var obj termObject
		if json.Unmarshal(ev.data, &obj) == nil && obj.TTL > 0 {
			v.ttl = max(v.ttl, time.Duration(obj.TTL)*time.Millisecond) // the wait before the leadership is handed out
		}
	}
	c.sh.maxTerm = max(c.sh.maxTerm, high)
	base := max(v.term, c.sh.maxTerm)
	if base == math.MaxUint64 {
		emit(doAnswer{c.camp.id, fmt.Errorf("the lockfile or its term object holds term %d, which cannot be raised: "+
			"fencing tokens would repeat; use a new LockfilePath", base)})
		c.camp = campaign{}
		return false
	}
	// Every takeover write starts a leadership of its own, with its own
	// lease value: an earlier attempt that failed may still have landed,
	// and its held times count from another first write (section 9, 16).
	c.camp.claims++
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", c.camp.lease, c.camp.claims)
	c.camp.term = Record{LeaderID: c.sh.p.id, LeaderAddr: c.sh.p.addr, Term: base + 1,
		Lease: fmt.Sprintf("%016x", h.Sum64()), TTL: ttlMillis(c.sh.p.lt)}
	if mutNoTermObject {
		return true
	}
	// The term object's ttl never falls: a raise by a takeover that then
	// loses the lockfile must not shorten the lease that a follower of a
	// deleted lockfile waits out (section 1.1), so it states the longest
	// lease ever written there, not the last raiser's.
	data, _ := json.Marshal(termObject{Term: base + 1, By: c.sh.p.id, Lease: c.camp.term.Lease, TTL: max(c.camp.term.TTL, longest)})
	var over [32]byte
	if ev.etag != "" {
		over = sha256.Sum256(ev.data)
	}
	c.sh.write(opTermWrite, data, ev.etag, over, nil, time.Time{}, now, emit)
	return true
}

// termWriteDone takes in the raise of the term object, whose content was
// data and whose first attempt was sent at sent, and writes the takeover
// once it is in (section 1.1). The leadership the takeover may win counts
// its lease from sent, not from the takeover's own send: a follower that
// sees the raised term object may start watching an absent lockfile from
// then (section 4), so no lease may start before it.
func (c *core) termWriteDone(ev evStore, data []byte, sent, now time.Time, emit func(effect)) {
	rec := c.camp.term
	c.camp.term = Record{}
	var obj termObject
	if data != nil && (json.Unmarshal(data, &obj) != nil || obj.Lease != rec.Lease) {
		rec = Record{} // written for a campaign that has since ended
	}
	switch f := c.fol; {
	case c.camp.id == 0 || rec.LeaderID == "" || c.camp.withdrawn != nil || c.sh.closing:
		c.answerWithdrawn(emit)
	case ev.err == nil:
		c.sh.maxTerm = max(c.sh.maxTerm, rec.Term)
		rec.LastUpdated = c.sh.nextStamp(now)
		c.sh.write(opClaim, rec.encode(), f.v.etag, f.v.sum, nil, time.Time{}, now, emit)
		c.sh.call.sent = sent // the lease runs from the term object's raise
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		f.nextRead, f.stale, f.mode = now, true, frequent // another takeover raised the term first: see who won
	default:
		c.termFailed(ev.err, now, emit)
	}
}

// termFailed ends a takeover whose term object could not be read or
// written. Nothing was written to the lockfile.
func (c *core) termFailed(err error, now time.Time, emit func(effect)) {
	c.camp.claimAfter = now.Add(c.sh.p.fi)
	emit(doLog{"takeover failed at the term object", []any{"err", err}})
	if store.IsPermanent(err) {
		emit(doAnswer{c.camp.id, fmt.Errorf("the term object next to the lockfile (docs/protocol.md, 1.1) needs the same permissions as the lockfile: %w", err)})
		c.camp = campaign{}
	}
}

// readDone takes in a follower's read.
func (c *core) readDone(ev evStore, sent, now time.Time, emit func(effect)) {
	f := c.fol
	if ev.err != nil {
		if c.sh.closing {
			return // Close cut the read short
		}
		permanent := store.IsPermanent(ev.err)
		if permanent && c.camp.id != 0 {
			emit(doAnswer{c.camp.id, ev.err})
			c.camp = campaign{}
		}
		f.readFailed(c.sh.p, ev.err, permanent, sent)
		emit(doLog{"reading the lockfile failed", []any{"err", ev.err}})
		return
	}
	c.sh.lastRead = now
	if u := c.camp.unsure; u != nil {
		c.camp.unsure = nil
		if bytes.Equal(ev.data, u) && c.camp.withdrawn == nil && !c.sh.closing {
			// A takeover whose outcome was unknown had landed: it won,
			// its lease counted from its first attempt, as an adopted
			// write's is (section 9, 1).
			emit(doLog{"adopted a takeover whose reply was lost", []any{"etag", ev.etag}})
			c.claimDone(evStore{etag: ev.etag}, u, c.camp.unsureSent, now, emit)
			return
		}
	}
	f.readReturned(&c.sh, ev.data, ev.etag, sent, now, emit)
}

// claimDone takes in the result of a takeover.
func (c *core) claimDone(ev evStore, data []byte, sentAt, now time.Time, emit func(effect)) {
	f := c.fol
	switch {
	case ev.err == nil:
		rec, _ := ParseRecord(data)
		c.sh.maxTerm = max(c.sh.maxTerm, rec.Term)
		l := newLeader(c.sh.p, c.camp.id, rec, ev.etag, data, sentAt)
		if c.camp.recreate {
			// A deleted lockfile recreated: a leader whose record was
			// deleted, and that this elector never saw (its reads came
			// before the record and after the deletion), may hold its
			// lease until a lease after the deletion, which came before
			// this write landed. The record holds everyone else off;
			// the leadership is handed out once that lease has passed
			// (section 4).
			l.handAt = now.Add(c.sh.lease(f.v))
		}
		c.lead, c.fol = l, nil
		switch {
		case !now.Before(l.deadline):
			// The write took longer than a lease: it may not be led on.
			// Give it back so that nobody waits for it.
			l.ending = errSlowTakeover
			emit(doLog{"takeover took longer than the lease; releasing it", nil})
		case c.sh.closing:
			l.ending = errCloseResign
		case c.camp.withdrawn != nil:
			l.ending = c.camp.withdrawn
		case !l.handAt.IsZero():
			emit(doLog{"recreated the deleted lockfile; waiting out a lease before leading", []any{"term", rec.Term, "wait", l.handAt.Sub(now)}})
		default:
			c.hand(now, emit)
		}
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		f.nextRead, f.stale, f.mode = now, true, frequent // someone else wrote first: see who
		c.answerWithdrawn(emit)
	default:
		c.camp.claimAfter = now.Add(c.sh.p.fi)
		emit(doLog{"takeover failed", []any{"err", ev.err}})
		if store.IsPermanent(ev.err) && c.camp.withdrawn == nil && !c.sh.closing {
			emit(doAnswer{c.camp.id, ev.err})
			c.camp = campaign{}
		}
		c.answerWithdrawn(emit)
		if ev.unsure && c.camp.id != 0 {
			// It may have landed: if the next read finds exactly these
			// bytes, the takeover won (readDone).
			c.camp.unsure, c.camp.unsureSent = data, sentAt
			f.nextRead = now
		}
	}
}

// hand hands the leadership won to the Campaign that waits for it.
func (c *core) hand(now time.Time, emit func(effect)) {
	l := c.lead
	l.handed = true
	c.sh.lastWrite = l.sentAt
	c.sh.announce(Change{Leader: l.rec, IsLeader: true}, emit)
	emit(doStatus{c.status()})
	emit(doLead{campID: c.camp.id, term: l.rec.Term, deadline: l.deadline})
	emit(doLog{"became leader", []any{"term", l.rec.Term}})
	c.camp = campaign{}
}

// answerWithdrawn answers a Campaign that gave up, or Close, once a
// takeover in flight has lost.
func (c *core) answerWithdrawn(emit func(effect)) {
	switch {
	case c.camp.id == 0:
	case c.sh.closing:
		emit(doAnswer{c.camp.id, ErrClosed})
		c.camp = campaign{}
	case c.camp.withdrawn != nil:
		emit(doAnswer{c.camp.id, c.camp.withdrawn})
		c.camp = campaign{}
	}
}

// finishLead ends a leadership whose last write has returned: it writes the
// release when the end allows one, and reports false while that write is
// in flight; otherwise it hands the lockfile back to a new follower.
func (c *core) finishLead(now time.Time, emit func(effect)) bool {
	l := c.lead
	switch {
	case errors.Is(l.ending, ErrLeadershipLost):
		c.leadOver(view{}, now, now, nil, emit) // someone else wrote: see who
	case errors.Is(l.ending, errSlowTakeover) || !l.handed && !l.handAt.IsZero() && now.Before(l.handAt):
		// The takeover landed after its lease had run out: it may have
		// landed in another world than the one it was decided in (a
		// lockfile deleted meanwhile under someone else's live lease), so
		// it vouches for nothing, and a release would let a follower take
		// over at once. It is left held, and waited out by everyone,
		// this elector too, from now (section 4, Takeover).
		c.leadOver(view{kind: kindHeld, etag: l.etag, sum: l.sum, rec: l.rec, term: l.rec.Term, seenAt: now,
			ttl: time.Duration(l.rec.TTL) * time.Millisecond}, now.Add(c.sh.p.fi), now, nil, emit)
	case errors.Is(l.ending, ErrLeaseExpired):
		// The store did not take our renewals; the record stays as it is.
		// Others wait its lease out; this elector may take it over at
		// once, on a read that finds exactly its last acknowledged write:
		// nobody else has written since, and its own leadership is over
		// (section 4, Ex-leader).
		c.leadOver(l.ours(now), now.Add(c.sh.p.fi), now, nil, emit)
	default:
		rec := l.rec
		rec.LastUpdated = time.Time{}
		c.sh.write(opRelease, rec.encode(), l.etag, l.sum, l.unsure, time.Time{}, now, emit)
		return false
	}
	return true
}

// releaseDone takes in the result of the release.
func (c *core) releaseDone(ev evStore, now time.Time, emit func(effect)) {
	l := c.lead
	switch {
	case ev.err == nil:
		rec := l.rec
		rec.LastUpdated = time.Time{}
		c.leadOver(view{}.observe(rec.encode(), ev.etag, now), now.Add(c.sh.p.fi), now, nil, emit)
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		c.leadOver(view{}, now, now, nil, emit) // another holder wrote since: nothing of ours is left
	default:
		emit(doLog{"release failed; followers take over after LeaderTimeout", []any{"term", l.rec.Term, "err", ev.err}})
		c.leadOver(l.ours(now), now.Add(c.sh.p.fi), now, ev.err, emit)
	}
}

// leadOver forgets the ended leadership, starts following with view v and
// the next read at nextRead, and answers whoever waits for the end. err is
// why the release could not be written.
func (c *core) leadOver(v view, nextRead, now time.Time, err error, emit func(effect)) {
	l := c.lead
	c.lead, c.fol = nil, &follower{v: v, nextRead: nextRead}
	emit(doLog{"leadership ended", []any{"term", l.rec.Term, "cause", l.ending}})
	if !l.handed && c.camp.id == l.campID {
		// Won for a Campaign that gave up, or during Close: it never had
		// the leadership, and now nothing of it is left.
		switch {
		case c.sh.closing:
			emit(doAnswer{c.camp.id, ErrClosed})
			c.camp = campaign{}
		case c.camp.withdrawn != nil:
			emit(doAnswer{c.camp.id, c.camp.withdrawn})
			c.camp = campaign{}
		default:
			c.camp.claimAfter = now.Add(c.sh.p.fi) // a slow takeover: try again later
		}
	}
	c.sh.announce(Change{Leader: c.fol.watched(now, c.sh.lease(c.fol.v))}, emit)
	// Leader(), Stats and the peer handler say so before Resign returns.
	emit(doStatus{c.status()})
	emit(doExited{err})
}

// read sends a follower's read.
func (sh *shared) read(now time.Time, emit func(effect)) {
	sh.gen++
	sh.call = pending{kind: opRead, sent: now}
	emit(doRead{sh.gen, opRead})
}

// write sends a write of data over ifMatch ("" creates), whose content has
// the SHA-256 over. orOver and notAfter are doWrite's.
func (sh *shared) write(kind opKind, data []byte, ifMatch string, over [32]byte, orOver []byte, notAfter, now time.Time, emit func(effect)) {
	sh.gen++
	sh.call = pending{kind: kind, data: data, sent: now}
	emit(doWrite{gen: sh.gen, kind: kind, data: data, ifMatch: ifMatch, over: over, orOver: orOver, notAfter: notAfter})
}

// nextStamp returns a lastUpdated for a new write: the wall clock, but
// always after every stamp written before, so that no two writes of this
// elector have the same bytes even if the wall clock steps back (section
// 9, 4).
func (sh *shared) nextStamp(now time.Time) time.Time {
	t := now.UTC().Round(0)
	if !t.After(sh.stamp) {
		t = sh.stamp.Add(time.Nanosecond)
	}
	sh.stamp = t
	return t
}

// announce publishes c if it differs from what was announced last in
// leader, term, IsLeader or error.
func (sh *shared) announce(c Change, emit func(effect)) {
	p := sh.pub
	if sh.known && p.IsLeader == c.IsLeader && p.Leader.LeaderID == c.Leader.LeaderID &&
		p.Leader.Term == c.Leader.Term && sameErr(p.Err, c.Err) {
		sh.pub = c // same announcement; keep the newest record for Leader()
		return
	}
	sh.pub, sh.known = c, true
	emit(doPublish{c})
}

func sameErr(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}

// errPendingGiven ends a recreated lockfile's leadership whose Campaign
// ended before it was handed out.
var errPendingGiven = fmt.Errorf("%w: the Campaign ended while a deleted lockfile's lease was waited out", ErrResigned)

// errSlowTakeover ends a leadership whose winning write returned after its
// lease had already run out.
var errSlowTakeover = errors.New("s3lect: takeover took longer than the lease")

// Events: what the run loop feeds the core. Each kind names the core's
// handler for it, so that a new kind that has none does not compile.
type event interface {
	// on applies the event to c at now and reports whether it is a read
	// that has just returned.
	on(c *core, now time.Time, emit func(effect)) bool
}

type (
	evTimer    struct{} // a timer fired: do what is due
	evCampaign struct { // Campaign was called
		id    uint64
		lease string
	}
	evWithdraw struct { // Campaign gave up
		id    uint64
		cause error
	}
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

func (evTimer) on(*core, time.Time, func(effect)) bool { return false } // act does what is due

func (ev evCampaign) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onCampaign(ev, emit)
	return false
}

func (ev evWithdraw) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onWithdraw(ev, emit)
	return false
}

func (ev evLeadDone) on(c *core, _ time.Time, _ func(effect)) bool {
	c.onLeadDone(ev)
	return false
}

func (evClose) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onClose(emit)
	return false
}

func (ev evPeer) on(c *core, now time.Time, emit func(effect)) bool {
	c.onPeer(peerReport(ev), now, emit)
	return false
}

func (ev evStore) on(c *core, now time.Time, emit func(effect)) bool {
	return c.onStore(ev, now, emit)
}

// Effects: what the core asks the run loop to do. Each kind names the
// executor's method for it, so that the loop cannot leave one unhandled.
type effect interface{ do(x executor) }

// executor performs effects; the run loop is one.
type executor interface {
	read(doRead)
	write(doWrite)
	startLead(doLead)
	renewed(doRenewed)
	endLead(doEnd)
	exited(doExited)
	answer(doAnswer)
	setPeer(doPeer)
	publish(doPublish)
	show(doStatus)
	log(doLog)
	closed(doClosed)
}

type (
	doRead struct {
		gen  uint64
		kind opKind // opRead, or opTermRead for the term object
	}
	doWrite struct {
		gen      uint64
		kind     opKind
		data     []byte
		ifMatch  string    // "" creates
		orOver   []byte    // release: if ifMatch is refused and the lockfile holds these bytes, write over them
		over     [32]byte  // the SHA-256 of the content ifMatch names
		notAfter time.Time // renewals: no attempt is sent from then on
	}
	doLead struct { // hand a Leadership to the Campaign that won it
		campID   uint64
		term     uint64
		deadline time.Time
	}
	doRenewed struct{ deadline time.Time } // the lease now ends at deadline
	doEnd     struct{ cause error }        // cancel the live leadership's context
	doExited  struct{ err error }          // the leadership is over; err: its release failed
	doAnswer  struct {                     // answer a Campaign that did not win
		campID uint64
		err    error
	}
	doPeer    struct{ t peerTarget } // addr "" stops the poller
	doPublish struct{ c Change }     // tell the subscribers
	doStatus  struct{ st status }    // what Leader(), Stats, health and the peer handler show
	doLog     struct {
		msg  string
		args []any // slog's key-value pairs
	}
	doClosed struct{} // Close is done: the loop may return
)

func (f doRead) do(x executor)    { x.read(f) }
func (f doWrite) do(x executor)   { x.write(f) }
func (f doLead) do(x executor)    { x.startLead(f) }
func (f doRenewed) do(x executor) { x.renewed(f) }
func (f doEnd) do(x executor)     { x.endLead(f) }
func (f doExited) do(x executor)  { x.exited(f) }
func (f doAnswer) do(x executor)  { x.answer(f) }
func (f doPeer) do(x executor)    { x.setPeer(f) }
func (f doPublish) do(x executor) { x.publish(f) }
func (f doStatus) do(x executor)  { x.show(f) }
func (f doLog) do(x executor)     { x.log(f) }
func (f doClosed) do(x executor)  { x.closed(f) }

// status is what the election shows outside the run loop: the loop
// publishes it, with the live Leadership, as the one snapshot that
// Leader(), Stats, the health check and the peer handler read.
type status struct {
	change    Change    // the last announcement, with the newest record
	known     bool      // change reflects at least one read or write
	mode      string    // Stats.Mode: "leader", "frequent", "infrequent" or "peer"
	holding   bool      // a Leadership was handed out and is not over yet
	rec       Record    // while holding: the leader's last write
	etag      string    // and its ETag
	lastWrite time.Time // Stats.LastRenewal
	lastRead  time.Time // Stats.LastRead
	foreign   uint64    // Stats.ForeignRecords

	// until is when the follower's knowledge of change.Leader runs out
	// (local time; zero: no leader shown): Leader() reports none from
	// then on, even if the run loop has not stepped since (section 4).
	until time.Time
}

// noTTLLease is the shortest lease a follower assumes for a record that
// states none: one written before protocol version 3 (the original
// s3lect, a version 2 writer during a rolling upgrade), or unreadable
// content. Both the original s3lect and version 2 default to it
// (docs/protocol.md, 3.1).
const noTTLLease = DefaultLeaderTimeout

// ttlMillis is a LeaderTimeout as the record's ttl states it: in whole
// milliseconds, rounded up so that no follower waits less than the
// writer's lease.
func ttlMillis(lt time.Duration) int64 {
	return int64((lt + time.Millisecond - 1) / time.Millisecond)
}

// lease returns how long a follower must watch v unchanged before it may
// take it over (section 3.1): the longer of its own LeaderTimeout and the
// lease the record states; for a record that states none, the longest
// lease this elector can assume: its own, noTTLLease, and every lease a
// record of this lockfile has stated to it.
func (sh *shared) lease(v view) time.Duration {
	switch {
	case mutIgnoreTTL:
		return sh.p.lt
	case v.ttl > 0:
		return max(sh.p.lt, v.ttl)
	}
	return max(sh.p.lt, noTTLLease, sh.maxTTL)
}
