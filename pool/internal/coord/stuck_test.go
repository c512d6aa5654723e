package coord

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestCoordinatorThatCannotWritePagesStepsDown (sixth review, finding 3):
// the issue's rule is that "a coordinator that renews its lockfile but
// cannot read or write the pool's objects steps down", and 4.5 puts it as
// "once a store call sent LeaderTimeout ago has not succeeded, nor any
// since". A coordinator whose page writes all fail while its listings and
// reads succeed (a gray failure: PUTs time out through a path that drops
// large bodies, a role or bucket policy without PutObject on assign/, a
// write quota) never steps down: every listing resets the count, so it
// holds the election and decides nothing that lands, for good. Schedule
// (FrequentInterval 1 s, LeaderTimeout 3 s, 6 shards, w0 to w2, era 1
// from 0 s): from 10 s every page write of era 1 fails (a timeout); at 10
// s w2 is killed. The harness elects era 2, whose writes land, a
// LeaderTimeout after era 1 steps down (the executor's stand-out). w2's
// shards must be led within section 6's bound of the kill; they are not
// led after a minute, era 1 still coordinating, its page writes retried
// as each fails (and each kept as an unacknowledged page).
//
// The control subtest deposes era 1 a LeaderTimeout after its writes
// began to fail, as the rule asks: the shards are then led in time.
func TestCoordinatorThatCannotWritePagesStepsDown(t *testing.T) {
	for _, control := range []bool{true, false} {
		t.Run(fmt.Sprint("control=", control), func(t *testing.T) { grayCalls(t, control, false) })
	}
}

// TestCoordinatorThatCannotReadSessionsStepsDown: the same with era 1's
// session reads failing (each a timeout) and its listings and page writes
// working: a dead session is over only by a read (4.3), so w2's shards
// stay unled while era 1 goes on.
func TestCoordinatorThatCannotReadSessionsStepsDown(t *testing.T) {
	for _, control := range []bool{true, false} {
		t.Run(fmt.Sprint("control=", control), func(t *testing.T) { grayCalls(t, control, true) })
	}
}

func grayCalls(t *testing.T, control, reads bool) {
	const fi, lt = time.Second, 3 * time.Second
	h := threeWorkers(t, fi, lt)
	h.elect(1)
	h.runUntilLed(t, 10*time.Second)
	era1 := h.c
	writes := 0
	var firstFail time.Duration = -1
	fail := func(string) error {
		if h.c == era1 {
			if writes == 0 {
				firstFail = h.now
			}
			writes++
			return errors.New("timeout") // era 1's calls of this kind never succeed
		}
		return nil
	}
	if reads {
		h.sessionGet = fail
	} else {
		h.pagePut = fail
	}
	var down time.Duration = -1
	h.steppedDown = func(err error) {
		down = h.now
		t.Logf("t=%v: era 1 steps down: %v", h.now, err)
		h.at(h.now+lt, func() { h.elect(2) })
	}
	w2 := h.ws["w2"]
	dead := w2.running()
	kill := h.now
	h.kill(w2)
	if control {
		h.at(kill+lt, func() {
			if h.c == era1 {
				h.depose()
				h.steppedDown(errors.New("control: no call of the failing kind succeeded for a LeaderTimeout"))
			}
		})
	}
	// The era owes the failing call from firstFail, steps down a
	// LeaderTimeout later (4.5); from then on the faults have stopped for
	// the pool, and section 6's bound runs from the step-down.
	h.run(kill + 3*lt + 3*fi)
	bound := kill + 3*lt + 3*fi
	if !control {
		if down < 0 || firstFail < 0 || down > firstFail+lt+fi {
			t.Fatalf("era 1 stepped down at %v (-1: never); its first failing call was sent at %v; want a step-down within a LeaderTimeout and an interval of it", down, firstFail)
		}
		bound = down + 3*lt + 3*fi
	}
	h.run(bound)
	if unled := h.unled(dead); len(unled) > 0 {
		h.run(kill + time.Minute)
		t.Errorf("shards %v of the killed w2 are unled %v after the kill (section 6's bound); a minute after it: era 1 stepped down at %v (-1: never), %d page writes or session reads of era 1 failed (each a timeout), %d pages of w0 unacknowledged, shards led %v",
			unled, bound-kill, down, writes, len(era1.keys["w0"].page.hist), sortedKeys(h.led()))
	}
	for _, f := range h.fails {
		t.Error(f)
	}
}
