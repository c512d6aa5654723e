package s3lect

import "time"

// The elector's clocks: the local monotonic time the election runs on,
// which tests may run fast or slow (rate), and the wall clock that
// Leadership.Err cross-checks.

// wall is the wall clock Leadership.Err cross-checks (tests move it).
func (e *Elector) wall() time.Time {
	if e.wallNow != nil {
		return e.wallNow()
	}
	return time.Now()
}

// now is the elector's local monotonic time. Tests model a clock that
// runs fast or slow by setting rate.
func (e *Elector) now() time.Time {
	if e.rate == 0 || e.rate == 1 {
		return time.Now()
	}
	real := time.Since(e.base)
	return e.base.Add(time.Duration(float64(real) * e.rate))
}

// realUntil returns how long, in real time, until local time t.
func (e *Elector) realUntil(t time.Time) time.Duration {
	d := t.Sub(e.now())
	if e.rate == 0 || e.rate == 1 || d <= 0 {
		return d
	}
	return time.Duration(float64(d) / e.rate)
}
