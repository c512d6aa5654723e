package coord

import (
	"flag"
	"strings"
	"testing"
	"time"
)

var busyTook = flag.String("busy.took", "1.05s,1.1s", "TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileListingsRunBackToBack: how long each listing is out (FrequentInterval 1 s), one run each")

// TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileListingsRunBackToBack
// (fourteenth and fifteenth reviews; liveness, section 6): every
// listing's reply comes a little more than a FrequentInterval after its
// send, so one is nearly always out, and a worker restarts.
//
// The fourteenth review (1.1 s): the thirteenth review's mend ends no
// ghost by a read that returns while a listing is out (readGhosts), and
// after() sent the next listing in the very call that took in the last,
// so every read returned while one was out and no ghost ever ended. An
// ordinary restart makes a ghost (the new session writes over the old
// one, 4.3), so the restarted worker's shards stayed unled for good, and
// the "every shard" ghost of the new session's listed write kept Ready
// false for good: 10 of 10 seeds. Mended by the deciding hold (19fffc0:
// no listing is sent while a ghost's deciding read is out).
//
// The fifteenth review (1.01 to 1.08 s), after 19fffc0: the restarted
// worker's new session N renews every second; the deciding read of the
// old session's ghost returned (N at e83) while a listing was out; the
// listing, sent before that read, came back showing e80, N's write
// between the read before (e77) and e83, so ended() did not end the
// ghost, and the count excuse compared e83's seq with the view's, already
// e83's: the ghost's wait moved a lease on, round after round, until a
// read happened to return with none out. Some seeds took 12 to 30 s,
// some never ended within 30 s (at f760327, before 19fffc0, none of 10
// seeds passed the bound at 1.01 to 1.1 s; after it 1 to 5). Mended by
// counting a session's writes from its seq when the listing was sent
// (c182475).
//
// Schedule (3 workers, 6 shards, FrequentInterval 1 s, LeaderTimeout
// 3 s, calm): every listing's reply comes -busy.took after its send;
// two leases of it; then a worker that leads shards and does not
// coordinate is killed and started again at once. No fault after that:
// every shard is led again within section 6's bound, 3 × LeaderTimeout
// + 3 × FrequentInterval (12 s).
func TestRestartedWorkersShardsAreLedWithinSection6sBoundWhileListingsRunBackToBack(t *testing.T) {
	for _, f := range strings.Split(*busyTook, ",") {
		took, err := time.ParseDuration(f)
		if err != nil {
			t.Fatalf("-busy.took: %v", err)
		}
		t.Run(f, func(t *testing.T) { restartWhileListingsRunBackToBack(t, took) })
	}
}

func restartWhileListingsRunBackToBack(t *testing.T, took time.Duration) {
	late := 0
	const seeds = 10
	tm := attackTiming
	bound := 3*tm.lt + 3*tm.fi
	for seed := uint64(1); seed <= seeds; seed++ {
		s := calmSim(t, seed, 3, 6)
		slow := func() {
			h := s.holder
			if h == nil || h.c == nil || !h.c.listing {
				return
			}
			if e := s.inFlight("list reply", h); e != nil {
				if due := h.realAt(h.c.listSent) + took; e.at < due {
					s.delay(e, due-s.now)
				}
			}
		}
		run := func(d time.Duration, done func() bool) bool {
			for end := s.now + d; s.now < end; {
				s.step(s.now + time.Millisecond)
				slow()
				if done != nil && done() {
					return true
				}
			}
			return false
		}
		run(2*tm.lt, nil)
		if !s.balanced() {
			t.Fatalf("seed %d: listings out %v each: the pool is not balanced before the restart", seed, took)
		}
		v := s.victim()
		if v == nil {
			t.Fatalf("seed %d: no victim", seed)
		}
		s.log("attack: %s restarts (listings out %v each)", v.id, took)
		s.kill(v)
		s.start(v)
		restart := s.now
		if run(bound, s.allLed) {
			t.Logf("seed %d: every shard led %.3fs after the restart", seed, (s.now - restart).Seconds())
			continue
		}
		late++
		c := s.holder.c
		ghosts, all := 0, 0
		for _, g := range c.ghosts {
			if !g.done {
				ghosts++
				if g.all {
					all++
				}
			}
		}
		if late == 1 {
			t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 150))
		}
		more := run(30*time.Second, s.allLed)
		t.Errorf("seed %d: not every shard led within section 6's bound (%v) after %s restarted (%d ghosts held then, %d of them every shard; every shard led after %.3fs: %v)", seed, bound, v.id, ghosts, all, (s.now - restart).Seconds(), more)
	}
	t.Logf("%d of %d seeds past the bound", late, seeds)
}
