package s3lect

import (
	"crypto/sha256"
	"errors"
	"time"

	"github.com/s3lect/s3lect/store"
)

// Moving a leader on purpose (docs/protocol.md, section 11): the
// resigner's hold-off, a transfer to a named member, and an operator's
// step-down request. Like core.go, these are decisions only: no I/O, no
// clock, no goroutine.
//
//   - A leader that released the lockfile (Resign, Close, a step-down)
//     does not take its own released record over while another member
//     may: it holds off for the others' next read (handoverHold), so a
//     handover lands on another live member; a group of one leads again
//     after the hold-off.
//   - A release may name the member to hand over to (Record.To): that
//     member may take it over at once; every other one waits the
//     transfer window first (transferWait), then anyone may.
//   - An operator's step-down request (Record.StepDown, written by
//     s3lect release over the leader's record) makes the leader's next
//     renewal fail, as any write by another would. The ex-leader then
//     reads the lockfile once; finding its own leadership with the
//     request, it waits for its holder to be done with the leadership
//     (Resign, Transfer, Close or a new Campaign, until the lease's end
//     at most), and then releases the request's record, handing over
//     to the member the request names, if any.

// stepRequest is an operator's step-down request found over this
// leader's record: its ETag, the SHA-256 of its bytes, and the record.
type stepRequest struct {
	etag string
	sum  [32]byte
	data []byte
	rec  Record
}

// handoverHold is how long an elector that released its leadership waits,
// from when others may take the released record, before it takes that
// record itself: long enough for every other follower to read it once.
// In peer mode the followers that watch the leader hear of the release
// as it happens and the others read every FrequentInterval; in storage
// mode a stable follower reads once per InfrequentInterval, timed within
// half a FrequentInterval of a renewal's due time, a slack after it, and
// when it reads every renewal, half a FrequentInterval later still at
// some renewals (alignedRead's half slot; section 3.3).
func (p params) handoverHold() time.Duration {
	if p.peerMode {
		return p.fi + renewalSlack(p.fi)
	}
	h := p.ii + p.fi/2 + renewalSlack(p.fi)
	if p.ii <= p.fi {
		h += p.fi / 2
	}
	return h
}

// transferWait is how long a member not named by a released record's to
// field waits before it may take the record over: the lease and the
// target's next read, whichever is longer (a stable target in storage
// mode reads once per InfrequentInterval), plus a FrequentInterval.
func (sh *shared) transferWait(v view) time.Duration {
	return max(sh.lease(v), sh.p.ii) + sh.p.fi
}

// handoverAt returns when this follower's campaign may take over what it
// sees, given at, the time the lease rules allow (takeoverAt): later for
// a record handed to another member, and later again for this elector's
// own released leadership.
func (f *follower) handoverAt(sh *shared, at time.Time) time.Time {
	if f.v.kind == kindVacant && f.v.rec.To != "" && f.v.rec.To != sh.p.id {
		if f.ann.key == f.v.key() && !mutNoAnnouncedTransfer {
			at = at.Add(sh.p.announcedTransferWait()) // an announced transfer, watched (section 11.2)
		} else {
			at = at.Add(sh.transferWait(f.v))
		}
	}
	if f.hold != (leaseKey{}) && f.v.key() == f.hold && (f.v.kind == kindVacant || f.v.kind == kindHeld) {
		if f.v.kind == kindVacant && !f.holdUntil.IsZero() {
			at = later(at, f.holdUntil)
		} else {
			at = at.Add(sh.p.handoverHold())
		}
	}
	return at
}

// holdOff makes the new follower hold off from the leadership l released
// (or was asked to release): its record is left to the others first.
func (c *core) holdOff(l *leader) {
	if f := c.fol(); f != nil && !mutNoHandoverHold {
		f.hold = leaseKey{l.rec.LeaderID, l.rec.Term, l.rec.Lease}
	}
}

// holdOffReleased is holdOff for a release of l acknowledged at now. In
// storage mode the resigner knows when its followers read (section 3.3):
// a slack, their lag and perhaps a half slot after its renewals are due,
// each stable one after one renewal in k, a frequent one after every
// renewal. So every live follower has read the release by the k-th
// renewal due time whose read cannot have come before the release landed
// (due + slack after now), plus the slack, the largest lag, the half slot
// and a slack more for the read's round trip and the clocks' difference:
// about a FrequentInterval and a quarter on average with
// InfrequentInterval = FrequentInterval, where the bound of handoverHold,
// which knows no phase, is two. In peer mode handoverHold is shorter.
func (c *core) holdOffReleased(l *leader, now time.Time) {
	c.holdOff(l)
	f, p := c.fol(), c.sh.p
	if f == nil || f.hold == (leaseKey{}) || p.peerMode {
		return
	}
	slack := renewalSlack(p.fi)
	m := max(now.Sub(l.sentAt)-slack+p.fi-1, 0) / p.fi // the first renewal due whose read goes out after now
	k := (p.ii + p.fi - 1) / p.fi
	until := l.sentAt.Add((max(m, 1)+k-1)*p.fi + slack + p.fi/4 + slack)
	if p.ii <= p.fi {
		until = until.Add(p.fi / 2)
	}
	f.holdUntil = until
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// released is the record that releases l: its last write with lastUpdated
// zero, naming the member it is handed to, if any.
func (l *leader) released() Record {
	rec := l.rec
	rec.LastUpdated, rec.StepDown, rec.To, rec.ReleaseAt = time.Time{}, "", l.to, 0
	return rec
}

// renewAt is when l's next renewal is due: a FrequentInterval after the
// last, or an eighth of one after it when someone asked for an early one
// (a step-down request's nudge at the peer endpoint: at most eight
// renewals per interval, whoever asks).
func (l *leader) renewAt(p params) time.Time {
	if l.again {
		return l.sentAt
	}
	if l.soon {
		return l.sentAt.Add(p.fi / 8)
	}
	return l.sentAt.Add(p.fi)
}

// finishLost ends l, whose renewal was refused (someone wrote the
// lockfile). It reads the lockfile once; if it finds an operator's
// step-down request over its own leadership, it waits for the holder to be
// done, then releases. It reports whether the leadership is over (the
// elector follows again); false while a store call is in flight or the
// holder is awaited (wake: stepWake).
func (c *core) finishLost(l *leader, now time.Time, emit func(effect)) bool {
	switch {
	case !l.stepChecked:
		l.stepChecked = true
		c.sh.send(doStepRead{c.sh.nextGen()}, now, emit)
		return false
	case l.step == nil:
		c.leadOver(view{}, now, now, nil, emit) // someone else wrote: see who
		return true
	case l.holderDone || c.sh.closing || mutStepNoWait:
		c.sh.send(doRelease{c.sh.write(l.released().encode(), l.step.etag, l.step.sum), nil}, now, emit)
		return false
	case !now.Before(l.deadline):
		// The holder never said it was done, and the lease is over:
		// followers take the request's record over by the lease rules,
		// this elector last.
		emit(doLog{"asked to step down; the holder did not end the leadership within its lease, so it is left to the lease rules", []any{"term", l.rec.Term}})
		c.leadOver(view{}.observe(l.step.data, l.step.etag, now), now.Add(c.sh.p.fi), now, nil, emit)
		c.holdOff(l)
		return true
	}
	return false
}

// stepWake is when an ending leadership must be looked at again while its
// holder is awaited (zero: only on an event).
func (c *core) stepWake() time.Time {
	if l := c.lead(); l != nil && (l.step != nil || l.ann.asked && errors.Is(l.ending, ErrAskedToStepDown)) && c.sh.call == nil {
		return l.deadline
	}
	return time.Time{}
}

// doStepRead is the ex-leader's read of the lockfile after its renewal was
// refused. The run loop performs it as a follower's read.
type doStepRead struct{ gen uint64 }

func (f doStepRead) do(x executor) { x.read(doRead(f)) }

// done takes in the read: a record of the ex-leader's own leadership (same
// leader, term and lease) that carries a step-down request and is not its
// own write is the operator's request. In storage mode the read comes
// while the leadership is still live (its renewal was refused, its lease
// runs on): a request that asks for an announced release (releaseAt) keeps
// it live (askedAnnounced); anything else ends it now, as L3.
func (doStepRead) done(c *core, ev evStore, _, now time.Time, emit func(effect)) bool {
	l := c.lead()
	live := l.ending == nil
	var rec Record
	err := ev.err
	if err == nil && ev.etag == "" {
		err = store.ErrNotFound
	}
	if err == nil {
		rec, err = ParseRecord(ev.data)
	}
	if err != nil || rec.StepDown == "" || rec.LastUpdated.IsZero() ||
		(rec.LeaderID != l.rec.LeaderID || rec.Term != l.rec.Term || rec.Lease != l.rec.Lease) && !mutStepRenewAny {
		if live {
			c.endLead(l, ErrLeadershipLost, emit)
		}
		return false
	}
	if live && rec.ReleaseAt > 0 {
		c.askedAnnounced(l, rec, ev, now, emit)
		return false
	}
	if live {
		c.endLead(l, &StepDownError{To: rec.To}, emit)
	}
	l.step = &stepRequest{etag: ev.etag, sum: sha256.Sum256(ev.data), data: ev.data, rec: rec}
	if l.to == "" {
		l.to = rec.To
	}
	emit(doLog{"asked to step down; releasing once the leadership's holder is done", []any{"term", l.rec.Term, "to", rec.To}})
	return false
}

// onResign takes in Resign or Transfer on the leadership the loop holds:
// the holder is done with it, and to (if not "") names the member to hand
// it to.
func (c *core) onResign(ev evResign, emit func(effect)) {
	l := c.lead()
	if l == nil {
		return
	}
	if ev.to != "" {
		l.to = ev.to
	}
	l.holderDone = true
	if l.ending == nil {
		c.endLead(l, ErrResigned, emit)
	}
}

// onNudge takes in a request, made at the peer endpoint, to renew early:
// an operator's step-down request is then seen within an eighth of a
// FrequentInterval instead of a whole one.
func (c *core) onNudge() {
	if l := c.lead(); l != nil && l.ending == nil && l.handed {
		l.soon = true
	}
}

type (
	evResign struct{ to string } // Resign or Transfer
	evNudge  struct{}            // renew early (the peer endpoint's stepDown parameter)
)

func (ev evResign) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onResign(ev, emit)
	return false
}

func (evNudge) on(c *core, _ time.Time, _ func(effect)) bool {
	c.onNudge()
	return false
}

// resignReq is Resign or Transfer, sent to the run loop.
type resignReq struct {
	l  *Leadership
	to string
}

// nudgeReq asks the run loop for an early renewal.
type nudgeReq struct{}

func (r resignReq) serve(lp *loop) event {
	if r.l != lp.lead {
		return nil // over already
	}
	return evResign{to: r.to}
}

func (nudgeReq) serve(*loop) event { return evNudge{} }
