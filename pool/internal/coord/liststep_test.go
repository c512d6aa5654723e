package coord

import (
	"errors"
	"testing"
	"time"
)

// TestPeerModeCoordinatorOutlivesTwoFailedListings (seventh review,
// finding 3): in peer mode the executor lists every LeaderTimeout/2
// (pool/coordinate.go), and 4.5's clock for listings counts from the first
// failed listing's send. Two listings that fail in a row (a store outage
// of just over LeaderTimeout/2) leave the third, sent exactly a
// LeaderTimeout after the first, in flight when the next event comes,
// and the era steps down before that listing can answer; in storage mode
// (a listing every FrequentInterval) the same outage is ridden out.
// Schedule (FrequentInterval 1 s, LeaderTimeout 3 s, ListEvery 1.5 s,
// no workers, each listing answered 300 ms after its send): after the
// gate listing (3.1 s), listings are sent at 4.6 s, 6.1 s and 7.6 s; a
// store outage from 4.5 s to 6.2 s fails the first two; the third would
// succeed at 7.9 s, but the tick at 7.7 s steps the era down. The
// control, ListEvery 0 (storage mode: a listing every second), rides the
// same outage out.
func TestPeerModeCoordinatorOutlivesTwoFailedListings(t *testing.T) {
	for _, every := range []time.Duration{0, 1500 * time.Millisecond} {
		c := NewCoordinator(CoordConfig{Shards: []string{"s0"}, FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second, Mark: "m", ListEvery: every}, 1)
		var down []Effect
		take := func(fx []Effect) (list bool) {
			for _, e := range fx {
				switch e.Op {
				case OpList:
					list = true
				case OpStepDown:
					down = append(down, e)
				}
			}
			return list
		}
		take(c.Tick(at(0)))
		if !take(c.RosterRead(at(5*time.Millisecond), nil, "", nil)) {
			t.Fatal("no first listing after the roster read")
		}
		take(c.Listed(at(10*time.Millisecond), map[string]Entry{}, nil))
		fail := errors.New("store unreachable")
		var sent []time.Duration // listings in flight, each answered 300 ms after its send
		for d := 100 * time.Millisecond; d <= 9*time.Second && len(down) == 0; d += 100 * time.Millisecond {
			if len(sent) > 0 && d == sent[0]+300*time.Millisecond {
				var err error
				if sent[0] >= 4500*time.Millisecond && sent[0] <= 6200*time.Millisecond {
					err = fail // the outage: 4.5 s to 6.2 s
				}
				sent = sent[1:]
				if take(c.Listed(at(d), map[string]Entry{}, err)) {
					sent = append(sent, d)
				}
				continue
			}
			if take(c.Tick(at(d))) {
				sent = append(sent, d)
			}
		}
		if len(down) > 0 {
			t.Errorf("ListEvery %v: the era stepped down (%v) after a store outage of 1.7 s, its next listing in flight", every, down[0].Err)
		}
	}
}
