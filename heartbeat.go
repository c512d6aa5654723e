package s3lect

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/s3lect/s3lect/store"
)

// heartbeat renews the lease every FrequentInterval until the leadership
// ends, then releases the lockfile when the end allows it and hands what it
// left in the store to the run loop. sentAt is when the winning write's
// first attempt was sent.
//
// Self-fencing: the lease ends LeaderTimeout minus the margin after the
// first attempt of the last successful write was sent, by this process's
// monotonic clock. A timer cancels the context at that moment whatever the
// heartbeat is doing; every successful renewal moves it.
func (l *Leadership) heartbeat(sentAt time.Time) error {
	e := l.e
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	expiry := time.AfterFunc(time.Until(deadline), func() { l.cancel(ErrLeaseExpired) })
	defer expiry.Stop()
	renew := time.NewTimer(time.Until(sentAt.Add(e.cfg.FrequentInterval)))
	defer renew.Stop()

	var unsure []byte // a renewal that was cut off with its outcome unknown
	for l.ctx.Err() == nil {
		select {
		case <-l.ctx.Done():
			continue
		case <-renew.C:
		}
		if l.expired() {
			// Resumed after a pause past the deadline, before the expiry
			// timer ran: a write now would come from a leader whose lease
			// is over. Stop without sending it.
			l.cancel(ErrLeaseExpired)
			continue
		}
		l.mu.Lock()
		rec, etag := l.rec, l.etag
		l.mu.Unlock()
		rec.LastUpdated = e.nextStamp()
		data := rec.encode()
		sentAt = time.Now()
		// The renewal runs under the leadership's context, so the lease
		// deadline, Resign and the parent all cut it short.
		newETag, err := e.put(l.ctx, data, etag)
		switch {
		case err == nil:
			deadline := sentAt.Add(e.cfg.LeaderTimeout - e.margin)
			l.renewed(rec, newETag, deadline)
			unsure = nil
			expiry.Reset(time.Until(deadline))
			renew.Reset(time.Until(sentAt.Add(e.cfg.FrequentInterval)))
			e.publish(Change{Leader: rec, IsLeader: true}) // same leader and term: recorded, not announced
		case l.ctx.Err() != nil:
			unsure = data
		case errors.Is(err, store.ErrPreconditionFailed):
			e.log.Warn("renewal found another writer", "term", l.term, "err", err)
			l.cancel(ErrLeadershipLost)
		default:
			e.log.Warn("renewal failed", "term", l.term, "err", err)
			l.cancel(ErrLeaseExpired)
		}
	}
	l.finish(unsure)
	return nil
}

// finish runs once the leadership's context is cancelled. It releases the
// lockfile unless the leadership was lost or expired, hands the resulting
// view to the run loop, announces the change and closes exited.
func (l *Leadership) finish(unsure []byte) {
	e := l.e
	cause := context.Cause(l.ctx)
	l.mu.Lock()
	rec, etag := l.rec, l.etag
	l.mu.Unlock()

	var (
		v   view
		err error
	)
	switch {
	case errors.Is(cause, ErrLeadershipLost):
		// Someone else holds it: the run loop reads to see who.
	case errors.Is(cause, ErrLeaseExpired):
		// The store did not take our renewals; the record is left as it
		// is. Nobody else may take it over before LeaderTimeout, but this
		// elector, knowing it has stopped, may at once.
		v = view{kind: kindOurs, etag: etag, rec: rec, term: rec.Term, seenAt: time.Now()}
	default:
		v, err = l.release(rec, etag, unsure)
	}
	e.log.Info("leadership ended", "term", l.term, "cause", cause)

	l.mu.Lock()
	l.endErr = err
	close(l.changed) // peers waiting on this leadership hear of its end now that the release is written
	l.mu.Unlock()
	e.mu.Lock()
	e.lead = nil
	e.handoff = &v
	e.publishLocked(Change{})
	e.mu.Unlock()
	e.nudge()
	close(l.exited)
}

// release writes the released record (lastUpdated zero, same term) over
// etag. unsure, if set, is a renewal whose outcome is unknown; if it landed,
// the release is written over it instead.
func (l *Leadership) release(rec Record, etag string, unsure []byte) (view, error) {
	e := l.e
	ctx := e.ctx // Close cancels it only after this leadership has finished
	rec.LastUpdated = time.Time{}
	data := rec.encode()
	tag, err := e.put(ctx, data, etag)
	if errors.Is(err, store.ErrPreconditionFailed) && unsure != nil {
		if got, gotTag, gerr := e.get(ctx); gerr == nil && bytes.Equal(got, unsure) {
			tag, err = e.put(ctx, data, gotTag)
		}
	}
	switch {
	case err == nil:
		return view{kind: kindVacant, etag: tag, rec: rec, term: rec.Term, seenAt: time.Now()}, nil
	case errors.Is(err, store.ErrPreconditionFailed):
		return view{}, nil // another holder wrote since: nothing of ours is left
	default:
		e.log.Warn("release failed; followers take over after LeaderTimeout", "term", l.term, "err", err)
		return view{kind: kindOurs, etag: etag, rec: rec, term: rec.Term, seenAt: time.Now()}, err
	}
}
