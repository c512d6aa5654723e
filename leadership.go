package s3lect

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
)

// Leadership is one term of leadership won by Campaign.
type Leadership struct {
	e      *Elector
	ctx    context.Context // cancelled when the leadership ends
	pub    leaseContext    // ctx as Context returns it
	cancel context.CancelCauseFunc
	term   uint64
	exited chan struct{} // closed by the run loop when the leadership is over, its release written or abandoned
	endErr error         // why the release could not be written; set before exited is closed

	// deadline is the lease's end, in nanoseconds after e.clock.Base on the
	// elector's local clock. The run loop moves it at every renewal; Err,
	// the expiry timer and the peer handler read it.
	deadline atomic.Int64
	// wallDeadline is the same deadline on the wall clock, in Unix
	// nanoseconds: the wall time of the write's send plus the lease. Err
	// checks it too (a cross-check for clocks that stop while the process
	// does not run, such as a paused VM's monotonic clock).
	wallDeadline atomic.Int64
	expiry       atomic.Pointer[time.Timer] // cancels ctx at the deadline, whatever the run loop is doing
	stopDone     func() bool                // stops the AfterFunc that reports the end (to the run loop, or to a pool: ended)

	// Announce (announce.go); the run loop's alone.
	annAt   time.Time        // the announced moment, once a renewal carries it (local time)
	annWait []chan time.Time // Announce calls waiting to learn it
}

// newLeadership starts the leadership won for a Campaign whose context is
// parent, with its lease ending at deadline. Its end is reported to the
// run loop; with ended non-nil (a pool's shard, poollead.go), ended is
// called instead, in a goroutine of its own.
func newLeadership(e *Elector, parent context.Context, term uint64, deadline time.Time, ended func()) *Leadership {
	ctx, cancel := context.WithCancelCause(parent)
	l := &Leadership{e: e, ctx: ctx, cancel: cancel, term: term, exited: make(chan struct{})}
	l.pub = leaseContext{Context: ctx, l: l}
	l.setDeadline(deadline)
	t := time.AfterFunc(lease.MaxTiming, l.check) // armed below, once stored
	l.expiry.Store(t)
	t.Reset(l.untilCheck())
	if ended == nil {
		ended = func() {
			select {
			case e.leadDone <- l:
			case <-e.loopDone:
			}
		}
	}
	l.stopDone = context.AfterFunc(ctx, ended)
	return l
}

// extend moves the lease's end after a renewal.
func (l *Leadership) extend(deadline time.Time) {
	l.setDeadline(deadline)
	l.expiry.Load().Reset(l.untilCheck())
}

// untilCheck returns when the expiry timer must next look at the clocks:
// at the deadline, or a tick (lease.Tick) from now if that is sooner. A Go
// timer runs on the monotonic clock and fires late by a suspend of the
// host; the tick after the resume finds the lease over on the local
// clock, which counts the suspend (docs/protocol.md, 3.1).
func (l *Leadership) untilCheck() time.Duration {
	d := l.e.clock.RealUntil(l.e.clock.Base.Add(time.Duration(l.deadline.Load())))
	if l.e.cfg.LeaderTimeout == 0 {
		// A pool's shard leadership (poollead.go): its elector carries
		// only the clock, no LeaderTimeout to pace the looks by, and a
		// look every millisecond across thousands of shards stalled the
		// pool. It is checked at its deadline.
		return d
	}
	return min(d, lease.Tick(l.e.cfg.LeaderTimeout))
}

// check is the expiry timer: it ends the leadership once the lease is
// over, else looks again later.
func (l *Leadership) check() {
	if l.expired() {
		l.cancel(ErrLeaseExpired)
		return
	}
	if l.ctx.Err() == nil {
		l.expiry.Load().Reset(l.untilCheck())
	}
}

// setDeadline records the lease's end, a local time read from the
// elector's clock, and the same end on the wall clock: the wall time now
// plus what is left of the lease.
func (l *Leadership) setDeadline(deadline time.Time) {
	l.deadline.Store(int64(deadline.Sub(l.e.clock.Base)))
	l.wallDeadline.Store(l.e.clock.Wall().Add(deadline.Sub(l.e.clock.Now())).UnixNano())
}

// stop releases the leadership's timers once it is over.
func (l *Leadership) stop() {
	l.expiry.Load().Stop()
	l.stopDone()
}

// Context returns the leadership's context. It derives from the context
// passed to Campaign and is cancelled, with a cause that context.Cause
// reports, the moment the leadership ends:
//
//   - ErrLeadershipLost: another holder wrote the lockfile;
//     ErrAskedToStepDown (which matches ErrLeadershipLost too) when that
//     was an operator's step-down request, in storage mode;
//   - ErrLeaseExpired: renewals failed, by retries running out or by the
//     lease deadline (LeaderTimeout minus a tenth after the start of the
//     last successful write) passing on this instance's local clock;
//   - ErrResigned: Resign or Close was called (after Close the cause
//     also matches ErrClosed);
//   - the cause of the Campaign context, when that ended.
//
// Its Err also reads the clocks, so that a process resumed after a pause
// that asks Err before the expiry timer has run already gets the lease's
// end (ErrLeaseExpired). Exactly: Err reports the end once the local
// clock has reached the deadline, or the wall clock has reached the wall
// time the lease was set at plus what was left of it. The local clock is
// the monotonic one plus, on Linux, the time the host spent suspended
// (CLOCK_BOOTTIME less CLOCK_MONOTONIC): a process stopped by SIGSTOP,
// descheduled, or on a suspended Linux host, is caught by it, and the
// expiry timer looks at it at least every LeaderTimeout/20, so the
// context ends within that of a resume. A VM paused by its hypervisor,
// or a suspend on other systems, is not counted by it. The
// wall clock catches it only once it has been set right after the resume
// (a paravirtual clock, or an NTP step), and only if Err is asked after
// that; until then nothing inside the process can know. A wall clock
// stepped forward on a healthy leader ends its leadership early (never
// late). Do the leader's work under this context, check Err before each
// step that must not run twice, and pass Term where a stale leader could
// do harm: only fencing with Term protects against a pause that no clock
// noticed.
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

// expired reports whether the lease deadline has passed on the local
// monotonic clock or on the wall clock.
func (l *Leadership) expired() bool {
	return !l.e.clock.Now().Before(l.e.clock.Base.Add(time.Duration(l.deadline.Load()))) ||
		l.e.clock.Wall().UnixNano() >= l.wallDeadline.Load()
}

// Term returns the leadership's fencing token: higher than every term
// before it on this lockfile, and never held by another leadership. That
// holds across records written without terms (the original s3lect) and
// deleted lockfiles, thanks to the term object (LockfilePath + ".term").
// It does not hold if the term object is deleted (or lost by the store)
// while the lockfile's term is also lost, deleted or overwritten by a
// writer without terms: a takeover then knows only the terms its own
// elector has seen, and a freshly started one begins again at 1. Nor
// does it hold against a forged term (docs/protocol.md, 1.1).
func (l *Leadership) Term() uint64 { return l.term }

// Resign ends the leadership: it cancels Context with ErrResigned first,
// then the lockfile is released (written with lastUpdated zero) so that a
// follower takes over at its next read instead of waiting for
// LeaderTimeout: in PeerMode within a fraction of a second, in storage
// mode up to an InfrequentInterval later, or within about
// FrequentInterval/16 when Announce came first (docs/moves.md,
// 11.4). It
// returns when that write is done or has definitely failed: nil, or why it
// failed (the lockfile then stays held until followers take over after
// LeaderTimeout). If ctx ends
// first, Resign returns ctx.Err() and the release goes on in the
// background. Resign is safe to call more than once and after the
// leadership ended on its own; it returns nil when there was nothing left
// to release.
//
// Cancellation only asks the leader's work to stop. Where that work must
// be finished before anyone else starts, drain first: cancel or stop your
// work, wait for it to return, then call Resign.
//
// The elector that resigned does not take its own released record back
// while another member may take it: a Campaign it starts again holds off
// for the others' next read (docs/protocol.md, section 11), so that the
// leadership moves to another live member; in a group of one it leads
// again after that hold-off. Resign after the leadership ended on its own
// also tells the elector the holder is done: a leader asked to step down
// (s3lect release) releases the lockfile then.
//
// On a Leadership of package pool there is no lockfile to release:
// Resign ends the leadership and returns nil at once, also from inside
// the shard's Work; the worker gives the shard up when Work returns.
func (l *Leadership) Resign(ctx context.Context) error {
	l.cancel(ErrResigned)
	return l.handOver(ctx, "")
}

// Transfer ends the leadership as Resign does, and hands it to the member
// whose ServerID is to, like raft's leadership transfer: the released
// record names it, it may take the lockfile over at its next read (its
// next peer answer, in PeerMode), and every other member waits first for
// the longer of LeaderTimeout and InfrequentInterval, plus a
// FrequentInterval (after Announce, half a FrequentInterval from when it
// first sees the release); then anyone may. A member of an older version (or the
// original s3lect) ignores the name and may take the lockfile over at
// once. Transfer returns when the release is written or has definitely
// failed, or ctx.Err() when ctx ends first (the release goes on). On a
// Leadership of package pool, whose shards the pool places, Transfer is
// Resign.
func (l *Leadership) Transfer(ctx context.Context, to string) error {
	if to == "" {
		return errors.New("s3lect: Transfer needs the ServerID of the member to hand the leadership to")
	}
	return l.handOver(ctx, to)
}

// handOver tells the run loop the holder is done with the leadership (and
// to whom it goes), ends it, and waits for its release.
func (l *Leadership) handOver(ctx context.Context, to string) error {
	if l.e.reqs == nil {
		// A pool's shard leadership (poollead.go): no run loop, no release
		// to write. It ends here; the pool gives the shard up when Work
		// returns. Waiting for exited, which the pool closes only after
		// Work has returned, would hang a Work that resigns and then
		// returns.
		l.cancel(ErrResigned)
		return nil
	}
	select {
	case l.e.reqs <- resignReq{l: l, to: to}:
		// The run loop ends the leadership itself, after it has taken to
		// in: cancelling here could let it write the release first.
	case <-l.exited:
	case <-l.e.loopDone:
		l.cancel(ErrResigned) // no run loop (package pool's leaderships): end it here
	case <-ctx.Done():
		l.cancel(ErrResigned)
		return ctx.Err()
	}
	select {
	case <-l.exited:
		return l.endErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end cancels the leadership's context with cause, unless it already ended.
func (l *Leadership) end(cause error) { l.cancel(cause) }

// live reports whether the lease is live by this instance's clock.
// Liveness is computed from the clock on every call, never from a timer
// having fired, so a process resumed after a pause cannot claim a lease
// that ran out.
func (l *Leadership) live() bool {
	return l.ctx.Err() == nil && !l.expired()
}
