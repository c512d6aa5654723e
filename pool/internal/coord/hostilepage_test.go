package coord

import (
	"testing"
	"time"
)

// TestPageOfAnEraNoElectionReachesDoesNotStopEveryEra: a page whose era is
// 2^32 or more cannot have been written by any coordinator (an election
// term at or above 2^32 does not coordinate, section 1), so it is corrupt
// or hostile, like garbage on the key. 4.6 makes an era step down on a
// page of a later era and hand that era to its Elector, but foreign()
// records no era at or above 2^32: every era reads the page at its start
// and steps down, the next election takes only one term more, and the
// shards of a worker that dies are never led again. The error each era
// logs names the worker and the era, not the fix (delete assign/<ID>.json).
//
// Schedule (script harness: FrequentInterval 1 s, LeaderTimeout 3 s, 6
// shards, w0 to w2, era 1 from 0 s): at 10 s assign/w2 is overwritten with
// a page of era 2^32 and w1 is killed; eras 2 to 6 are elected 2 ×
// LeaderTimeout apart. w1's shards must be led within section 6's bound
// (3 × LeaderTimeout + 3 × FrequentInterval) of the kill.
func TestPageOfAnEraNoElectionReachesDoesNotStopEveryEra(t *testing.T) {
	const fi, lt = time.Second, 3 * time.Second
	h := threeWorkers(t, fi, lt)
	var downs []string
	h.steppedDown = func(err error) { downs = append(downs, err.Error()) }
	h.elect(1)
	h.runUntilLed(t, 10*time.Second)
	lost := h.ws["w1"].running()
	h.store["assign/w2"] = &r6obj{data: Marshal(Page{V: wireVersion, Ver: Ver{Era: 1 << 32, N: 1}, ID: "w2", Session: "x", By: "x"}), etag: "hostile"}
	h.kill(h.ws["w1"])
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
