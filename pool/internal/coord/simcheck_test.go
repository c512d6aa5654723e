package coord

import (
	"flag"
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
