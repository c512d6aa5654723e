package lease

import "time"

// Clock is a process's local clock as a lease holder reads it: the
// monotonic time the leases run on, which tests may run fast or slow
// (Rate), and the wall clock that a leadership's Err cross-checks.
type Clock struct {
	// Base is a fixed local time: Rate counts from it, and a caller may
	// store local times as offsets from it. Set it, with NewClock.
	Base time.Time
	// Rate is the local clock's rate relative to real time; 0 or 1:
	// real time (tests only).
	Rate float64
	// WallNow is the wall clock; nil: time.Now (tests only).
	WallNow func() time.Time
}

// NewClock returns the real clock, based now.
func NewClock() Clock { return Clock{Base: time.Now()} }

// Now is the local monotonic time.
func (c *Clock) Now() time.Time {
	if c.Rate == 0 || c.Rate == 1 {
		return time.Now()
	}
	return c.Base.Add(time.Duration(float64(time.Since(c.Base)) * c.Rate))
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
// up, so that a timer set for it never fires before t.
func (c *Clock) RealUntil(t time.Time) time.Duration {
	d := t.Sub(c.Now())
	if c.Rate == 0 || c.Rate == 1 || d <= 0 {
		return d
	}
	return time.Duration(float64(d)/c.Rate) + 1
}
