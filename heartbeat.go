package s3lect

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The leader's role (docs/protocol.md, sections 3.1, 3.2 and 4, Leader
// and Ex-leader): its lease, its renewals, how a renewal's result or the
// lease's end stops it, and its ending: the release, or the record left
// for followers to wait out, and the follower that takes its place.
// Self-fencing does not wait for any of it: a timer cancels the
// Leadership's context at the lease deadline (leadership.go), a renewal is
// sent under that context, and no attempt is sent once the deadline has
// passed (put in storecall.go).

// leader is the state of a leadership this elector holds or is ending. It
// is made when a takeover wins and dropped when the leadership is over.
type leader struct {
	campID   uint64    // the campaign that won it
	handed   bool      // a Leadership was returned to Campaign
	rec      Record    // the record last written
	etag     string    // its ETag
	sum      [32]byte  // the SHA-256 of its bytes
	first    time.Time // when the leadership's first write was sent
	sentAt   time.Time // when the first attempt of the last successful write was sent
	deadline time.Time // the lease's end: leaseEnd(sentAt)
	ending   error     // the cause, once the leadership has ended
	unsure   []byte    // a renewal cut off with its outcome unknown
	handAt   time.Time // a recreated lockfile: handed out only from then on (zero: at once)

	// Moving the leader on purpose (handover.go).
	to          string       // the member the release hands over to ("" : anyone)
	soon        bool         // renew early: asked at the peer endpoint
	again       bool         // renew now: over an operator's request for an announced release (section 11.5)
	stepChecked bool         // after a refused renewal, the lockfile was read for a step-down request
	step        *stepRequest // the operator's step-down request found then
	holderDone  bool         // the holder is done with the leadership (Resign, Transfer, a new Campaign)
	rereads     int          // reads after a refused release, looking for a step-down request over it
	ann         announcement // an announced release (Announce)
}

// newLeader starts the leadership won for campaign campID by a takeover
// that wrote data (rec) and got etag; its first attempt was sent at sent.
func newLeader(p params, campID uint64, rec Record, etag string, data []byte, sent time.Time) *leader {
	return &leader{campID: campID, rec: rec, etag: etag, sum: sha256.Sum256(data), first: sent, sentAt: sent,
		deadline: leaseEnd(sent, p)}
}

// leaseEnd is the end of the lease a write sent at sent gives (section
// 3.1): LeaderTimeout less the margin, from the send of the write's first
// attempt.
func leaseEnd(sent time.Time, p params) time.Time { return sent.Add(p.lt - p.margin) }

// leaderAct is the leader's step: it ends the leadership when its lease
// runs out (section 3.1), hands a recreated lockfile's leadership out once
// its wait is over (section 4), and renews when a renewal is due. Once the
// leadership has ended it finishes it (finishLead). It returns when it
// must be called again, and over once the leadership is over and a
// follower has taken its place.
func (c *core) leaderAct(l *leader, now time.Time, emit func(effect)) (wake time.Time, over bool) {
	if l.ending == nil && !now.Before(l.deadline) {
		c.endLead(l, ErrLeaseExpired, emit) // section 3.1: the lease's end
	}
	c.mutReleaseAnnounced(l, now, emit)
	if l.ending == nil && !l.handed && !l.handAt.IsZero() {
		// A recreated lockfile's leadership, not handed out yet.
		switch {
		case c.camp.id != l.campID || c.camp.withdrawn != nil:
			l.ending = errPendingGiven // its Campaign was answered, or gave up
		case !now.Before(l.handAt):
			c.hand(l, now, emit)
		}
	}
	if l.ending == nil && l.ann.asked && !l.ann.at.IsZero() && !now.Before(l.ann.at) {
		c.endLead(l, &StepDownError{To: l.to}, emit) // section 11.5: the announced moment of an operator's step-down
	}
	if l.ending == nil {
		wake := l.renew(&c.sh, now, emit)
		if l.ann.asked && l.ann.at.After(now) && l.ann.at.Before(wake) {
			wake = l.ann.at
		}
		if !l.handed && l.handAt.Before(wake) {
			wake = l.handAt
		}
		if mutAnnounceRelease && l.ann.at.After(now) && l.ann.at.Before(wake) {
			wake = l.ann.at
		}
		return wake, false
	}
	c.sh.announce(Change{}, emit) // no leader this elector knows of while it ends
	if c.sh.call != nil || !c.finishLead(l, now, emit) {
		return c.stepWake(), false
	}
	return time.Time{}, true
}

// endLead ends the live leadership l with cause. Leader(), Stats and the
// peer handler say so before its context is cancelled.
func (c *core) endLead(l *leader, cause error, emit func(effect)) {
	l.ending = cause
	c.sh.announce(Change{}, emit)
	emit(doStatus{c.status()})
	emit(doEnd{cause})
}

// renew sends the renewal when it is due: one If-Match PUT over the ETag
// the last write returned, every FrequentInterval from the send of that
// write, carrying the leader's held time (section 3.2). It returns when it
// must be called again.
func (l *leader) renew(sh *shared, now time.Time, emit func(effect)) time.Time {
	if sh.call != nil {
		return l.deadline
	}
	renewAt := l.renewAt(sh.p)
	if now.Before(renewAt) {
		return renewAt
	}
	l.soon, l.again = false, false
	rec := l.rec
	rec.LastUpdated = sh.nextStamp(now)
	rec.Held = now.Sub(l.first).Milliseconds()
	l.announce(sh, &rec, now, emit) // section 11.4
	sh.send(doRenew{sh.write(rec.encode(), l.etag, l.sum), l.deadline}, now, emit)
	return l.deadline
}

func (f doRenew) done(c *core, ev evStore, sent, now time.Time, emit func(effect)) bool {
	l := c.lead()
	cause := l.renewDone(&c.sh, ev, f.data, sent, emit)
	if cause == ErrLeadershipLost && l.ending == nil && l.handed && !c.sh.p.peerMode && !mutStepEndFirst {
		// Storage mode: read first, while the lease lasts; an announced
		// step-down request keeps the leadership live (section 11.5).
		l.stepChecked = true
		c.sh.send(doStepRead{c.sh.nextGen()}, now, emit)
		return false
	}
	if cause != nil {
		c.endLead(l, cause, emit)
	}
	return false
}

// renewDone takes in the result of a renewal. It returns the cause to end
// the leadership with, or nil.
func (l *leader) renewDone(sh *shared, ev evStore, data []byte, sentAt time.Time, emit func(effect)) error {
	switch {
	case ev.err == nil:
		rec, _ := ParseRecord(data)
		l.rec, l.etag, l.sum, l.unsure = rec, ev.etag, sha256.Sum256(data), nil
		l.sentAt, l.deadline = sentAt, leaseEnd(sentAt, sh.p)
		if l.ending == nil && l.handed { // a recreated lockfile's leadership may not be handed out yet
			sh.lastWrite = sentAt
			emit(doRenewed{deadline: l.deadline})
			sh.announce(Change{Leader: rec, IsLeader: true}, emit) // recorded for Leader(), not announced again
		}
	case l.ending != nil:
		if ev.unsure {
			l.unsure = data // the release goes over it if it landed
		}
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		emit(doLog{"renewal found another writer", []any{"term", l.rec.Term, "err", ev.err}})
		return ErrLeadershipLost
	default:
		emit(doLog{"renewal failed", []any{"term", l.rec.Term, "err", ev.err}})
		return ErrLeaseExpired
	}
	return nil
}

// finishLead ends a leadership whose last write has returned: it writes the
// release when the end allows one, and reports false while that write is
// in flight; otherwise it hands the lockfile back to a new follower.
func (c *core) finishLead(l *leader, now time.Time, emit func(effect)) bool {
	switch {
	case l.rereads > 0:
		return c.finishLost(l, now, emit) // a refused release: look for a step-down request over it
	case l.ann.asked && l.step == nil && errors.Is(l.ending, ErrAskedToStepDown):
		return c.finishAsked(l, now, emit) // section 11.5: release once the holder is done
	case errors.Is(l.ending, ErrLeadershipLost):
		return c.finishLost(l, now, emit) // someone else wrote: see who, and whether it asks this leader to step down
	case errors.Is(l.ending, errSlowTakeover) || !l.handed && !l.handAt.IsZero() && now.Before(l.handAt):
		// The takeover landed after its lease had run out: it may have
		// landed in another world than the one it was decided in (a
		// lockfile deleted meanwhile under someone else's live lease), so
		// it vouches for nothing, and a release would let a follower take
		// over at once. It is left held, and waited out by everyone,
		// this elector too, from now (section 4, Takeover).
		c.leadOver(view{kind: kindOurs, etag: l.etag, sum: l.sum, rec: l.rec, term: l.rec.Term, seenAt: now,
			ttl: time.Duration(l.rec.TTL) * time.Millisecond}, now.Add(c.sh.p.fi), now, nil, emit)
	case errors.Is(l.ending, ErrLeaseExpired):
		// The store did not take our renewals; the record stays as it is.
		// Others wait its lease out; this elector may take it over at
		// once, on a read that finds exactly its last acknowledged write:
		// nobody else has written since, and its own leadership is over
		// (section 4, Ex-leader).
		c.leadOver(l.ours(now), now.Add(c.sh.p.fi), now, nil, emit)
	default:
		c.sh.send(doRelease{c.sh.write(l.released().encode(), l.etag, l.sum), l.unsure}, now, emit)
		return false
	}
	return true
}

func (doRelease) done(c *core, ev evStore, _, now time.Time, emit func(effect)) bool {
	c.releaseDone(c.lead(), ev, now, emit)
	return false
}

// releaseDone takes in the result of l's release.
func (c *core) releaseDone(l *leader, ev evStore, now time.Time, emit func(effect)) {
	switch {
	case ev.err == nil:
		c.leadOver(view{}.observe(l.released().encode(), ev.etag, now), now.Add(c.sh.p.fi), now, nil, emit)
		c.holdOffReleased(l, now) // the others take it first (handover.go)
	case errors.Is(ev.err, store.ErrPreconditionFailed) && l.rereads < maxReleaseRereads && !mutNoReleaseReread:
		// The record the release named is gone. An operator's step-down
		// request may have landed over it (racing Resign or Close), or a
		// second operator's over the first's: read once more, and release
		// over a request on this leadership (finishLost, handover.go).
		l.rereads++
		l.stepChecked, l.step = false, nil
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		c.leadOver(view{}, now, now, nil, emit) // another holder wrote since: nothing of ours is left
		c.holdOff(l)
	default:
		emit(doLog{"release failed; followers take over after LeaderTimeout", []any{"term", l.rec.Term, "err", ev.err}})
		c.leadOver(l.ours(now), now.Add(c.sh.p.fi), now, ev.err, emit)
		c.holdOff(l) // it may have landed, its reply lost: the others take it first
	}
}

// maxReleaseRereads bounds the reads after refused releases: each finds a
// newer step-down request over the same leadership, which only operators
// write.
const maxReleaseRereads = 3

// leadOver forgets the ended leadership, starts following with view v and
// the next read at nextRead, and answers whoever waits for the end. err is
// why the release could not be written.
func (c *core) leadOver(v view, nextRead, now time.Time, err error, emit func(effect)) {
	l, f := c.lead(), &follower{v: v, nextRead: nextRead}
	c.role = f
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
	c.sh.announce(Change{Leader: f.watched(now, c.sh.lease(f.v))}, emit)
	if err != nil && c.sh.closing && c.sh.closeErr == nil {
		c.sh.closeErr = err // Close returns it
	}
	// Leader(), Stats and the peer handler say so before Resign returns.
	emit(doStatus{c.status()})
	emit(doExited{err})
}

// ours is the follower's view of the record this leadership left in the
// lockfile, seen at now: its last acknowledged write, ETag and bytes. A
// read that finds exactly it is the same sighting, which this elector may
// take over at once (section 4, Ex-leader); any other content is a new
// sighting, waited out in full.
func (l *leader) ours(now time.Time) view {
	return view{kind: kindOurs, etag: l.etag, sum: l.sum, rec: l.rec, term: l.rec.Term, seenAt: now,
		ttl: time.Duration(l.rec.TTL) * time.Millisecond}
}

func (l *leader) show(_ *shared, st *status) {
	st.mode = frequent.String()
	if l.handed {
		st.holding, st.rec, st.etag = true, l.rec, l.etag
		if l.ending == nil {
			st.mode = "leader"
		}
	}
}

func (*leader) heardPeer(*shared, peerReport, time.Time, func(effect)) {} // a leader asks no peer

// errPendingGiven ends a recreated lockfile's leadership whose Campaign
// ended before it was handed out.
var errPendingGiven = fmt.Errorf("%w: the Campaign ended while a deleted lockfile's lease was waited out", ErrResigned)

// errSlowTakeover ends a leadership whose winning write returned after its
// lease had already run out.
var errSlowTakeover = errors.New("s3lect: takeover took longer than the lease")
