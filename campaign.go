package s3lect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/store"
)

// campaign is one waiting Campaign call. The run loop claims it when a
// takeover is due and answers on result.
type campaign struct {
	ctx    context.Context
	result chan campaignResult // capacity 1; sent to under e.mu, at most once

	// Guarded by e.mu.
	claiming  bool // the run loop is writing a takeover for this campaign
	withdrawn bool // Campaign returned, or is returning, without a result
}

type campaignResult struct {
	l   *Leadership
	err error
}

// Campaign blocks until this elector leads, and returns the Leadership.
//
// It returns ctx.Err() if ctx ends first, leaving nothing behind: a
// takeover that was being written is released before Campaign returns. It
// returns ErrClosed after Close, ErrCampaigning while another Campaign on
// this elector waits or its Leadership is live, and an error naming the
// lockfile when the store fails permanently (a missing bucket, denied
// access, a store without conditional writes). Once a Leadership has ended,
// Campaign may be called again.
func (e *Elector) Campaign(ctx context.Context) (*Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &campaign{ctx: ctx, result: make(chan campaignResult, 1)}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, ErrClosed
	case e.camp != nil || e.lead != nil:
		e.mu.Unlock()
		return nil, ErrCampaigning
	}
	e.camp = c
	e.mu.Unlock()
	e.start()
	e.nudge()

	var stop error
	select {
	case r := <-c.result:
		return r.l, r.err
	case <-ctx.Done():
		stop = ctx.Err()
	case <-e.closing:
		stop = ErrClosed
	}

	// Withdraw. A takeover in flight decides the outcome: wait for it, and
	// resign what it won before returning.
	e.mu.Lock()
	c.withdrawn = true
	if e.camp == c {
		e.camp = nil
	}
	claiming := c.claiming
	var r campaignResult
	if !claiming {
		select {
		case r = <-c.result:
		default:
		}
	}
	e.mu.Unlock()
	if claiming {
		r = <-c.result
	}
	if r.l != nil {
		cause := context.Cause(ctx)
		if stop == ErrClosed {
			cause = errCloseResign
		}
		r.l.end(cause)
		<-r.l.exited
	}
	return nil, stop
}

// Follower polling modes.
type mode int

const (
	frequent   mode = iota // leadership is changing or unknown: read every FrequentInterval
	infrequent             // a leader has renewed steadily for LeaderTimeout: read every InfrequentInterval
)

// follower is the run loop's state.
type follower struct {
	v           view
	mode        mode
	lastRead    time.Time // local time of the last read attempt; zero: read now
	prevETag    string    // the ETag the read before the last one saw
	stableID    string    // the leader (ID and term) seen since stableSince
	stableTerm  uint64
	stableSince time.Time
	claimAfter  time.Time // no takeover before this local time (after a failed one)
	peerGen     uint64    // generation of the poller's current target
	peerActive  bool      // the leader answers for the lockfile: no storage reads
	readErr     error     // the last read's failure, nil after a success
}

// run is the elector's main loop. It reads the lockfile while this elector
// follows or watches, publishes what it sees, and writes takeovers for a
// waiting Campaign. While this elector leads it only waits: the heartbeat
// speaks for the lockfile. It returns when Close begins.
//
// Its reads run under ctx, which Close cancels first; its takeover writes
// run under e.ctx, so that a takeover in flight completes and its outcome
// is known.
func (e *Elector) run(ctx context.Context) error {
	var f follower
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-e.closing:
			return nil
		case <-e.wake:
		case <-timer.C:
		case r := <-e.peerReports:
			e.heardPeer(&f, r)
		}
		timer.Stop()
		if d, ok := e.step(ctx, &f); ok {
			timer.Reset(d)
		}
	}
}

// step does everything that is due and returns how long to sleep, or
// false to sleep until nudged.
func (e *Elector) step(ctx context.Context, f *follower) (time.Duration, bool) {
	for {
		e.mu.Lock()
		leading := e.lead != nil
		if h := e.handoff; h != nil {
			e.handoff = nil
			f.v, f.mode, f.claimAfter = *h, frequent, time.Time{}
			if f.v.kind == kindUnknown {
				f.lastRead = time.Time{}
			} else {
				f.lastRead = time.Now()
			}
		}
		c := e.camp
		if c != nil && (c.withdrawn || c.ctx.Err() != nil) {
			c = nil
		}
		e.mu.Unlock()
		if leading || ctx.Err() != nil {
			return 0, false
		}

		now := time.Now()
		if f.peerActive {
			// The leader answers for the lockfile; its silence or refusal
			// comes back as a failed report.
			e.publish(Change{Leader: f.v.leader(now, e.cfg.LeaderTimeout), Err: f.readErr})
			return 0, false
		}
		if f.lastRead.IsZero() || !now.Before(f.lastRead.Add(e.interval(f.mode))) {
			e.read(ctx, f, c)
			continue
		}
		at, ok := f.v.takeoverAt(e.cfg.LeaderTimeout)
		if ok && f.mode == infrequent && f.v.kind == kindHeld {
			ok = false // stale by design: the next read decides
		}
		if c != nil && ok && !now.Before(at) && !now.Before(f.claimAfter) {
			e.claim(e.ctx, f, c)
			continue
		}
		e.publish(Change{Leader: f.v.leader(now, e.cfg.LeaderTimeout), Err: f.readErr})

		wakeAt := f.lastRead.Add(e.interval(f.mode))
		if ok && at.After(now) && at.Before(wakeAt) {
			wakeAt = at // a takeover, or for a watcher the expiry, falls before the next read
		}
		if c != nil && ok && f.claimAfter.After(now) && f.claimAfter.Before(wakeAt) {
			wakeAt = f.claimAfter
		}
		return wakeAt.Sub(now), true
	}
}

func (e *Elector) interval(m mode) time.Duration {
	if m == infrequent {
		return e.cfg.InfrequentInterval
	}
	return e.cfg.FrequentInterval
}

// read reads the lockfile, updates the view and chooses the polling mode.
func (e *Elector) read(ctx context.Context, f *follower, c *campaign) {
	f.lastRead = time.Now()
	data, etag, err := e.get(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		f.mode = frequent
		if store.IsPermanent(err) {
			e.failCampaign(c, err)
			f.mode = infrequent // keep watching, without hammering a store that refuses us
		}
		e.log.Warn("reading the lockfile failed", "err", err)
		f.readErr = err
		return
	}
	f.readErr = nil
	now := time.Now()
	f.v = f.v.observe(data, etag, now)
	if f.v.kind == kindCorrupt && etag != f.prevETag {
		e.log.Warn("lockfile is unreadable; it will be taken over after LeaderTimeout", "etag", etag)
	}

	rec := f.v.rec
	if f.v.kind != kindHeld || rec.LeaderID != f.stableID || rec.Term != f.stableTerm {
		f.stableID, f.stableTerm, f.stableSince = rec.LeaderID, rec.Term, now
	}
	late := time.Since(rec.LastUpdated) > e.cfg.FrequentInterval+e.cfg.FrequentInterval/2 // a wall-clock hint only
	renewed := etag != f.prevETag
	f.prevETag = etag
	if f.v.kind == kindHeld && renewed && !late && now.Sub(f.stableSince) >= e.cfg.LeaderTimeout {
		f.mode = infrequent
	} else {
		f.mode = frequent
	}
	if e.cfg.PeerMode && f.mode == infrequent && rec.LeaderAddr != "" {
		f.peerGen++
		f.peerActive = true
		e.setPeerTarget(peerTarget{gen: f.peerGen, id: rec.LeaderID, term: rec.Term, addr: rec.LeaderAddr, etag: etag})
	}
}

// heardPeer takes in what the poller heard. An answer from the expected
// leader with a new ETag counts as seeing that ETag at the time the answer
// arrived (the leader wrote it before answering). Any failure sends the
// follower back to the store, in the frequent interval.
func (e *Elector) heardPeer(f *follower, r peerReport) {
	if !f.peerActive || r.gen != f.peerGen {
		return // about a target the loop has since dropped
	}
	if r.err != nil {
		e.log.Info("peer check failed; reading the lockfile", "err", r.err)
		f.peerActive, f.mode, f.lastRead = false, frequent, time.Time{}
		return
	}
	switch {
	case r.etag != "" && r.etag != f.v.etag:
		f.v = view{kind: kindHeld, etag: r.etag, rec: r.rec, term: r.rec.Term, seenAt: r.at}
		f.prevETag = r.etag
	case r.etag == "":
		// A server that sends no ETag (the original s3lect): the leader
		// vouches for itself, so treat the lease as seen now. Moving seenAt
		// later only ever delays a takeover; a read after any peer failure
		// sees the real ETag.
		f.v.rec, f.v.seenAt = r.rec, r.at
	}
}

// claim writes a takeover for c over the view's ETag.
func (e *Elector) claim(ctx context.Context, f *follower, c *campaign) {
	e.mu.Lock()
	if c.withdrawn {
		e.mu.Unlock()
		return
	}
	c.claiming = true
	term := max(f.v.term, e.maxTerm) + 1
	e.mu.Unlock()

	rec := Record{LeaderID: e.cfg.ServerID, LeaderAddr: e.cfg.ServerAddr, LastUpdated: e.nextStamp(), Term: term}
	data := rec.encode()
	sentAt := time.Now()
	etag, err := e.put(ctx, data, f.v.etag)
	deadline := sentAt.Add(e.cfg.LeaderTimeout - e.margin)
	if err == nil && !time.Now().Before(deadline) {
		// The write took longer than a lease: it may not be led on. Give
		// it back so that nobody waits for it.
		err = fmt.Errorf("s3lect: takeover of %q took longer than the lease", e.key)
		rec.LastUpdated = time.Time{}
		released := rec.encode()
		if tag, rerr := e.put(ctx, released, etag); rerr == nil {
			etag, data = tag, released
		}
		f.v = view{}.observe(data, etag, time.Now())
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	c.claiming = false
	switch {
	case err == nil:
		lctx, cancel := context.WithCancelCause(c.ctx)
		l := &Leadership{e: e, ctx: lctx, cancel: cancel, term: term, exited: make(chan struct{}),
			deadline: deadline, rec: rec, etag: etag, changed: make(chan struct{})}
		l.pub = leaseContext{Context: lctx, l: l}
		e.lead = l
		if e.camp == c {
			e.camp = nil
		}
		c.result <- campaignResult{l: l}
		e.publishLocked(Change{Leader: rec, IsLeader: true})
		e.log.Info("became leader", "term", term)
		e.g.Go(func() error { return l.heartbeat(sentAt) })
	case errors.Is(err, store.ErrPreconditionFailed):
		f.lastRead = time.Time{} // someone else wrote first: see who
		if c.withdrawn {
			c.result <- campaignResult{}
		}
	default:
		f.claimAfter = time.Now().Add(e.cfg.FrequentInterval)
		e.log.Warn("takeover failed", "err", err)
		if store.IsPermanent(err) {
			e.failCampaignLocked(c, err)
		} else if c.withdrawn {
			c.result <- campaignResult{}
		}
	}
}

// failCampaign makes a waiting Campaign return err.
func (e *Elector) failCampaign(c *campaign, err error) {
	if c == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failCampaignLocked(c, err)
}

func (e *Elector) failCampaignLocked(c *campaign, err error) {
	if e.camp == c {
		e.camp = nil
	}
	select {
	case c.result <- campaignResult{err: fmt.Errorf("s3lect: campaign for %q: %w", e.key, err)}:
	default:
	}
}
