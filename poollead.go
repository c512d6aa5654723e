package s3lect

import (
	"context"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/shardlead"
)

// Package pool builds its shards' Leaderships through this Maker, typed,
// without a function in this package's API (internal/shardlead says why
// that takes a registry).
func init() { shardlead.Register(shardlead.Maker[*Leadership](detachedLeaderships)) }

// detachedLeaderships returns a factory of Leaderships that no Elector
// runs, for package pool's multiplexed shard lease: the pool extends, ends
// and finishes each through its control, and learns of each one's end
// through the ended callback it gives. The one Elector they all hang on
// only carries the clock; its loop counts as ended.
func detachedLeaderships(clock lease.Clock) shardlead.Factory[*Leadership] {
	e := &Elector{clock: clock, loopDone: closedChan}
	if clock.Rate != 0 && clock.Rate != 1 {
		// A simulated clock: Err's wall-clock cross-check reads the same
		// clock, as the pool's deadlines are on it.
		e.clock.WallNow = e.clock.Now
	}
	return func(parent context.Context, term uint64, deadline time.Time, ended func()) (*Leadership, shardlead.Control) {
		l := newLeadership(e, parent, term, deadline, ended)
		return l, detached{l}
	}
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

type detached struct{ l *Leadership }

func (d detached) Extend(deadline time.Time) { d.l.extend(deadline) }
func (d detached) End(cause error)           { d.l.cancel(cause) }
func (d detached) Exit(err error) {
	d.l.cancel(ErrResigned) // no-op unless it was never cancelled
	d.l.stop()
	d.l.endErr = err
	close(d.l.exited)
}
