package k8slock

import (
	"context"
	"errors"
	"time"
)

// ErrLeaseEnded is the cause of a LeaseContext that ended because this
// Lock's lease bound passed, or because a read or write showed that this
// candidate no longer holds the record.
var ErrLeaseEnded = errors.New("k8slock: this candidate's lease has ended")

// LeaseContext returns a context for leader work that ends when parent
// ends or, with cause ErrLeaseEnded, as soon as this Lock can no longer
// be sure it holds the record: the record's leaseDurationSeconds minus a
// tenth after the start of the last write that named this Lock the
// holder, or at once when it writes or reads a record that names another
// holder (a release, a takeover). No candidate can take over before that
// bound: client-go waits a whole leaseDurationSeconds after it saw the
// write, and the tenth covers clock rates that differ by up to 10%.
// Renewals move the bound on, as long as the context is live.
//
// Its Err method reads the monotonic clock itself, so work that checks
// Err before each step does nothing after a pause past the bound, even
// before the timer that ends the context has run. Contexts derived from
// it end with it but do not read the clock: check this one. Call it in
// OnStartedLeading, or in a controller-runtime Runnable that needs
// leader election; before the first write that named this Lock the
// holder it returns a context that has ended.
func (l *Lock) LeaseContext(parent context.Context) context.Context {
	inner, cancel := context.WithCancelCause(parent)
	c := &leaseCtx{Context: inner, cancel: cancel, l: l}
	l.mu.Lock()
	if l.expiredLocked(time.Now()) {
		cancel(ErrLeaseEnded)
	} else {
		l.leases[c] = struct{}{}
		l.armLocked()
	}
	l.mu.Unlock()
	context.AfterFunc(inner, func() {
		l.mu.Lock()
		delete(l.leases, c)
		l.mu.Unlock()
	})
	return c
}

// leaseCtx is a LeaseContext.
type leaseCtx struct {
	context.Context
	cancel context.CancelCauseFunc
	l      *Lock
}

func (c *leaseCtx) Err() error {
	c.l.mu.Lock()
	expired := c.l.expiredLocked(time.Now())
	c.l.mu.Unlock()
	if expired {
		c.cancel(ErrLeaseEnded)
	}
	return c.Context.Err()
}

func (l *Lock) expiredLocked(now time.Time) bool {
	return l.until.IsZero() || !now.Before(l.until)
}

// extendLeaseLocked moves the lease bound on to until.
func (l *Lock) extendLeaseLocked(until time.Time) {
	if until.After(l.until) {
		l.until = until
	}
	l.armLocked()
}

// endLeaseLocked ends the lease now, and the lease contexts with it.
func (l *Lock) endLeaseLocked() {
	l.until = time.Time{}
	l.cancelAllLocked()
}

// cancelAllLocked ends every lease context.
func (l *Lock) cancelAllLocked() {
	for c := range l.leases {
		c.cancel(ErrLeaseEnded)
		delete(l.leases, c)
	}
}

// armLocked sets the timer to end the lease contexts at the bound, if
// there are any.
func (l *Lock) armLocked() {
	if len(l.leases) == 0 {
		return
	}
	d := time.Until(l.until)
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.fire)
		return
	}
	l.timer.Reset(d)
}

// fire ends the lease contexts once the bound has passed, or sets the
// timer again if a renewal moved it on.
func (l *Lock) fire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.expiredLocked(time.Now()) {
		l.cancelAllLocked()
		return
	}
	l.armLocked()
}
