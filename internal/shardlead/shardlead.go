// Package shardlead lets package pool hand out s3lect.Leadership values
// that no Elector runs: the leaderships of a multiplexed shard lease, whose
// lease is one session object's (docs/pool-protocol.md).
//
// Why a registry: only package s3lect can build a *s3lect.Leadership (its
// fields are unexported), package pool imports s3lect, and s3lect must add
// nothing to its API that users would mistake for theirs. So s3lect cannot
// import a package that names its Leadership type (that package would
// import s3lect: a cycle), and pool cannot call into s3lect but through
// its exported API. What remains is a value that s3lect leaves here when
// it is initialised and pool takes up when it is (s3lect's init runs
// first, as pool imports it). The type parameter keeps both ends typed:
// s3lect registers a Maker[*s3lect.Leadership], pool asks for exactly
// that type, and the one check between them runs once, at pool's
// initialisation, so a mismatch stops every program and test at start.
// The hook keeps the Leadership type's behaviour (Context, Term, Resign,
// Err reading the clock) in one place.
package shardlead

import (
	"context"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
)

// Control is the pool's hold on a Leadership it runs.
type Control interface {
	// Extend moves the lease's end to deadline, on the local clock the
	// Maker was given.
	Extend(deadline time.Time)
	// End cancels the leadership's context with cause, unless it ended.
	End(cause error)
	// Exit marks the leadership over, its release written (err nil) or
	// abandoned: Resign returns err from then on. Call it once.
	Exit(err error)
}

// Factory returns leaderships of type L whose context derives from parent
// and whose lease ends at deadline. ended is called once, in a goroutine
// of its own, when the leadership's context ends (one callback the
// leadership has anyway, so the pool keeps no other per shard).
type Factory[L any] func(parent context.Context, term uint64, deadline time.Time, ended func()) (lead L, c Control)

// Maker returns the Factory of one pool worker's leaderships, on the local
// clock the worker runs on.
type Maker[L any] func(clock lease.Clock) Factory[L]

// registered is the Maker that package s3lect registered.
var registered any

// Register records m as the Maker of leaderships of type L. Package s3lect
// calls it from an init function; nothing else does.
func Register[L any](m Maker[L]) { registered = m }

// Registered returns the Maker of leaderships of type L. It panics if
// none was registered for L: package pool calls it when it is initialised,
// after package s3lect has been.
func Registered[L any]() Maker[L] {
	m, ok := registered.(Maker[L])
	if !ok {
		var l L
		panic(fmt.Sprintf("shardlead: no Maker of %T registered (got %T); package s3lect registers it when initialised", l, registered))
	}
	return m
}
