package coord

import (
	"testing"
	"time"
)

// TestSessionOfAnEraNoElectionReachesDoesNotStopEveryEra: the session
// form of TestPageOfAnEraNoElectionReachesDoesNotStopEveryEra. ParsePage
// refuses a page of era 2^32 or above (garbage, to be written over), but
// ParseSession does not look at a session's took or applied: a session
// object stating that it took a page of era 2^32 makes foreign() step the
// era down (4.6) and record no later era. On the key of a worker that is
// gone (nothing renews it, nothing writes over it), every era reads it at
// its start and steps down, and no shard of a worker that dies is ever led
// again. No coordinator writes such a page and no worker takes one (W3
// parses pages with ParsePage), so such a session is corrupt or hostile.
//
// Schedule (script harness: FrequentInterval 1 s, LeaderTimeout 3 s, 6
// shards, w0 to w2, era 1 from 0 s): at 10 s w1 is killed and its
// session object overwritten with a session that took a page of era 2^32;
// eras 2 to 6 are elected 2 × LeaderTimeout apart. w1's shards must be
// led within section 6's bound (3 × LeaderTimeout + 3 ×
// FrequentInterval) of the kill.
func TestSessionOfAnEraNoElectionReachesDoesNotStopEveryEra(t *testing.T) {
	const fi, lt = time.Second, 3 * time.Second
	h := threeWorkers(t, fi, lt)
	var downs []string
	h.steppedDown = func(err error) { downs = append(downs, err.Error()) }
	h.elect(1)
	h.runUntilLed(t, 10*time.Second)
	lost := h.ws["w1"].running()
	h.kill(h.ws["w1"])
	h.store["workers/w1"] = &r6obj{data: Marshal(Session{V: wireVersion, ID: "w1", Session: "x", Seq: 1, TTL: 3000,
		Took: Ver{Era: 1 << 32, N: 1}, TookBy: "x"}), etag: "hostile"}
	kill := h.now
	ledAt := time.Duration(-1)
	for era := uint64(2); era <= 6; era++ {
		h.depose()
		h.elect(era)
		for end := h.now + 2*lt; h.now < end; {
			h.run(h.now + 100*time.Millisecond)
			if ledAt < 0 && len(h.unled(lost)) == 0 {
				ledAt = h.now - kill
			}
		}
	}
	if ledAt < 0 || ledAt > 3*lt+3*fi {
		t.Errorf("w1's shards %v led again %v after its kill (-1: not in %v; bound %v); the eras stepped down: %q",
			sortedKeys(lost), ledAt, h.now-kill, 3*lt+3*fi, downs)
	}
}
