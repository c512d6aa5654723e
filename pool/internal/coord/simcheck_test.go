package coord

import (
	"container/heap"
	"flag"
	"fmt"
	"time"
)

// Checks and faults of the simulation written by its adversarial review:
// an extended leadership is checked against every other (the simulation
// checked only at a start), host suspends, and a session put back.
var simMonoClock = flag.Bool("sim.monoclock", false, "mutation: the local clock does not count a host suspend (Go's monotonic clock alone, as lease.Clock.MonoOnly): seeds fail")

// checkExtend checks an extended leadership against every other.
func (s *sim) checkExtend(p *proc, sh string, l *lship) {
	if !s.live(p, l) {
		return
	}
	for _, q := range s.procs {
		if q == p {
			continue
		}
		if o := q.ls[sh]; o != nil && s.live(q, o) {
			s.overlaps++
			s.fail("shard %s: %s extends its leadership at term %d while %s leads it at term %d", sh, p.id, l.term, q.id, o.term)
		}
	}
}

// suspend suspends p's host for up to two of its leases: nothing of p
// runs meanwhile. Its local clock counts the suspend (the executor's
// lease.Clock reads CLOCK_BOOTTIME's advance over CLOCK_MONOTONIC), but
// Go's timers run on the monotonic clock, which stops: every timer of p
// due after the suspend began fires as much later. With -sim.monoclock
// the local clock is the monotonic one, which reads at the resume what
// it read at the suspend.
func (s *sim) suspend(p *proc) { s.suspendFor(p, s.dur(p.tm.lt/2, 2*p.tm.lt), *simMonoClock) }

func (s *sim) suspendFor(p *proc, d time.Duration, mono bool) {
	p.pauseTill = max(p.pauseTill, s.now+d)
	p.suspEnd = max(p.suspEnd, s.now+d)
	s.log("%s's host suspended for %v", p.id, d)
	for _, e := range s.q {
		if e.p == p && (e.what == "wtick" || e.what == "ctick") {
			e.at += d
		}
	}
	heap.Init(&s.q)
	if mono {
		s.at(s.now+d-time.Nanosecond, nil, "resume", func() {
			p.off -= time.Duration(float64(d) * p.rate)
		})
	}
}

// putBack is S3's delete and put back of one worker's session object
// (docs/pool-protocol.md, 4.3): the worker is paused, its session
// object deleted, and later put back with the exact bytes of its last
// write, which on S3 brings its ETag back (a hash of the body), so the
// worker's next write, If-Match on that ETag, succeeds. Every other
// write and restore in the simulation gets a new ETag, as a versioned
// bucket's sightings do.
//
// One worker's object is not deleted again within three of its leases of
// the last: a second delete before the coordinator has seen the write
// after the put-back is the case section 7 leaves uncovered (the seventh
// review's seed 90199).
func (s *sim) putBack(p *proc) {
	key := "workers/" + p.id
	o := s.store[key]
	if o == nil || o.data == nil || p.putBackAt > 0 && s.now < p.putBackAt+3*p.tm.lt {
		return
	}
	p.putBackAt = s.now
	data, etag := o.data, o.etag
	d := s.dur(p.tm.lt/4, p.tm.lt)
	p.pauseTill = max(p.pauseTill, s.now+d)
	s.etags++
	o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
	o.hist = append(o.hist, nil)
	s.log("operator delete %s, %s paused till %.4f", key, p.id, p.pauseTill.Seconds())
	s.at(s.now+s.dur(d/2, d), nil, "put back", func() {
		if o.data != nil {
			return // written since: nothing to put back over
		}
		o.data, o.etag = data, etag
		o.hist = append(o.hist, data)
		s.log("operator put back %s with its ETag %s", key, etag)
	})
}

// resume ends p's host suspend now (the faults stop): its timers move back
// by what was left of it.
func (s *sim) resume(p *proc) {
	if p.suspEnd <= s.now {
		return
	}
	cut := p.suspEnd - s.now
	for _, e := range s.q {
		if e.p == p && (e.what == "wtick" || e.what == "ctick") {
			e.at = max(s.now, e.at-cut)
		}
	}
	heap.Init(&s.q)
	p.suspEnd = s.now
}
