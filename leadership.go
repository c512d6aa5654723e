package s3lect

import (
	"context"
	"sync"
	"time"
)

// Leadership is one term of leadership won by Campaign.
type Leadership struct {
	e      *Elector
	ctx    context.Context // cancelled when the leadership ends
	pub    leaseContext    // ctx as Context returns it
	cancel context.CancelCauseFunc
	term   uint64
	exited chan struct{} // closed when the heartbeat has returned, its release written or abandoned

	mu       sync.Mutex
	deadline time.Time     // local monotonic time the lease ends without a newer write
	rec      Record        // the record last written
	etag     string        // its ETag
	changed  chan struct{} // closed at the next renewal, and at the end (then never replaced)
	endErr   error         // why the release could not be written, if it could not
}

// Context returns the leadership's context. It derives from the context
// passed to Campaign and is cancelled, with a cause that context.Cause
// reports, the moment the leadership ends:
//
//   - ErrLeadershipLost: another holder wrote the lockfile;
//   - ErrLeaseExpired: renewals failed, by retries running out or by the
//     lease deadline (LeaderTimeout minus a tenth after the start of the
//     last successful write) passing on this instance's monotonic clock;
//   - ErrResigned: Resign or Close was called (after Close the cause
//     also matches ErrClosed);
//   - the cause of the Campaign context, when that ended.
//
// Its Err also reads the clock: a process resumed after a pause (SIGSTOP,
// a suspended VM) that asks Err before the expiry timer has run already
// gets the lease's end. Do the leader's work under this context, check
// Err before each step that must not run twice, and pass Term where a
// stale leader could do harm.
func (l *Leadership) Context() context.Context { return l.pub }

// leaseContext is the leadership's context with an Err that checks the
// lease deadline on the monotonic clock before answering.
type leaseContext struct {
	context.Context
	l *Leadership
}

func (c leaseContext) Err() error {
	if c.Context.Err() == nil && c.l.expired() {
		c.l.cancel(ErrLeaseExpired)
	}
	return c.Context.Err()
}

// expired reports whether the lease deadline has passed.
func (l *Leadership) expired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !time.Now().Before(l.deadline)
}

// Done is shorthand for Context().Done().
func (l *Leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Term returns the leadership's fencing token: higher than every term
// before it on this lockfile, and never held by another leadership.
func (l *Leadership) Term() uint64 { return l.term }

// Resign ends the leadership: it cancels Context with ErrResigned first,
// then writes the released record so that a follower takes over at once
// instead of waiting for LeaderTimeout, and returns when that write is done
// or has definitely failed. If ctx ends first, Resign returns ctx.Err() and
// the release goes on in the background. Resign is safe to call more than
// once and after the leadership ended on its own; it returns nil when there
// was nothing left to release.
//
// Cancellation only asks the leader's work to stop. Where that work must
// be finished before anyone else starts, drain first: cancel or stop your
// work, wait for it to return, then call Resign.
func (l *Leadership) Resign(ctx context.Context) error {
	l.end(ErrResigned)
	select {
	case <-l.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.endErr
}

// end cancels the leadership's context with cause, unless it already ended.
func (l *Leadership) end(cause error) { l.cancel(cause) }

// live reports whether the lease is live by this instance's clock, and the
// record and ETag last written.
func (l *Leadership) live() (Record, string, bool) {
	rec, etag, live, _ := l.watch()
	return rec, etag, live
}

// watch is live plus a channel that is closed at the next renewal or at
// the end of the leadership (after its release is written). Liveness is
// computed from the clock on every call, never from a timer having fired,
// so a process resumed after a pause cannot claim a lease that ran out.
func (l *Leadership) watch() (Record, string, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec, l.etag, l.ctx.Err() == nil && time.Now().Before(l.deadline), l.changed
}

// renewed records a successful write and wakes the watchers.
func (l *Leadership) renewed(rec Record, etag string, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec, l.etag, l.deadline = rec, etag, deadline
	close(l.changed)
	l.changed = make(chan struct{})
}
