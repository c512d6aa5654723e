package s3lect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
)

// Campaign blocks until this elector leads, and returns the Leadership.
//
// It returns ctx.Err() if ctx ends first, leaving nothing behind: a
// takeover that was being written is released before Campaign returns. It
// returns ErrClosed after Close, ErrCampaigning while another Campaign on
// this elector waits or its Leadership is live, and an error naming the
// lockfile when the store fails permanently (a missing bucket, denied
// access, a store without conditional writes). Campaign may be called
// again as soon as the previous Leadership's Context is done; it then
// waits for that leadership's release to be written (or given up) and
// reads the lockfile afresh before it takes over.
func (e *Elector) Campaign(ctx context.Context) (*Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &campaignReq{id: e.campaigns.Add(1), ctx: ctx, answer: make(chan campaignAnswer, 1)}
	if !e.ask(ctx, req) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
	select {
	case a := <-req.answer:
		return a.l, a.err
	case <-ctx.Done():
	}

	// Withdraw. A takeover in flight decides the outcome: the loop answers
	// once it has, after releasing what it won.
	// If the loop has ended, it answered every campaign before it did.
	e.ask(context.Background(), withdrawReq{id: req.id, cause: ctx.Err()})
	a := <-req.answer
	if a.l != nil {
		// Won just before the withdrawal reached the loop: give it back.
		a.l.end(context.Cause(ctx))
		<-a.l.exited
		return nil, ctx.Err()
	}
	if a.err != nil && !errors.Is(a.err, ctx.Err()) {
		return nil, a.err // closed, or failed, before the withdrawal arrived
	}
	return nil, ctx.Err()
}

// The campaign's role (docs/protocol.md, sections 1.1 and 4, Takeover):
// a Campaign call waits beside the follower, and once the follower's
// reads allow a takeover, it reads and raises the term object, writes the
// lockfile over what the follower read, and hands the leadership it wins
// to the call. The leader's side is heartbeat.go's.

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

	// term is the takeover record, its term claimed and raised in the
	// term object first (section 1.1), while those writes are in flight.
	term Record
	// hint is the term object's raise (its new content, and the ETag and
	// SHA-256 of the content it replaces), sent once the claim of
	// term.Term is created; from is the claim's send, where the lease of
	// the leadership the takeover may win starts.
	hint write
	from time.Time
	// recreate says the takeover creates a lockfile that was deleted
	// (section 4): its term object exists.
	recreate bool
	// floor is the term object's term when the takeover read it: the
	// claims a takeover makes for a version 2 writer's terms stop above
	// it (section 1.2).
	floor uint64
}

// termObject is the content of the term object (section 1.1).
type termObject struct {
	Term  uint64 `json:"term"`
	By    string `json:"by"`    // the ServerID of the takeover that wrote it
	Lease string `json:"lease"` // that takeover's lease: no two writes have the same bytes
	TTL   int64  `json:"ttl"`   // that takeover's lease length, as the record's ttl
}

func (c *core) onCampaign(ev evCampaign, emit func(effect)) {
	switch {
	case c.sh.closing:
		emit(doAnswer{ev.id, ErrClosed})
	case c.camp.id != 0 || c.leading():
		emit(doAnswer{ev.id, ErrCampaigning})
	default:
		c.camp = campaign{id: ev.id, lease: ev.lease}
		if l := c.lead(); l != nil {
			l.holderDone = true // campaigning again: done with the ended leadership (handover.go)
		}
	}
}

func (c *core) onWithdraw(ev evWithdraw, emit func(effect)) {
	if c.camp.id != ev.id {
		return // answered already
	}
	if c.sh.claiming() {
		c.camp.withdrawn = ev.cause // the write in flight decides (section 4)
		return
	}
	emit(doAnswer{c.camp.id, ev.cause})
	c.camp = campaign{}
}

// pursue is the campaign's step while following (section 4, Takeover):
// once the takeover time of what the follower has seen has come, it claims
// what a read has just returned, or has the follower read first. It
// reports whether it sent a claim. soonest takes when something next falls
// due.
func (c *core) pursue(f *follower, now time.Time, readNow bool, soonest func(time.Time), emit func(effect)) bool {
	at, ok := c.claimAt(f)
	if !ok {
		return false
	}
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
		return true
	case !now.Before(at) && timed:
		f.nextRead = now
	case timed:
		soonest(at)
	}
	return false
}

// claimAt returns the earliest local time at which the campaign may take
// over what follower f has seen, and false while it may not: before the
// first read, after a lost takeover until the next read (f.stale), and
// once the Campaign gave up. The time is the sighting's takeover time
// (sections 3.1 and 3.2), later for a record handed to another member or
// released by this elector (section 11, handover.go).
func (c *core) claimAt(f *follower) (time.Time, bool) {
	if c.camp.withdrawn != nil || f.stale {
		return time.Time{}, false
	}
	at, ok := f.v.takeoverAt(c.sh.lease(f.v))
	return f.handoverAt(&c.sh, f.announcedTakeover(at)), ok
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
	c.sh.send(doReadTerm{c.sh.nextGen()}, now, emit)
}

func (doReadTerm) done(c *core, ev evStore, _, now time.Time, emit func(effect)) bool {
	c.termReadDone(ev, now, emit)
	return false
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
	v := &c.fol().v
	var high uint64
	var longest int64 // the longest lease the term object states
	if ev.etag != "" {
		var obj termObject
		if json.Unmarshal(ev.data, &obj) != nil || obj.TTL < 0 {
			obj = termObject{Term: salvageTerm(ev.data)} // damaged: its lease is unknown
		}
		high, longest = obj.Term, obj.TTL
		c.sh.maxTTL = max(c.sh.maxTTL, lease.TTL(obj.TTL)) // the longest lease known (section 2.1)
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
			c.sh.maxTerm = max(c.sh.maxTerm, high)
			v.claimed = max(v.claimed, high)
			v.heldBefore = true
			v.ttl = max(v.ttl, lease.TTL(obj.TTL))
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
			v.ttl = max(v.ttl, lease.TTL(obj.TTL)) // the wait before the leadership is handed out
		}
	}
	c.sh.maxTerm = max(c.sh.maxTerm, high)
	base := max(v.term, c.sh.maxTerm)
	if base > max(v.claimed, v.term) && (v.rec.Lease != "" || v.kind == kindAbsent) && !mutNoTermObject && !mutClaimNoWait {
		// Section 1.1: a term above every one this elector knew of when
		// it first saw the lockfile as it is has been claimed since. The
		// takeover that claimed it may still be writing over what this
		// elector sees (its lease started at its claim), or what it sees
		// is a restore of a record that takeover replaced: wait it out
		// from now, a release too. Not for a record without a lease (the
		// original s3lect's, unreadable content), whose term says nothing
		// and which is waited out with the longest lease assumed anyway
		// (section 1.2). The highest claim says how long that lease may
		// be (findTermDone).
		c.sh.send(doFindTerm{c.sh.nextGen(), base}, now, emit)
		return false
	}
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
		Lease: fmt.Sprintf("%016x", h.Sum64()), TTL: lease.TTLMillis(c.sh.p.lt), PeerPin: c.sh.p.pin}
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
	c.camp.from = time.Time{}
	if mutNoTermClaims {
		c.sh.send(doRaiseTerm{c.sh.write(data, ev.etag, over)}, now, emit)
		return true
	}
	// The claim first, then the term object, which is only a hint of the
	// highest claim (section 1.1): the same content for both. Before it,
	// the claims of the terms a version 2 writer used above the term
	// object (section 1.2).
	c.camp.hint = write{data: data, ifMatch: ev.etag, over: over}
	c.camp.floor = max(high, c.sh.claimTo)
	if g := min(c.sh.v2Term, base); g > max(high, c.sh.claimTo) && high > 0 && !mutNoGapClaims {
		c.claimGap(g, now, emit)
		return true
	}
	c.sh.send(doClaimTerm{write: c.sh.write(data, "", [32]byte{}), term: base + 1}, now, emit)
	return true
}

func (f doClaimTerm) done(c *core, ev evStore, sent, now time.Time, emit func(effect)) bool {
	if f.gap {
		c.gapClaimDone(ev, f.term, now, emit)
		return false
	}
	c.claimTermDone(ev, f.term, sent, now, emit)
	return false
}

// claimTermDone takes in the create of the claim of term, sent at sent
// (section 1.1). Created: the term is this takeover's alone, whatever is
// restored, and its leadership's lease runs from sent; the term object
// is raised next. Refused: another takeover claimed the term, and the
// highest claim is looked for.
func (c *core) claimTermDone(ev evStore, term uint64, sent, now time.Time, emit func(effect)) {
	if ev.err == nil {
		c.sh.maxTerm = max(c.sh.maxTerm, term) // used, whatever comes next
	}
	switch {
	case c.camp.id == 0 || c.camp.term.Term != term || c.camp.withdrawn != nil || c.sh.closing:
		c.camp.term = Record{}
		c.answerWithdrawn(emit)
	case ev.err == nil:
		v := &c.fol().v
		v.claimed = max(v.claimed, term) // its own claim: no other takeover's
		c.camp.from = sent
		h := c.camp.hint
		c.sh.send(doRaiseTerm{c.sh.write(h.data, h.ifMatch, h.over)}, now, emit)
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		c.camp.term = Record{}
		c.sh.maxTerm = max(c.sh.maxTerm, term) // claimed by another
		c.sh.send(doFindTerm{c.sh.nextGen(), term}, now, emit)
	default:
		c.camp.term = Record{}
		c.termFailed(ev.err, now, emit)
	}
}

func (doFindTerm) done(c *core, ev evStore, _, now time.Time, emit func(effect)) bool {
	c.findTermDone(ev, now, emit)
	return false
}

// findTermDone takes in the search for the highest claim after a claim
// was refused, or a term read found a term claimed since the view was
// first seen (section 1.1): another takeover claimed it, and may still
// be writing over what this elector sees, so the view is waited out anew
// from now, for as long as the highest claim's lease at least; the next
// takeover claims above the highest claim.
func (c *core) findTermDone(ev evStore, now time.Time, emit func(effect)) {
	var top termObject
	if ev.err == nil {
		c.sh.maxTerm = max(c.sh.maxTerm, ev.term)
		if len(ev.data) > 0 {
			// Read, so claimed; and every term below it is (section 1.1:
			// claims are contiguous), a version 2 writer's too: a claim
			// made for it need not be tried again (section 1.2). Without
			// this, a takeover that claimed a version 2 term and failed
			// before its own claim left every later takeover refused at
			// that term, waiting a lease, and trying it again: no leader
			// ever (restorer seed 10, with the version 2 history).
			c.sh.claimTo = max(c.sh.claimTo, ev.term)
		}
		if json.Unmarshal(ev.data, &top) != nil || top.TTL < 0 {
			top = termObject{} // damaged: its lease is unknown
		}
		c.sh.maxTTL = max(c.sh.maxTTL, lease.TTL(top.TTL))
	}
	if c.camp.id == 0 || c.camp.withdrawn != nil || c.sh.closing {
		c.answerWithdrawn(emit)
		return
	}
	if ev.err != nil {
		c.termFailed(ev.err, now, emit)
		return
	}
	f := c.fol()
	// Not for a record without a lease (the original s3lect's, unreadable
	// content), as at the term read: it is waited out with the longest
	// lease assumed from its first sight anyway, and the claim's ttl has
	// raised that above. A restart would wait that lease again from now
	// for every claim found (the foreign variant's seed 170: no leader
	// 4.7 s after the faults stopped, bound 3.8 s).
	if !mutClaimNoWait && (f.v.rec.Lease != "" || f.v.kind == kindAbsent) {
		ttl := lease.TTL(top.TTL)
		if mutRestartNoClaimTTL {
			ttl = 0 // as before restorer seed 5581: the highest claim's lease unread
		}
		c.restartWait(&f.v, ev.term, ttl, now, emit)
	}
	f.nextRead, f.stale, f.mode = now, true, frequent // see who won
}

// restartWait has the follower wait out its view anew from now: a
// takeover claimed claimed, a term above every one known when the view
// was first seen (section 1.1), and its lease may be as long as ttl (the
// longest the claims or the term object state; 0 if unknown). A release
// is then waited out like a held record, an absence like one after a
// held record.
func (c *core) restartWait(v *view, claimed uint64, ttl time.Duration, now time.Time, emit func(effect)) {
	v.claimed = max(v.claimed, claimed)
	if now.After(v.seenAt) {
		v.seenAt = now
	}
	v.anchored = false
	switch {
	case v.kind == kindAbsent && !v.heldBefore:
		v.heldBefore, v.ttl = true, ttl
	case v.ttl > 0:
		v.ttl = max(v.ttl, ttl)
	}
	c.sh.maxTTL = max(c.sh.maxTTL, ttl)
	emit(doLog{"a takeover claimed a term since the lockfile was first seen as it is; waiting out a lease before taking it over",
		[]any{"term", claimed}})
}

func (f doRaiseTerm) done(c *core, ev evStore, sent, now time.Time, emit func(effect)) bool {
	if !c.camp.from.IsZero() {
		sent = c.camp.from // the lease runs from the claim's send
	}
	c.termWriteDone(ev, f.data, sent, now, emit)
	return false
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
	switch f := c.fol(); {
	case c.camp.id == 0 || rec.LeaderID == "" || c.camp.withdrawn != nil || c.sh.closing:
		c.answerWithdrawn(emit)
	case ev.err == nil:
		c.sh.maxTerm = max(c.sh.maxTerm, rec.Term)
		rec.LastUpdated = c.sh.nextStamp(now)
		c.sh.send(doClaim{c.sh.write(rec.encode(), f.v.etag, f.v.sum)}, sent, emit) // the lease runs from the term object's raise
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
		emit(doAnswer{c.camp.id, fmt.Errorf("the term object and the term claims next to the lockfile (docs/protocol.md, 1.1) need the same permissions as the lockfile: %w", err)})
		c.camp = campaign{}
	}
}

// adoptClaim takes in a follower's read, at now, after a takeover of this
// campaign failed with its outcome unknown: if the read found exactly the
// takeover's bytes, the takeover had landed and won, its lease counted
// from its first attempt, as an adopted write's is (section 9, 1). It
// reports whether it adopted the takeover.
func (c *core) adoptClaim(ev evStore, now time.Time, emit func(effect)) bool {
	u := c.camp.unsure
	if u == nil {
		return false
	}
	c.camp.unsure = nil
	if !bytes.Equal(ev.data, u) || c.camp.withdrawn != nil || c.sh.closing {
		return false
	}
	emit(doLog{"adopted a takeover whose reply was lost", []any{"etag", ev.etag}})
	c.claimDone(evStore{etag: ev.etag}, u, c.camp.unsureSent, now, emit)
	return true
}

func (f doClaim) done(c *core, ev evStore, sent, now time.Time, emit func(effect)) bool {
	c.claimDone(ev, f.data, sent, now, emit)
	return false
}

// claimDone takes in the result of a takeover.
func (c *core) claimDone(ev evStore, data []byte, sentAt, now time.Time, emit func(effect)) {
	f := c.fol()
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
		c.role = l
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
			c.hand(l, now, emit)
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
			// bytes, the takeover won (adoptClaim).
			c.camp.unsure, c.camp.unsureSent = data, sentAt
			f.nextRead = now
		}
	}
}

// hand hands the leadership won to the Campaign that waits for it.
func (c *core) hand(l *leader, now time.Time, emit func(effect)) {
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
