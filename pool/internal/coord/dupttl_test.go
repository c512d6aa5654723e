package coord

// W1's duplicate rule, read against the code (the seventeenth review).

import (
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// TestWorkerCountsNoDisplacementWhoseSecondRiseComesAfterItsTTL (W1,
// liveness: a false ErrDuplicateID ends Run). W1: "a displacement counts
// only when the key names a session this worker never opened, not
// closed, and the worker's reads of the key, one per FrequentInterval,
// show it renewing twice (its seq risen, and risen again within its ttl
// of that). One that stands still (an earlier write put back, e.g. a
// restored backup, or two consecutive versions replayed) is written over
// and not counted." Worker.SessionRead checks the ttl only while the seq
// stands still: once it rose, any later read showing a higher seq counts,
// however long after.
//
// Schedule (core level; w1 at FrequentInterval 1 s, LeaderTimeout 3 s):
// twice, an operator restoring the key's old versions (sessions of an
// earlier process with this ID, ttl 3 s) puts back version 1: w1's write
// is refused; w1 reads version 1, a second later version 2 (risen once),
// then the host is suspended for 10 s (Go's timers stop; the core's next
// tick is the first event after the resume), during which the operator
// puts back version 3; the first read after the resume shows it. Its rise
// came 11 s after the first one, far past the ttl, and no read showed a
// renewing session: by W1 nothing counts and w1 goes on. On main the
// second such episode ends Run with ErrDuplicateID.
func TestWorkerCountsNoDisplacementWhoseSecondRiseComesAfterItsTTL(t *testing.T) {
	w := liveWorker(t)
	foreign := func(seq uint64) []byte {
		return Marshal(Session{V: wireVersion, ID: "w1", Session: "old", Seq: seq, TTL: 3000})
	}
	now := at(0)
	for i := range 2 {
		now = now.Add(1100 * time.Millisecond)
		w.Tick(now)
		w.SessionPut(now, now, "", store.ErrPreconditionFailed) // the restored version 1 took the key
		w.SessionRead(now, foreign(uint64(3*i+1)), "x", nil)
		now = now.Add(time.Second)
		w.Tick(now)
		w.SessionRead(now, foreign(uint64(3*i+2)), "x2", nil) // risen once: two versions replayed
		now = now.Add(10 * time.Second)                       // the host slept; version 3 put back meanwhile
		if _, ok := find(w.Tick(now), OpGetSession); !ok {
			t.Fatalf("episode %d: no read of the key after the resume", i+1)
		}
		fx := w.SessionRead(now, foreign(uint64(3*i+3)), "x3", nil)
		if _, ok := find(fx, OpFail); ok {
			t.Fatalf("episode %d: ErrDuplicateID from a second rise %v after the first (ttl 3 s): W1 counts only a rise within the ttl", i+1, 10*time.Second)
		}
		if _, ok := find(fx, OpPutSession); !ok {
			t.Fatalf("episode %d: effects %v; want a new session written over the key", i+1, ops(fx))
		}
		w.SessionPut(now, now, "y", nil)
	}
}
