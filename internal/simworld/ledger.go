package simworld

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tenure is one leadership as the checker sees it: from the moment the
// node was told it leads to the moment it stopped, or was killed.
type Tenure struct {
	Node       string
	Term       uint64
	Start, End time.Time // End is zero while live
}

// Ledger records every leadership of a seed, by what is led (a shard;
// "" for an election's one lockfile).
type Ledger struct {
	mu sync.Mutex
	m  map[string][]*Tenure
}

// Start records that node leads what at term from now.
func (l *Ledger) Start(what, node string, term uint64) *Tenure {
	tn := &Tenure{Node: node, Term: term, Start: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]*Tenure{}
	}
	l.m[what] = append(l.m[what], tn)
	return tn
}

// End ends tn now, unless it ended already.
func (l *Ledger) End(tn *Tenure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tn.End.IsZero() {
		tn.End = time.Now()
	}
}

// Extend moves tn's end to at if later: the node's work went on until
// then.
func (l *Ledger) Extend(tn *Tenure, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at.After(tn.End) {
		tn.End = at
	}
}

// Kill ends every live leadership of node now: it was killed.
func (l *Ledger) Kill(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for _, ts := range l.m {
		for _, tn := range ts {
			if tn.Node == node && tn.End.IsZero() {
				tn.End = now
			}
		}
	}
}

// Live returns the node that leads what now, if any.
func (l *Ledger) Live(what string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tn := range l.m[what] {
		if tn.End.IsZero() {
			return tn.Node, true
		}
	}
	return "", false
}

// Snapshot returns a copy of every leadership as it is now, by what is
// led, each list in order of start.
func (l *Ledger) Snapshot() map[string][]Tenure {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]Tenure, len(l.m))
	for what, ts := range l.m {
		c := make([]Tenure, len(ts))
		for i, tn := range ts {
			c[i] = *tn
		}
		slices.SortStableFunc(c, func(a, b Tenure) int { return a.Start.Compare(b.Start) })
		out[what] = c
	}
	return out
}

// Overlap returns the index of the first leadership in ts (in order of
// start) that began before the one before it ended, or -1.
func Overlap(ts []Tenure) int {
	for i := 1; i < len(ts); i++ {
		if prev := ts[i-1]; prev.End.IsZero() || prev.End.After(ts[i].Start) {
			return i
		}
	}
	return -1
}

// Format lists ts, one leadership a line, with times as layout shows them.
func Format(ts []Tenure, layout string) string {
	var b strings.Builder
	for _, tn := range ts {
		end := "live"
		if !tn.End.IsZero() {
			end = tn.End.Format(layout)
		}
		fmt.Fprintf(&b, "\n  %s term %d: %s - %s", tn.Node, tn.Term, tn.Start.Format(layout), end)
	}
	return b.String()
}

// Event is something a simulation does at a time after its start.
type Event struct {
	At time.Duration
	Fn func()
}

// Schedule is a seed's events.
type Schedule []Event

// Add schedules fn at at after the start.
func (s *Schedule) Add(at time.Duration, fn func()) { *s = append(*s, Event{at, fn}) }

// Run runs the events in order of time (those at one time in the order
// added), each at its time after t0.
func (s Schedule) Run(t0 time.Time) {
	slices.SortStableFunc(s, func(a, b Event) int { return int(a.At - b.At) })
	for _, ev := range s {
		time.Sleep(t0.Add(ev.At).Sub(time.Now()))
		ev.Fn()
	}
}

// DrawTiming draws a FrequentInterval (200 ms, 500 ms or 1 s) and a
// LeaderTimeout from just over twice it to five times it.
func DrawTiming(r *rand.Rand) (fi, lt time.Duration) {
	fi = []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	return fi, fi*2 + time.Duration(r.Int64N(int64(fi*3))) + time.Millisecond
}

// ClockRate draws a node's clock rate relative to real time, within 5%.
// With atBounds, a third of the rates are at either bound, where the
// safety margins matter most.
func ClockRate(r *rand.Rand, atBounds bool) float64 {
	if !atBounds {
		return 0.95 + 0.1*r.Float64()
	}
	return []float64{0.95, 1.05, 0.95 + 0.1*r.Float64()}[r.IntN(3)]
}
