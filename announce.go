package s3lect

import (
	"context"
	"crypto/sha256"
	"time"
)

// Announced releases (docs/moves.md, section 11.4). A leader that
// means to step down says so in its renewals first: the record carries
// the moment it will release (Record.ReleaseAt, in its held time), chosen
// so that every live follower has read one announcing record by then.
// Followers read at that moment, and every FrequentInterval/16 for a
// LeaderTimeout after it, so that the release, written once the holder is
// done (Resign, Transfer, Close), is taken over within a fraction of a
// second instead of at a stable follower's next read, up to an
// InfrequentInterval later. Reads move; takeovers do not: an announcement
// never lets anyone take over sooner than the lease rules allow.

// announcement is a leader's announced release.
type announcement struct {
	on        bool      // Announce was called: renewals announce the release
	to        string    // the member it is meant for ("" : anyone)
	releaseAt int64     // the announced moment, in the leadership's held milliseconds (0: no renewal has carried it yet)
	at        time.Time // the same moment on the local clock
	asked     bool      // an operator's step-down request asked for it (section 11.5): the leadership ends at the moment
}

// announceLead is how long before the announced moment the first
// renewal that carries it is sent: long enough for every live follower to
// read one announcing record (section 3.3). A frequent follower reads
// each renewal; a stable one reads one renewal in k =
// ⌈InfrequentInterval/FrequentInterval⌉, in its slot, a slack and its lag
// (at most FrequentInterval/4) after the renewal is due, and with
// InfrequentInterval = FrequentInterval perhaps half a FrequentInterval
// later (the half slot); a slack more covers the read's round trip and
// the clocks' difference. In peer mode there is nothing to wait for:
// followers watching the leader hear the release as it is written
// (section 5).
func (p params) announceLead() time.Duration {
	if p.peerMode {
		return 0
	}
	slack := renewalSlack(p.fi)
	k := (p.ii + p.fi - 1) / p.fi
	d := (k-1)*p.fi + slack + p.fi/4 + slack
	if p.ii <= p.fi {
		d += p.fi / 2
	}
	return d
}

// releaseWatch is how often a follower reads once an announced moment
// has come, until it finds the release (for a LeaderTimeout at most).
func releaseWatch(fi time.Duration) time.Duration { return fi / 16 }

// announce puts the announcement, once Announce has been called, on the
// renewal rec the leader is about to send at now. The first renewal that
// carries it fixes the moment: announceLead after its send.
func (l *leader) announce(sh *shared, rec *Record, now time.Time, emit func(effect)) {
	a := &l.ann
	if !a.on || sh.p.peerMode {
		return
	}
	if a.releaseAt == 0 {
		lead := sh.p.announceLead()
		a.releaseAt = rec.Held + (lead + time.Millisecond - 1).Milliseconds()
		a.at = now.Add(lead)
		emit(doAnnounced{a.at})
	}
	rec.ReleaseAt, rec.To = a.releaseAt, a.to
}

// onAnnounce takes in Announce on the leadership the loop holds: the next
// renewal announces the release (in peer mode, nothing needs announcing:
// Announce returns at once).
func (c *core) onAnnounce(ev evAnnounce, now time.Time, emit func(effect)) {
	l := c.lead()
	if l == nil || l.ending != nil || !l.handed {
		return // over, or ending: Announce returns when it is over
	}
	a := &l.ann
	switch {
	case !a.at.IsZero():
		emit(doAnnounced{a.at}) // announced already
		return
	case a.on:
		return // the next renewal fixes the moment
	}
	a.on, a.to = true, ev.to
	emit(doLog{"announcing the release", []any{"term", l.rec.Term, "to", ev.to}})
	if c.sh.p.peerMode || mutAnnounceNoLead {
		a.at = now
		emit(doAnnounced{now})
	}
}

// announced is a follower's knowledge of a leadership's announced release:
// which leadership, and the moment on the local clock, from the first
// sighting of an announcing record of it.
type announced struct {
	key leaseKey
	at  time.Time
}

// watchRelease moves the follower's next read earlier for an announced
// release (section 11.4): to the announced moment, and from it, every
// releaseWatch for a LeaderTimeout. A release meant for another member
// (To) is watched too, so that a member not named finds it soon and, if
// the named one has not taken it within announcedTransferWait, takes it
// itself (handoverAt). The moment on the local clock is the
// earliest that the leadership's announcing records give: each one's
// first sight plus the announced held time less its own (each was seen
// after the leader sent it, so a read then comes after the moment by the
// leader's clock, give or take the clocks' rates), or, when its stamp is
// within max(InfrequentInterval, LeaderTimeout) of the local wall clock,
// the moment its stamp's phase gives plus a slack, as reads are timed
// (section 3.3), so that a follower whose reads run late (its lag) does
// not watch late. A wrong stamp moves the watch, never a takeover.
func (f *follower) watchRelease(sh *shared, sent, now time.Time) {
	r := f.v.rec
	if f.v.kind != kindHeld || r.ReleaseAt <= 0 || r.StepDown != "" || mutNoReleaseWatch {
		return
	}
	ahead := time.Duration(r.ReleaseAt-r.Held) * time.Millisecond
	at := f.v.seenAt.Add(ahead)
	if w := max(sh.p.ii, sh.p.lt); now.Sub(r.LastUpdated) < w && now.Sub(r.LastUpdated) > -w {
		// The stamp's phase, as reads are timed (section 3.3): a slack
		// after the moment the leader's clock names.
		at = earliest(at, now.Add(-now.Sub(r.LastUpdated)).Add(ahead+renewalSlack(sh.p.fi)))
	}
	if key := f.v.key(); f.ann.key != key || at.Before(f.ann.at) {
		f.ann = announced{key, at}
	}
	var next time.Time
	switch {
	case now.Before(f.ann.at):
		next = f.ann.at
	case now.Before(f.ann.at.Add(sh.p.lt)):
		next = sent.Add(releaseWatch(sh.p.fi))
	default:
		return
	}
	if next.Before(f.nextRead) {
		f.nextRead, f.aligned, f.timedFor, f.offset = next, false, time.Time{}, 0
	}
}

// askedAnnounced takes in an operator's request for an announced release
// (section 11.5), found by the read after a refused renewal while the
// leadership is live: the request's record (rec, read in ev) is this
// leadership's own, with stepDown and releaseAt. The leader renews over it
// at once, announcing its release to the member the request names, and
// ends the leadership at the announced moment; it releases once its
// holder is done (finishAsked). A second request over the first is taken
// in the same way, the moment kept.
func (c *core) askedAnnounced(l *leader, rec Record, ev evStore, now time.Time, emit func(effect)) {
	l.etag, l.sum = ev.etag, sha256.Sum256(ev.data)
	l.stepChecked, l.step, l.again = false, nil, true
	a := &l.ann
	if !a.asked {
		emit(doLog{"asked to step down; announcing the release, and ending the leadership at the announced moment", []any{"term", l.rec.Term, "to", rec.To}})
	}
	if !a.on {
		a.on, a.to = true, rec.To
	}
	a.asked = true
	if l.to == "" {
		l.to = rec.To
	}
}

// finishAsked ends a leadership whose announced step-down moment came
// (section 11.5): it releases once the holder is done, as E1 does, or,
// if the holder is not done by the lease's end, leaves the record to the
// lease rules, this elector last.
func (c *core) finishAsked(l *leader, now time.Time, emit func(effect)) bool {
	switch {
	case l.holderDone || c.sh.closing || mutStepNoWait:
		c.sh.send(doRelease{c.sh.write(l.released().encode(), l.etag, l.sum), l.unsure}, now, emit)
		return false
	case !now.Before(l.deadline):
		emit(doLog{"asked to step down; the holder did not end the leadership within its lease, so it is left to the lease rules", []any{"term", l.rec.Term}})
		c.leadOver(l.ours(now), now.Add(c.sh.p.fi), now, nil, emit)
		c.holdOff(l)
		return true
	}
	return false
}

// announcedTransferWait is how long a member not named by a released
// record's to waits, after first seeing it, when it watched the
// leadership's announcement (section 11.2): the named member, watching
// too, finds the release within a releaseWatch and a read of it landing;
// one that is not running does not hold the group up for longer than
// half a FrequentInterval.
func (p params) announcedTransferWait() time.Duration { return p.fi / 2 }

// announcedTakeover is the mutation mutAnnounceTakeover: a follower takes
// an announced release over at the announced moment, as if the leader
// had kept its word, without waiting for the release itself.
func (f *follower) announcedTakeover(at time.Time) time.Time {
	if mutAnnounceTakeover && f.v.kind == kindHeld && f.v.rec.ReleaseAt > 0 && f.ann.key == f.v.key() && f.ann.at.Before(at) {
		return f.ann.at
	}
	return at
}

type evAnnounce struct{ to string } // Announce

func (ev evAnnounce) on(c *core, now time.Time, emit func(effect)) bool {
	c.onAnnounce(ev, now, emit)
	return false
}

// doAnnounced tells the Announce calls of the live leadership the
// announced moment (local time).
type doAnnounced struct{ at time.Time }

func (f doAnnounced) do(x executor) {
	if a, ok := x.(interface{ announced(doAnnounced) }); ok {
		a.announced(f)
	}
}

// announced answers the Announce calls waiting on the live leadership.
func (lp *loop) announced(f doAnnounced) {
	if l := lp.lead; l != nil {
		l.annAt = f.at
		for _, ch := range l.annWait {
			ch <- f.at
		}
		l.annWait = nil
	}
}

// announceReq is Announce, sent to the run loop.
type announceReq struct {
	l      *Leadership
	to     string
	answer chan time.Time // capacity 1: the announced moment
}

func (r announceReq) serve(lp *loop) event {
	if r.l != lp.lead {
		return nil // over already: Announce returns on exited
	}
	if !r.l.annAt.IsZero() {
		r.answer <- r.l.annAt
		return nil
	}
	r.l.annWait = append(r.l.annWait, r.answer)
	return evAnnounce{to: r.to}
}

// Announce says, in the leader's renewals, that this leadership is about
// to end, and returns nil at the announced moment: when every live
// follower has read the announcement and reads again then, and every
// FrequentInterval/16 after it for a LeaderTimeout. The leadership stays
// live and renews meanwhile; Announce ends nothing. Once it returns, stop
// the leader's work, wait for it to finish, and call Resign, Transfer
// (naming the same member as to) or Close: a follower then takes the
// release over within about FrequentInterval/16 and a takeover's four
// store calls, where without the announcement a stable follower would
// find it at its next read, up to an InfrequentInterval later.
//
// In storage mode the moment comes about an InfrequentInterval after the
// call: (k-1) FrequentIntervals after the next renewal, plus
// FrequentInterval/4 + FrequentInterval/8, where k =
// ⌈InfrequentInterval/FrequentInterval⌉ (26.9 s after the next renewal at
// the defaults; half a FrequentInterval more when InfrequentInterval =
// FrequentInterval). In PeerMode followers hear the release as it is
// written, so Announce returns at once. A member of an older version (or
// the original s3lect) ignores the announcement and finds the release at
// its next read.
//
// to, if not "", names the member the release is meant for; end with
// Transfer(ctx, to). Every member watches the moment: the named one takes
// the release over at once, any other half a FrequentInterval after it
// first sees it, so a member that runs nowhere holds the group up for
// less than a crash would. Announce returns the leadership's end cause if it
// ends first (then nothing was announced that matters: the usual rules
// apply), or ctx.Err() if ctx ends first; the announcement stays in the
// renewals, and a release after it is found as fast. To fit a deadline
// (a Kubernetes grace period), give ctx the time left less the drain
// and the release; the move is then as fast for the followers that have
// read the announcement by the release, and as before for the others.
// Calling it again waits for the same moment. On a Leadership of package
// pool, it returns at once.
func (l *Leadership) Announce(ctx context.Context, to string) error {
	r := announceReq{l: l, to: to, answer: make(chan time.Time, 1)}
	select {
	case l.e.reqs <- r:
	case <-l.exited:
		return context.Cause(l.ctx)
	case <-l.e.loopDone:
		return nil // no run loop (package pool's leaderships): nothing to announce
	case <-ctx.Done():
		return ctx.Err()
	}
	var at time.Time
	select {
	case at = <-r.answer:
	case <-l.ctx.Done():
		return context.Cause(l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
	t := time.NewTimer(l.e.clock.RealUntil(at))
	defer t.Stop()
	select {
	case <-t.C:
		if err := l.ctx.Err(); err != nil {
			return context.Cause(l.ctx)
		}
		return nil
	case <-l.ctx.Done():
		return context.Cause(l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mutReleaseAnnounced is the mutation mutAnnounceRelease: the leader ends
// its leadership and releases at the announced moment, whether or not its
// holder is done.
func (c *core) mutReleaseAnnounced(l *leader, now time.Time, emit func(effect)) {
	if mutAnnounceRelease && l.ending == nil && !l.ann.at.IsZero() && !now.Before(l.ann.at) {
		l.holderDone = true
		c.endLead(l, ErrResigned, emit)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Shutdown closes the elector as Close does, but announces first: if it
// holds a leadership, that leadership's release is announced (Announce)
// and its work goes on until the announced moment, so that a follower
// takes the release over within about FrequentInterval/16 of Close
// writing it, where after Close alone a stable follower in storage mode
// finds it at its next read, up to an InfrequentInterval later. If ctx
// ends first, it closes at once. It returns what Close returns. Like
// Close, it does not wait for the leader's work to stop: where that work
// must be finished before another member starts it, call Announce, stop
// the work, then Resign.
func (e *Elector) Shutdown(ctx context.Context) error {
	if l := e.snap.Load().lead; l != nil {
		l.Announce(ctx, "")
	}
	return e.Close()
}
