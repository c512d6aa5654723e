package coord

import (
	"flag"
	"fmt"
	"time"
)

// Checks and faults of the simulation written by its adversarial review:
// an extended leadership is checked against every other (the simulation
// checked only at a start), and -sim.suspend adds host suspends.
var simSuspend = flag.Bool("sim.suspend", false, "add a fault: a host suspend, which the procs' local clocks do not count (the executor's clock does not count one yet: seeds fail)")

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
// runs, and its local clock does not count the time.
func (s *sim) suspend(p *proc) {
	d := s.dur(p.tm.lt/2, 2*p.tm.lt)
	p.pauseTill = s.now + d
	s.log("%s's host suspended for %v", p.id, d)
	s.at(s.now+d-time.Nanosecond, nil, "resume", func() {
		p.off -= time.Duration(float64(d) * p.rate)
	})
}

// putBack is S3's delete and put back of one worker's session object
// (docs/pool-coordinator.md, 4.3): the worker is paused, its session
// object deleted, and later put back with the exact bytes of its last
// write, which on S3 brings its ETag back (a hash of the body), so the
// worker's next write, If-Match on that ETag, succeeds. Every other
// write and restore in the simulation gets a new ETag, as a versioned
// bucket's sightings do.
func (s *sim) putBack(p *proc) {
	key := "workers/" + p.id
	o := s.store[key]
	if o == nil || o.data == nil {
		return
	}
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
