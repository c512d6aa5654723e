// Package shardlead lets package pool hand out s3lect.Leadership values
// that no Elector runs: the leaderships of a multiplexed shard lease, whose
// lease is one session object's (docs/protocol.md, section 10).
//
// Package s3lect sets NewFactory when it is initialised; package pool, which
// imports s3lect, finds it set. The hook keeps the Leadership type's
// behaviour (Context, Term, Resign, Err reading the clock) in one place.
package shardlead

import (
	"context"
	"time"
)

// Control is the pool's hold on a Leadership it runs.
type Control interface {
	// Extend moves the lease's end to deadline, on the local clock New
	// was given.
	Extend(deadline time.Time)
	// End cancels the leadership's context with cause, unless it ended.
	End(cause error)
	// Exit marks the leadership over, its release written (err nil) or
	// abandoned: Resign returns err from then on. Call it once.
	Exit(err error)
}

// Factory returns *s3lect.Leadership values (as any, since this package
// cannot name the type) whose context derives from parent and whose lease
// ends at deadline.
type Factory func(parent context.Context, term uint64, deadline time.Time) (lead any, c Control)

// NewFactory returns a Factory of leaderships on the local clock that
// starts at base and runs at rate times real time (0 or 1: real time;
// tests only). Set by package s3lect.
var NewFactory func(base time.Time, rate float64) Factory
