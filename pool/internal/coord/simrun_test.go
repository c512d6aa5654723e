package coord

import (
	"container/heap"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

type event struct {
	at   time.Duration
	tie  uint64
	seq  uint64
	p    *proc
	inc  int
	what string
	fn   func()
}

type evHeap []*event

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return a.seq < b.seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *evHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// run plays the seed's history and returns the hash of its ledger.
func (s *sim) run() string {
	end := s.cfg.faultFor + s.cfg.calmFor
	s.at(s.dur(0, 2*s.cfg.faultEvery), nil, "fault", s.fault)
	s.at(s.cfg.faultFor, nil, "calm", s.calmDown)
	if s.cfg.peer {
		s.at(s.dur(0, 2*s.cfg.faultEvery), nil, "peer fault", s.peerFault)
	}
	for len(s.q) > 0 {
		if s.q[0].at > end {
			break
		}
		ev := heap.Pop(&s.q).(*event)
		if !s.deliver(ev) {
			break
		}
		if s.calm && s.ledAt < 0 && s.now >= s.nextCheck {
			s.nextCheck = s.now + 20*time.Millisecond
			if s.allLed() {
				s.ledAt = s.now - s.cfg.faultFor
				s.log("all shards led, %v after the calm began", s.ledAt)
			}
		}
	}
	s.now = end
	switch bound := ledBound(); {
	case !s.allLed():
		s.fail("shards not led %v after the faults stopped: %v", s.cfg.calmFor, s.unled())
	case s.ledAt < 0 || s.ledAt > bound:
		s.fail("every shard was led only %v after the faults stopped; the bound is %v", s.ledAt, bound)
	}
	return hex.EncodeToString(s.hash.Sum(nil)[:8])
}

// deliver runs one event; it reports false when the run is stuck.
func (s *sim) deliver(ev *event) bool {
	s.now = ev.at
	s.steps++
	if s.steps > 3_000_000 {
		s.fail("stuck: %d events by %v, the last %s", s.steps, s.now, ev.what)
		return false
	}
	if p := ev.p; p != nil {
		if p.inc != ev.inc || !p.up {
			return true
		}
		if s.now < p.pauseTill {
			ev.at, ev.tie = p.pauseTill, s.rng.Uint64()
			heap.Push(&s.q, ev)
			return true
		}
	}
	ev.fn()
	if ev.p != nil && ev.p.peer != nil {
		s.peerFlush(ev.p) // the coordinator's loop answers the reports due (simpeer_test.go)
	}
	return true
}

// ledBound is the liveness bound the simulation checks: once the faults
// stop (every worker running and reaching the store), every shard is led
// within 3 × LeaderTimeout + 3 × FrequentInterval, the longest of each in
// the pool: the coordinator's election (a lease), its era's wait (a
// lease, and the first pages applied), a dead session's lease, and the
// grants read by their workers.
func ledBound() time.Duration {
	var fi, lt time.Duration
	for _, t := range timings {
		fi, lt = max(fi, t.fi), max(lt, t.lt)
	}
	return 3*lt + 3*fi
}

func (s *sim) unled() []string {
	n := make(map[string]int, len(s.shards))
	for _, q := range s.procs {
		for sh, l := range q.ls {
			if s.live(q, l) {
				n[sh]++
			}
		}
	}
	var out []string
	for _, sh := range s.shards {
		if n[sh] != 1 {
			out = append(out, fmt.Sprintf("%s×%d", sh, n[sh]))
		}
	}
	return out
}

// allLed is unled() == nil, without naming each (at 100,000 shards it runs
// every 20 ms of a cold start).
func (s *sim) allLed() bool {
	n := make(map[string]int, len(s.shards))
	for _, q := range s.procs {
		for sh, l := range q.ls {
			if s.live(q, l) {
				if n[sh]++; n[sh] > 1 {
					return false
				}
			}
		}
	}
	for _, sh := range s.shards {
		if n[sh] != 1 {
			return false
		}
	}
	return true
}

// calmDown ends every fault: every worker runs, reaches the store, and
// no operator touches the objects.
func (s *sim) calmDown() {
	s.calm = true
	s.log("calm")
	if h := s.holder; h != nil && h.c != nil {
		s.log("%s coordinator: %s", h.id, h.c.debug(h.local(s.now)))
	}
	for _, p := range s.procs {
		p.cutTill, p.grayTill = 0, 0
		if p.pauseTill > s.now {
			p.pauseTill = s.now
		}
		s.resume(p)
		if p.peer != nil {
			p.peer.calm()
		}
		switch {
		case p.twin && p.up:
			s.kill(p)
		case !p.up && !p.twin:
			s.start(p)
		case p.up && p.w.leaving:
			p.rejoin = true // its leave ends after the calm began (sim_test.go)
		}
	}
}

func (s *sim) pick() *proc {
	var up []*proc
	for _, p := range s.procs {
		if p.up {
			up = append(up, p)
		}
	}
	if len(up) == 0 {
		return nil
	}
	if s.holder != nil && s.holder.up && s.rng.IntN(4) == 0 {
		return s.holder // the coordinator, more often than its share
	}
	return up[s.rng.IntN(len(up))]
}

func (s *sim) fault() {
	if s.calm {
		return
	}
	s.at(s.now+s.dur(s.cfg.faultEvery/4, 2*s.cfg.faultEvery), nil, "fault", s.fault)
	kinds := []string{"kill", "pause", "suspend", "cut", "gray", "delete", "restore", "restore", "leave", "join", "resign", "retime", "twin", "unseen", "putback", "reterm"}
	kind := kinds[s.rng.IntN(len(kinds))]
	p := s.pick()
	if simNo[kind] {
		return // -sim.no: this kind of fault is left out
	}
	if p == nil && kind != "delete" && kind != "restore" && kind != "join" {
		return
	}
	s.faults[kind]++
	switch kind {
	case "kill":
		s.kill(p)
		s.at(s.now+s.dur(0, 3*p.tm.lt), nil, "restart", func() {
			if !p.up && !s.calm {
				s.start(p)
			}
		})
	case "pause":
		p.pauseTill = s.now + s.dur(0, 2*p.tm.lt)
		s.log("%s paused till %.4f", p.id, p.pauseTill.Seconds())
	case "cut":
		p.cutTill = s.now + s.dur(0, 2*p.tm.lt)
		s.log("%s cut off the store till %.4f", p.id, p.cutTill.Seconds())
	case "gray":
		p.grayTill = s.now + s.dur(p.tm.lt/2, 3*p.tm.lt)
		s.log("%s cut off the pool's objects till %.4f", p.id, p.grayTill.Seconds())
	case "delete", "restore":
		keys := sortedKeys(s.store)
		if len(keys) == 0 {
			return
		}
		k := keys[s.rng.IntN(len(keys))]
		o := s.store[k]
		var data []byte
		if kind == "restore" {
			data = o.hist[len(o.hist)-1-s.rng.IntN(min(len(o.hist), 6))]
		}
		s.etags++
		o.data, o.etag = data, s.etagOf(data)
		o.hist = append(o.hist, data)
		s.log("operator %s %s: %s", kind, k, data)
	case "leave":
		s.log("%s leaves", p.id)
		s.wdo(p, p.w.Leave(p.local(s.now)))
		s.at(s.now+s.dur(p.tm.lt, 4*p.tm.lt), nil, "rejoin", func() {
			if !p.up && !s.calm {
				s.start(p)
			}
		})
	case "join":
		if len(s.procs) < s.cfg.maxWorkers {
			s.addProc()
		}
	case "resign":
		for _, sh := range sortedKeys(p.ls) {
			if l := p.ls[sh]; s.live(p, l) {
				s.log("%s's Work for %s returns", p.id, sh)
				l.ended = true
				s.workDone(p, sh)
				break
			}
		}
	case "unseen":
		// A worker cut off the store has its session object deleted as
		// the coordinator resigns: the next era, elected at once, may
		// never see that session, whose lease still runs.
		h := s.holder
		if h == nil || !h.up || h == p {
			return
		}
		if o := s.store["workers/"+p.id]; o != nil && o.data != nil {
			s.etags++
			o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
			o.hist = append(o.hist, nil)
		}
		p.cutTill = s.now + p.tm.lt
		s.holder, h.c, h.noRunTill = nil, nil, s.now+h.tm.lt
		s.log("operator delete workers/%s, cut off till %.4f, as the coordinator %s resigns", p.id, p.cutTill.Seconds(), h.id)
	case "twin":
		// A second process given the same ID, for a while; not over a
		// key put back within a lease, which section 7's fourth
		// exception leaves out.
		if p.putBackAt > 0 && s.now < p.putBackAt+3*p.tm.lt {
			return
		}
		tw := &proc{id: p.id, n: len(s.procs), rate: 0.95 + 0.1*s.rng.Float64(), off: s.dur(0, time.Hour), tm: p.tm, calls: map[string]int{}, twin: true}
		s.procs = append(s.procs, tw)
		s.start(tw)
		s.at(s.now+s.dur(p.tm.lt, 4*p.tm.lt), nil, "twin ends", func() {
			if tw.up {
				s.kill(tw)
			}
		})
	case "suspend":
		s.suspend(p)
	case "putback":
		s.putBack(p)
	case "reterm":
		// The election's lockfile and term object put back: the next
		// election's term repeats one of the last two.
		s.term = max(s.term, 2) - 1 - uint64(s.rng.IntN(2))
		s.log("operator put the election's term back to %d", s.term)
	case "retime":
		s.kill(p)
		p.tm = timings[s.rng.IntN(len(timings))]
		s.start(p)
	}
}

// debug describes the coordinator's state for a ledger.
func (c *Coordinator) debug(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "term %d ready %v allRead %v lmax %v ghosts %d:", c.term, c.Ready(now), !c.allRead.IsZero(), c.lmax, len(c.ghosts))
	for _, g := range c.ghosts {
		fmt.Fprintf(&b, " ghost(all=%v till %v)", g.all, g.until.Sub(now))
	}
	for _, id := range sortedKeys(c.keys) {
		k := c.keys[id]
		fmt.Fprintf(&b, " [%s get=%v/%v pageRead=%v writing=%v hist=%d", id, k.getting, k.wantGet, k.page.read, k.page.writing, len(k.page.hist))
		if k.cur != nil {
			fmt.Fprintf(&b, " %s applied=%v need=%v", k.cur.session, k.cur.applied, k.cur.need)
		}
		b.WriteString("]")
	}
	return b.String()
}
