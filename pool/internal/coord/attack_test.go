package coord

// Attacks on the pool scripted step by step in the simulation: each was
// an open finding of the adversarial review of issue 40 until mended.

import (
	"fmt"
	"testing"
	"time"
)

var attackTiming = timing{fi: time.Second, lt: 3 * time.Second}

// calmSim is a pool of n workers over m shards, every worker at
// attackTiming, no random fault, no lost reply, no slow call: only what
// the test scripts happens.
func calmSim(t *testing.T, seed uint64, n, m int) *sim {
	t.Helper()
	return calmSimTimed(t, seed, n, m, attackTiming)
}

// calmSimTimed is calmSim with every worker at tm.
func calmSimTimed(t *testing.T, seed uint64, n, m int, tm timing) *sim {
	t.Helper()
	s := newSim(seed, simConfig{workers: n, shards: m, timing: &tm, maxWorkers: n, calmFor: time.Minute})
	s.calm = true
	s.keep = true
	if d, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
		t.Fatalf("seed %d: not balanced %v after a cold start", seed, d)
	}
	s.step(s.now + 2*tm.lt)
	return s
}

// victim returns a running worker that is not the coordinator and leads
// at least one shard.
func (s *sim) victim() *proc {
	for _, p := range s.procs {
		if p.up && p != s.holder && len(p.ls) > 0 {
			return p
		}
	}
	return nil
}

// probe runs the simulation for d, checking every 10 ms (not only when a
// leadership starts, as the simulation's own check does) how many live
// leaderships each shard has. It returns how many (shard, instant) pairs
// had two or more, and the first.
func (s *sim) probe(d time.Duration) (n int, first string) {
	end := s.now + d
	for s.now < end {
		s.step(s.now + 10*time.Millisecond)
		by := map[string][]string{}
		for _, q := range s.procs {
			for _, sh := range sortedKeys(q.ls) {
				if l := q.ls[sh]; s.live(q, l) {
					by[sh] = append(by[sh], fmt.Sprintf("%s@%d", q.id, l.term))
				}
			}
		}
		for _, sh := range sortedKeys(by) {
			if len(by[sh]) > 1 {
				n++
				if first == "" {
					first = fmt.Sprintf("t=%.3fs shard %s led by %v", s.now.Seconds(), sh, by[sh])
				}
			}
		}
	}
	return n, first
}

func reportOverlaps(t *testing.T, s *sim, n int, first string) {
	t.Helper()
	t.Logf("at the end (t=%.3fs), shards not led exactly once: %v", s.now.Seconds(), s.unled())
	if n > 0 || len(s.fails) > 0 {
		t.Logf("ledger tail:\n%s", tail(s.ledger.String(), 60))
		t.Errorf("%d shard-instants (10 ms apart) with two live leaderships, first %s; the simulation's own check: %v", n, first, s.fails)
	}
}

func tail(s string, lines int) string {
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			n++
			if n > lines {
				return s[i+1:]
			}
		}
	}
	return s
}

// TestSessionPutBackToItsLastWriteIsNotLedTwice: on S3 (and MinIO,
// Ceph, ...) an ETag is a hash of the body, and If-Match compares ETags
// only (version IDs cannot be named in a condition). An operator deletes
// a worker's session object and puts its last version back (S3
// versioning: delete the delete marker, or copy the version back) while
// the worker is paused for less than its lease. The coordinator reads the
// absence in between ("written over", 4.3: the session becomes a ghost);
// the worker's next write, If-Match on its own last ETag, succeeds
// against the restored bytes. The ghost's shards must stay held until a
// read after its wait shows no later write of it, and the later write
// makes the session live again (docs/pool-protocol.md, 4.3).
func TestSessionPutBackToItsLastWriteIsNotLedTwice(t *testing.T) {
	s := calmSim(t, 1, 3, 6)
	v := s.victim()
	key := "workers/" + v.id
	o := s.store[key]
	data, etag := o.data, o.etag
	s.log("attack: delete %s (ETag %s), %s paused for 1.5 s", key, etag, v.id)
	s.deleteKey(key)
	v.pauseTill = s.now + 1500*time.Millisecond
	c := s.holder.c
	ghosted := false
	for s.now < v.pauseTill-20*time.Millisecond {
		s.step(s.now + 10*time.Millisecond)
		if k := c.keys[v.id]; k != nil && k.cur == nil {
			ghosted = true
			break
		}
	}
	if !ghosted {
		t.Fatalf("the coordinator did not read the absence while %s was paused", v.id)
	}
	// S3: the restored version has the same body, hence the same ETag.
	s.restore(o, data, etag)
	s.log("attack: put back %s with its ETag %s", key, etag)
	n, first := s.probe(20 * time.Second)
	reportOverlaps(t, s, n, first)
}

// TestSuspendedWorkerIsNotLedTwice: a host suspend stops Go's monotonic
// clock while real time goes on. A worker suspended for two leases right
// after a renewal is over for the coordinator (silent, 4.3), which grants
// its shards elsewhere. On resume its local clock must say its lease
// ended (lease.Clock counts the suspend), so that its next renewal is
// never sent and no leadership of it is extended. With the monotonic
// clock alone (the second case, the mutation monoclock) its clock reads
// at the resume what it read at the suspend: it renews, and leads beside
// the shards' new owners; the case checks that this test sees that.
func TestSuspendedWorkerIsNotLedTwice(t *testing.T) {
	for _, mono := range []bool{false, true} {
		s := calmSim(t, 2, 3, 6)
		v := s.victim()
		const suspend = 6 * time.Second
		s.log("attack: %s's host suspended for %v", v.id, suspend)
		s.suspendFor(v, suspend, mono)
		n, first := s.probe(20 * time.Second)
		if !mono {
			reportOverlaps(t, s, n, first)
		} else if n == 0 {
			t.Errorf("with the monotonic clock alone, no shard was led twice: the scenario does not test the suspend")
		}
	}
}
