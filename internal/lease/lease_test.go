package lease

import (
	"crypto/sha256"
	"testing"
	"testing/synctest"
	"time"
)

func TestSight(t *testing.T) {
	a := Sight([]byte("a"), `"1"`)
	for _, tc := range []struct {
		name string
		got  Sighting
		same bool
	}{
		{"same ETag, same bytes", Sight([]byte("a"), `"1"`), true},
		{"same ETag, other bytes (a rewound store)", Sight([]byte("b"), `"1"`), false},
		{"other ETag, same bytes", Sight([]byte("a"), `"2"`), false},
		{"absent", Sight(nil, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if same := tc.got == a; same != tc.same {
				t.Errorf("%+v == %+v: %v; want %v", tc.got, a, same, tc.same)
			}
		})
	}
	if a.Sum != sha256.Sum256([]byte("a")) || a.ETag != `"1"` {
		t.Errorf("Sight(a, \"1\") = %+v; want the ETag and the SHA-256 of a", a)
	}
	if got := Sight([]byte("left over"), ""); got != (Sighting{}) {
		t.Errorf("Sight of an absence = %+v; want the zero Sighting", got)
	}
}

func TestTTLMillisRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		lt   time.Duration
		want int64
	}{
		{15 * time.Second, 15000},
		{1500 * time.Microsecond, 2},
		{time.Nanosecond, 1},
		{0, 0},
	} {
		if got := TTLMillis(tc.lt); got != tc.want {
			t.Errorf("TTLMillis(%v) = %d; want %d", tc.lt, got, tc.want)
		}
	}
}

// TestMargin: docs/protocol.md, 3.1: a holder on a clock
// ρ = 5 % slow stops within (LeaderTimeout - margin)/(1-ρ) of real time,
// before a reader on a clock 5 % fast has waited LeaderTimeout/(1+ρ).
func TestMargin(t *testing.T) {
	const rho = 0.05
	for _, lt := range []time.Duration{time.Second, 15 * time.Second, time.Hour} {
		if m := Margin(lt); m != lt/10 {
			t.Errorf("Margin(%v) = %v; want a tenth", lt, m)
		}
		holder := float64(lt-Margin(lt)) / (1 - rho)
		reader := float64(lt) / (1 + rho)
		if holder >= reader {
			t.Errorf("LeaderTimeout %v: the holder may run %v of real time, the reader waits %v", lt, time.Duration(holder), time.Duration(reader))
		}
	}
}

func TestWaitIsTheLongerLease(t *testing.T) {
	for _, tc := range []struct {
		own  time.Duration
		ttl  int64
		want time.Duration
	}{
		{15 * time.Second, 30000, 30 * time.Second}, // the writer's is longer
		{15 * time.Second, 5000, 15 * time.Second},  // this reader's is
		{15 * time.Second, 0, 15 * time.Second},     // the record states none
	} {
		if got := Wait(tc.own, tc.ttl); got != tc.want {
			t.Errorf("Wait(%v, %d) = %v; want %v", tc.own, tc.ttl, got, tc.want)
		}
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID(), NewID()
	if len(a) != 16 || a == b {
		t.Fatalf("NewID() = %q, then %q; want two different 16-digit values", a, b)
	}
	for _, c := range a {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			t.Fatalf("NewID() = %q; want hex digits", a)
		}
	}
}

func TestClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		real := NewClock()
		fast := &Clock{Base: time.Now(), Rate: 2}
		slow := &Clock{Base: time.Now(), Rate: 0.5}
		start := time.Now()
		time.Sleep(time.Second)
		if got := real.Now().Sub(start); got != time.Second {
			t.Errorf("real clock: %v passed; want 1s", got)
		}
		if got := fast.Now().Sub(start); got != 2*time.Second {
			t.Errorf("clock at rate 2: %v passed in 1s; want 2s", got)
		}
		if got := slow.Now().Sub(start); got != time.Second/2 {
			t.Errorf("clock at rate 0.5: %v passed in 1s; want 500ms", got)
		}
		for _, c := range []*Clock{&real, fast, slow} {
			at := c.Now().Add(time.Second)
			d := c.RealUntil(at)
			if c.Rate != 0 && d != time.Duration(float64(time.Second)/c.Rate)+1 {
				t.Errorf("rate %v: RealUntil(now+1s) = %v; want 1s/rate, rounded up", c.Rate, d)
			}
			time.Sleep(d)
			if c.Now().Before(at) {
				t.Errorf("rate %v: after RealUntil(t), Now() = %v is before t = %v", c.Rate, c.Now(), at)
			}
			if d := c.RealUntil(at.Add(-time.Hour)); d > 0 {
				t.Errorf("rate %v: RealUntil(an hour ago) = %v; want <= 0", c.Rate, d)
			}
		}
		if !real.Wall().Equal(time.Now()) {
			t.Errorf("Wall() = %v; want time.Now() %v", real.Wall(), time.Now())
		}
		jumped := time.Now().Add(time.Hour)
		real.WallNow = func() time.Time { return jumped }
		if !real.Wall().Equal(jumped) {
			t.Errorf("Wall() with WallNow set = %v; want %v", real.Wall(), jumped)
		}
	})
}

// TestClockCountsSuspends: a modelled suspend (Slept) stops the monotonic
// clock but not the local one (Now), unless MonoOnly; and on a host that
// does not sleep, the suspended time read from the system is zero and
// Now does not jitter.
func TestClockCountsSuspends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slept time.Duration
		c := NewClock()
		c.Slept = func() time.Duration { return slept }
		start := c.Now()
		time.Sleep(10 * time.Second)
		slept = 4 * time.Second // four of those ten seconds the host was suspended
		if got := c.Now().Sub(start); got != 10*time.Second {
			t.Errorf("Now() moved %v over 10 s of which 4 s suspended; want 10s", got)
		}
		c.MonoOnly = true
		if got := c.Now().Sub(start); got != 6*time.Second {
			t.Errorf("with MonoOnly, Now() moved %v; want the monotonic clock's 6s", got)
		}
	})
	c := NewClock()
	prev := c.Now()
	for range 1000 {
		now := c.Now()
		if now.Before(prev) {
			t.Fatalf("Now() went back from %v to %v", prev, now)
		}
		prev = now
	}
	if d := c.hostSleptSince(); d != 0 {
		t.Logf("the host was suspended for %v during this test", d) // possible, on a laptop
	}
}
