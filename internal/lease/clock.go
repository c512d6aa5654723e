package lease

import (
	"sync/atomic"
	"time"
)

// Clock is a process's local clock as a lease holder reads it: the time
// the leases run on, which tests may run fast or slow (Rate), and the wall
// clock that a leadership's Err cross-checks.
//
// The local time counts a suspend of the host. Go's monotonic clock
// (CLOCK_MONOTONIC on Linux) stops while the system is suspended (a
// laptop's sleep, a VM suspended to memory); a leader whose lease and held
// time ran on it would, after a suspend of S, report S less than had
// passed, and a follower's elapsed-time bound (docs/protocol.md, 3.2)
// would let it take over during the lease. So Now adds to the monotonic
// reading the time the host has spent suspended since Base: on Linux
// CLOCK_BOOTTIME less CLOCK_MONOTONIC, which grows by exactly each suspend
// and by nothing else. Not the wall clock: a wall clock stepped forward
// (NTP, an operator) is not time that passed, and a follower whose wait
// counted it could take over a live lease; the boot clock runs at the
// monotonic clock's rate and steps only by real suspends. Where no such
// clock exists (other systems), the suspended time counts as zero and only
// Err's wall-clock cross-check catches a suspend (docs/protocol.md, 3.1).
type Clock struct {
	// Base is a fixed local time: Rate counts from it, and a caller may
	// store local times as offsets from it. Set it, with NewClock.
	Base time.Time
	// Rate is the local clock's rate relative to real time; 0 or 1:
	// real time (tests only).
	Rate float64
	// WallNow is the wall clock; nil: time.Now (tests only).
	WallNow func() time.Time
	// Slept, if set (tests only), is the host's suspends as a simulation
	// models them: how much of the real time since Base the host spent
	// suspended. The monotonic clock does not count it; the wall clock
	// and Now do, as they do a real suspend.
	Slept func() time.Duration
	// Virtual (tests only) marks a clock in virtual time (a synctest
	// bubble): the host's own suspends are not read, since the bubble's
	// time does not run with the host's, and each reading costs three
	// system calls (half of a simulation's CPU time); Slept models them.
	Virtual bool
	// MonoOnly makes Now the monotonic reading alone, as before suspends
	// were counted (the simulation's mutation monoclock).
	MonoOnly bool

	slept0 time.Duration // the host's suspended time at Base
	high   *atomic.Int64 // the largest host suspended time read, so that Now never goes back
}

// NewClock returns the real clock, based now.
func NewClock() Clock {
	c := Clock{Base: time.Now()}
	if s, ok := hostSlept(); ok {
		c.slept0, c.high = s, new(atomic.Int64)
	}
	return c
}

// sleptQuantum rounds the host's suspended time down: two clocks read one
// after the other differ by a few hundred nanoseconds, which must not make
// Now jitter (nor a simulation in virtual time differ from run to run). A
// suspend shorter than this is within the clock-rate tolerance anyway.
const sleptQuantum = 10 * time.Millisecond

// hostSleptSince returns how long the host has been suspended since Base.
func (c *Clock) hostSleptSince() time.Duration {
	if c.high == nil || c.Virtual {
		return 0
	}
	s, ok := hostSlept()
	if !ok {
		return time.Duration(c.high.Load())
	}
	d := (s - c.slept0) / sleptQuantum * sleptQuantum
	for {
		h := c.high.Load()
		if int64(d) <= h {
			return time.Duration(h)
		}
		if c.high.CompareAndSwap(h, int64(d)) {
			return d
		}
	}
}

// scaled returns d at the clock's rate.
func (c *Clock) scaled(d time.Duration) time.Duration {
	if c.Rate == 0 || c.Rate == 1 {
		return d
	}
	return time.Duration(float64(d) * c.Rate)
}

// Now is the local time: monotonic, and counting the host's suspends.
func (c *Clock) Now() time.Time {
	t := time.Now()
	if c.Rate != 0 && c.Rate != 1 {
		t = c.Base.Add(c.scaled(time.Since(c.Base)))
	}
	if c.MonoOnly {
		if c.Slept != nil {
			t = t.Add(-c.scaled(c.Slept())) // the modelled suspends stop the monotonic clock
		}
		return t
	}
	return t.Add(c.hostSleptSince())
}

// Wall is the wall clock.
func (c *Clock) Wall() time.Time {
	if c.WallNow != nil {
		return c.WallNow()
	}
	return time.Now()
}

// RealUntil returns how long, in real time, until local time t: negative
// or zero once t has come. On a clock that runs fast or slow it is rounded
// up, so that a timer set for it never fires before t. (A Go timer runs
// on the monotonic clock: a suspend while it is set delays it by as much.
// Holders that must act at t re-check the clock at least every Tick.)
func (c *Clock) RealUntil(t time.Time) time.Duration {
	d := t.Sub(c.Now())
	if c.Rate == 0 || c.Rate == 1 || d <= 0 {
		return d
	}
	return time.Duration(float64(d)/c.Rate) + 1
}

// Tick is how often a holder re-checks a deadline of a lease of length
// lt while it waits for it: a twentieth of the lease. A timer set before
// a suspend fires late by the suspend; the next tick after the resume
// reads Now, which counts the suspend, and finds the deadline passed.
func Tick(lt time.Duration) time.Duration { return max(lt/20, time.Millisecond) }
