package coord

import (
	"errors"
	"fmt"
	"time"
)

// Peer mode in the simulation (docs/pool-protocol.md, 4.8), as the
// executor runs it: pool/internal/next's work.go (a worker's OpGetPage
// and its closing report) and peer.go (serveReport, toCoordinator,
// answer, flush, sendReport). Before each page read a peer-mode worker
// reports its session's ETag, its news ETag, its last write's Nonce, the
// page ETag it last read and a wait of 3/4 FrequentInterval to the
// coordinator its election view names; the coordinator's loop calls
// Reported and answers its term and PageTag, parking the report while
// the page is unchanged, up to the wait; the worker skips the read only
// if the answer is of the era its view names and gives the page ETag it
// last read. Anything else (no leader known, a record without an
// address, a refused or lost request, a timeout of one
// FrequentInterval, an answer of another era) falls back to the read.
// A peer-mode coordinator lists every LeaderTimeout/2; a closing worker
// reports its news once more. Polling workers run beside peer-mode ones
// (a rolling change of mode), as the executor allows.
//
// Its randomness is drawn only with simConfig.peer, so the polling runs
// keep their ledgers.

// errPageUnchanged is next's: the page read a report made unnecessary.
var errPageUnchanged = errors.New("page unchanged, by the coordinator's answer")

// simReport is next's report.
type simReport struct {
	ID, Session, News, Nonce, Page string
	Wait                           time.Duration // whole milliseconds, as on the wire
}

// peerView is what a worker's Elector tells of the leader (Leader()).
type peerView struct {
	q     *proc
	term  uint64
	addr  bool      // the record names an address: the leader's elector runs in peer mode
	until time.Time // by the viewer's clock: what it knew runs out (the takeover time)
	reads int
}

type parkedReport struct {
	r     simReport
	until time.Time
	reply func(term uint64, page string)
}

type peerProc struct {
	mode     bool   // this incarnation runs in peer mode (else it polls)
	home     bool   // its mode before a rolling change
	news     string // next's newsTag: the ETag its last news write gave
	lastNews string // next's lastNews
	page     string // next's pageTag: its page's ETag as last read
	closing  bool   // the closing news write is out: the last report follows it
	view     peerView
	tok      uint64 // the report in flight: its answer or its timeout, whichever first
	// The coordinator's loop: reports parked for era pc.
	pc     *Coordinator
	parked map[string]*parkedReport
	wakeAt time.Time
	// Faults, until these times.
	dropTill, slowTill, stallTill, cutTill, frozenTill time.Duration
	refuse                                             bool // cut: connections refused (else they hang)
}

func (pp *peerProc) calm() {
	pp.dropTill, pp.slowTill, pp.stallTill, pp.cutTill, pp.frozenTill = 0, 0, 0, 0, 0
}

// peerStart sets up a new incarnation of p (start calls it).
func (s *sim) peerStart(p *proc) {
	if !s.cfg.peer {
		return
	}
	if p.peer == nil {
		p.peer = &peerProc{mode: true, home: true}
	}
	pp := p.peer
	pp.news, pp.lastNews, pp.page, pp.closing, pp.view = "", "", "", false, peerView{}
	pp.tok++ // a report of the last incarnation is no one's
	pp.pc, pp.parked, pp.wakeAt = nil, map[string]*parkedReport{}, time.Time{}
	// The executor draws each session's secret (lease.NewID) in both modes.
	p.w.cfg.NewSecret = func() string { return fmt.Sprintf("secret.%s.%d.%d.%d", p.id, p.n, p.inc, p.sessions) }
	s.at(s.now+s.dur(0, p.tm.fi), p, "view", func() { s.viewTick(p) })
}

// listEvery is the coordinator's CoordConfig.ListEvery, as next sets it.
func (s *sim) listEvery(p *proc) time.Duration {
	if p.peer != nil && p.peer.mode {
		return p.tm.lt / 2
	}
	return 0
}

// viewTick keeps p's view of the election: a leadership heard renewing
// is known a lease on; a new one is learnt by a store read, which comes
// once what p knew ran out, once the old leader stops answering (its
// coordinator over), or every third interval (InfrequentInterval).
func (s *sim) viewTick(p *proc) {
	s.at(s.now+p.tm.fi, p, "view", func() { s.viewTick(p) })
	pp, h := p.peer, s.holder
	if s.now < pp.frozenTill || !s.reachable(p, false) || h == nil || !h.up || h.c == nil {
		return
	}
	v, now, term := &pp.view, p.local(s.now), h.c.Term()
	if v.q == h && v.term == term {
		v.until = now.Add(h.tm.lt)
		return
	}
	v.reads++
	if v.q != nil && now.Before(v.until) && v.q.up && v.q.c != nil && v.reads%3 != 0 {
		return
	}
	*v = peerView{q: h, term: term, addr: h.peer.mode, until: now.Add(h.tm.lt), reads: v.reads}
	s.log("%s's election names %s, term %d", p.id, h.id, term)
}

// peerEffect carries out a worker's effect the peer mode changes; false:
// wdo carries it out.
func (s *sim) peerEffect(p *proc, e Effect) bool {
	switch e.Op {
	case OpGetPage:
		s.peerGetPage(p)
		return true
	case OpPutNews:
		s.peerNews(p, e.Data)
		return true
	case OpClosed:
		if pp := p.peer; pp.mode && !pp.closing && pp.lastNews != "" {
			s.sendReport(p, pp.view, simReport{ID: p.id, Session: p.w.etag, News: pp.lastNews}, nil)
		}
	}
	return false
}

// peerGetPage is next's OpGetPage: a report first in peer mode, then the
// read unless the answer makes it unnecessary.
func (s *sim) peerGetPage(p *proc) {
	pp := p.peer
	if !pp.mode {
		s.pageGet(p)
		return
	}
	rep := simReport{ID: p.id, Session: p.w.etag, News: pp.news, Nonce: p.w.Nonce(), Page: pp.page, Wait: (p.tm.fi * 3 / 4).Truncate(time.Millisecond)}
	last := pp.page
	pp.tok++
	tok := pp.tok
	done := func(page string, ok bool) {
		if pp.tok != tok {
			return
		}
		pp.tok++
		if ok && page == last && page != "" {
			s.log("%s page %s unchanged, by the answer", p.id, page)
			s.wdo(p, p.w.PageRead(p.local(s.now), nil, "", errPageUnchanged))
			return
		}
		s.pageGet(p)
	}
	s.at(p.realAt(p.local(s.now).Add(p.tm.fi)), p, "report timeout", func() { done("", false) })
	s.sendReport(p, pp.view, rep, done)
}

func (s *sim) pageGet(p *proc) {
	key := "assign/" + p.id
	s.call(p, "get "+key, func() (func(), string) {
		d, tag := s.get(key)
		return func() {
			p.peer.page = tag
			s.wdo(p, p.w.PageRead(p.local(s.now), d, tag, nil))
		}, tag
	}, func(err error) { s.wdo(p, p.w.PageRead(p.local(s.now), nil, "", err)) })
}

// peerNews writes the news object; the closing write's outcome is waited
// for after the worker's loop ended (next's r.stop), then its last
// report goes out.
func (s *sim) peerNews(p *proc, data []byte) {
	pp, key := p.peer, "news/"+p.id
	if p.w.st != wDone {
		s.call(p, "put "+key, func() (func(), string) {
			tag, _ := s.put(key, data, "", false)
			return func() {
				pp.news, pp.lastNews = tag, tag
				s.wdo(p, p.w.NewsPut(p.local(s.now), nil))
			}, tag
		}, func(err error) { s.wdo(p, p.w.NewsPut(p.local(s.now), err)) })
		return
	}
	pp.closing = true
	rep, v, mode := simReport{ID: p.id, Session: p.w.etag, News: pp.lastNews}, pp.view, pp.mode
	final := func() {
		if mode && rep.News != "" {
			s.sendReport(p, v, rep, nil)
		}
	}
	p.calls["put"]++
	if !s.reachable(p, true) {
		s.at(s.now+p.tm.fi, nil, p.id+" closing news timeout", final)
		return
	}
	s.at(s.now+s.latency(), nil, "put "+key+" lands", func() {
		tag, _ := s.put(key, data, "", false)
		s.log("store put %s %s (closing)", key, tag)
		back := s.now + s.latency()
		if !s.calm && s.rng.IntN(50) == 0 {
			s.at(back, nil, key+" lost", final)
			return
		}
		s.at(back, nil, key+" reply", func() {
			rep.News = tag
			final()
		})
	})
}

// sendReport is next's sendReport: to this process's own coordinator if
// it runs one, else over the network to the one p's view names. done (nil:
// no one waits) gets the answer's page ETag and whether to trust it.
func (s *sim) sendReport(p *proc, v peerView, rep simReport, done func(page string, ok bool)) {
	p.calls["report"]++
	if len(s.sent) < 64 {
		s.sent = append(s.sent, rep)
	} else {
		s.sent[s.rng.IntN(64)] = rep
	}
	answer := func(delay time.Duration, ok func(term uint64) bool) func(uint64, string) {
		return func(term uint64, page string) {
			if done != nil {
				s.at(s.now+delay, p, "answer", func() { done(page, ok(term)) })
			}
		}
	}
	if c := p.c; c != nil && s.coordLive(p, c) {
		s.at(s.now, p, "report to itself", func() {
			s.serveReport(p, rep, answer(0, func(term uint64) bool { return term != 0 }))
		})
		return
	}
	if v.q == nil || !p.local(s.now).Before(v.until) || !v.addr {
		answer(0, func(uint64) bool { return false })(0, "")
		return
	}
	if s.now < p.peer.dropTill {
		s.log("%s report to %s lost", p.id, v.q.id)
		return // the client times out
	}
	s.arrive(p, v.q, rep, answer(s.netLatency(p, v.q), func(term uint64) bool { return term != 0 && term == v.term }))
}

func (s *sim) netLatency(a, b *proc) time.Duration {
	d := s.latency()
	if a != nil && s.now < a.peer.slowTill || s.now < b.peer.slowTill {
		d += s.dur(b.tm.fi*3/4, 2*b.tm.fi) // longer than the wait
	}
	return d
}

// arrive carries rep from p (nil: a liar) to q's address; reply (nil: no
// one waits) is given the answer: term 0 for a refused request or a 503.
func (s *sim) arrive(p, q *proc, rep simReport, reply func(term uint64, page string)) {
	if reply == nil {
		reply = func(uint64, string) {}
	}
	s.at(s.now+s.netLatency(p, q), nil, "report arrives", func() {
		qp := q.peer
		switch {
		case !q.up || !qp.mode || s.now < qp.cutTill && qp.refuse:
			reply(0, "") // refused: no process, or no PeerHandler, at the address
		case s.now < qp.cutTill:
			// unreachable: the client times out
		default:
			s.at(s.now, q, "report", func() { s.serveReport(q, rep, reply) })
		}
	})
}

// serveReport is next's serveReport and answer, in q's loop.
func (s *sim) serveReport(q *proc, rep simReport, reply func(term uint64, page string)) {
	qp, c := q.peer, q.c
	if s.now < qp.stallTill {
		s.log("%s stalls on the report of %s", q.id, rep.ID)
		return
	}
	if c == nil || !s.coordLive(q, c) {
		reply(0, "") // 503: this worker does not coordinate
		return
	}
	if qp.pc != c {
		s.answerParked(q)
		qp.pc = c
	}
	now := q.local(s.now)
	s.log("%s c report %+v", q.id, rep)
	fx := c.Reported(now, rep.ID, Entry{Session: rep.Session, News: rep.News, Nonce: rep.Nonce})
	if old := qp.parked[rep.ID]; old != nil {
		delete(qp.parked, rep.ID)
		old.reply(c.Term(), c.PageTag(rep.ID))
	}
	if tag := c.PageTag(rep.ID); rep.Wait > 0 && (tag == "" || tag == rep.Page) {
		qp.parked[rep.ID] = &parkedReport{r: rep, until: now.Add(rep.Wait), reply: reply}
	} else {
		reply(c.Term(), tag)
	}
	s.cdo(q, c, fx)
}

// peerFlush is next's flush, run after every event of q (an iteration of
// its loop): the parked reports whose page changed or whose wait is over
// are answered; an era that ended answers every one empty.
func (s *sim) peerFlush(q *proc) {
	qp := q.peer
	if len(qp.parked) == 0 {
		return
	}
	c := q.c
	if c == nil || c != qp.pc {
		s.answerParked(q)
		return
	}
	now := q.local(s.now)
	var next time.Time
	for _, id := range sortedKeys(qp.parked) {
		rq := qp.parked[id]
		if tag := c.PageTag(id); tag != "" && tag != rq.r.Page || !now.Before(rq.until) {
			delete(qp.parked, id)
			rq.reply(c.Term(), tag)
			continue
		}
		if next.IsZero() || rq.until.Before(next) {
			next = rq.until
		}
	}
	if !next.IsZero() && !next.Equal(qp.wakeAt) {
		qp.wakeAt = next
		s.at(max(q.realAt(next), s.now), q, "report wait over", func() { qp.wakeAt = time.Time{} })
	}
}

// answerParked answers every parked report empty: the era ended (the
// worker reads its page), or the process died (its connections reset).
func (s *sim) answerParked(q *proc) {
	qp := q.peer
	for _, id := range sortedKeys(qp.parked) {
		qp.parked[id].reply(0, "")
	}
	clear(qp.parked)
	qp.pc = nil
}

func (s *sim) peerKill(p *proc) {
	if p.peer != nil {
		s.answerParked(p)
	}
}

// peerFault draws a peer fault; the simulation's other faults go on.
func (s *sim) peerFault() {
	if s.calm {
		return
	}
	s.at(s.now+s.dur(s.cfg.faultEvery/4, 2*s.cfg.faultEvery), nil, "peer fault", s.peerFault)
	kinds := []string{"drop", "slow", "stall", "unreachable", "stale", "replay", "forge", "forge", "ahead", "remode"}
	kind := kinds[s.rng.IntN(len(kinds))]
	p := s.pick()
	if p == nil {
		return
	}
	if (kind == "stall" || kind == "unreachable") && s.holder != nil && s.holder.up && s.rng.IntN(2) == 0 {
		p = s.holder
	}
	pp, lt := p.peer, p.tm.lt
	s.faults["peer-"+kind]++
	switch kind {
	case "drop":
		pp.dropTill = s.now + s.dur(0, 2*lt)
		s.log("%s's reports lost till %.4f", p.id, pp.dropTill.Seconds())
	case "slow":
		pp.slowTill = s.now + s.dur(0, 2*lt)
		s.log("%s's reports and answers slow till %.4f", p.id, pp.slowTill.Seconds())
	case "stall":
		pp.stallTill = s.now + s.dur(0, 2*lt)
		s.log("%s answers no report till %.4f", p.id, pp.stallTill.Seconds())
	case "unreachable":
		pp.cutTill, pp.refuse = s.now+s.dur(0, 2*lt), s.rng.IntN(2) == 0
		s.log("%s unreachable over HTTP (refusing %v) till %.4f", p.id, pp.refuse, pp.cutTill.Seconds())
	case "stale":
		pp.frozenTill = s.now + s.dur(lt, 3*lt)
		s.log("%s's election view frozen till %.4f", p.id, pp.frozenTill.Seconds())
	case "replay":
		if len(s.sent) > 0 {
			rep := s.sent[s.rng.IntN(len(s.sent))]
			s.log("replayed report %+v to %s", rep, s.liar().id)
			s.arrive(nil, s.liar(), rep, nil)
		}
	case "forge":
		rep := s.forge()
		s.log("forged report %+v to %s", rep, s.liar().id)
		s.arrive(nil, s.liar(), rep, nil)
	case "ahead":
		s.ahead(p)
	case "remode":
		s.remode(p)
		if pp.mode != pp.home {
			s.at(s.now+s.dur(lt, 6*lt), nil, "remode back", func() {
				if !s.calm && p.up && pp.mode != pp.home {
					s.remode(p)
				}
			})
		}
	}
}

// remode restarts p in the other mode: one step of a rolling change.
func (s *sim) remode(p *proc) {
	s.kill(p)
	p.peer.mode = !p.peer.mode
	s.log("%s restarts with peer mode %v", p.id, p.peer.mode)
	s.start(p)
}

// ahead: a liar names p's next write's ETag (its body hashed, under
// -sim.content-etags) with a made-up nonce before p sends it; p's own
// reports are lost, and p pauses once that write's reply is in, before
// its next. Were a report's ETag enough to date a write, without its
// nonce (4.8), p's lease would count from before its send, and its
// shards would go elsewhere while it still leads them.
func (s *sim) ahead(p *proc) {
	if p.w.st != wLive || len(p.ls) == 0 || s.holder == nil {
		return
	}
	rep := simReport{ID: p.id, Session: s.nextTag(p), Nonce: fmt.Sprintf("%016x", s.rng.Uint64())}
	s.log("report %+v ahead of the write, to %s", rep, s.holder.id)
	s.arrive(nil, s.holder, rep, nil)
	send := max(p.realAt(p.w.nextTick), s.now)
	p.peer.dropTill = max(p.peer.dropTill, send+p.tm.fi)
	s.at(send+p.tm.fi/2, nil, "pause after the write", func() {
		if p.up {
			p.pauseTill = max(p.pauseTill, s.now+s.dur(p.tm.lt/2, 2*p.tm.lt))
			s.log("%s paused till %.4f", p.id, p.pauseTill.Seconds())
		}
	})
}

// nextTag is the ETag p's next write will have, as far as a liar can
// tell: the store's next ETag, or under -sim.content-etags the hash of
// the body p would write now.
func (s *sim) nextTag(p *proc) string {
	if s.cfg.contentETags && p.up && p.w.st == wLive {
		return s.etagOf(Marshal(p.w.content(false)))
	}
	return fmt.Sprintf("e%d", s.etags+1)
}

// liar is where a lying report goes: the coordinator, mostly.
func (s *sim) liar() *proc {
	if h := s.holder; h != nil && s.rng.IntN(4) != 0 {
		return h
	}
	return s.procs[s.rng.IntN(len(s.procs))]
}

// forge makes up a report: for a worker's ID or one that never existed,
// naming ETags made up, current, past or those of the worker's next
// write, and nonces made up, past or current. No forger knows a
// session's secret, so none names a write's nonce before the write is
// sent (4.8).
func (s *sim) forge() simReport {
	q := s.procs[s.rng.IntN(len(s.procs))]
	r := simReport{ID: q.id}
	if s.rng.IntN(4) == 0 {
		r.ID = fmt.Sprintf("nobody%d", s.rng.IntN(3))
	}
	key := "workers/" + r.ID
	o := s.store[key]
	nextTag := fmt.Sprintf("e%d", s.etags+1) // the store's next ETag
	if r.ID == q.id {
		nextTag = s.nextTag(q)
	}
	switch s.rng.IntN(4) {
	case 0:
		r.Session = fmt.Sprintf("f%d", s.rng.IntN(1000))
	case 1:
		if o != nil {
			r.Session = o.etag
		}
	case 2:
		r.Session = nextTag
	case 3:
		if o != nil && len(o.hist) > 0 {
			if d := o.hist[s.rng.IntN(len(o.hist))]; d != nil && s.cfg.contentETags {
				r.Session = s.etagOf(d)
			} else {
				r.Session = fmt.Sprintf("e%d", s.rng.Uint64N(s.etags+1))
			}
		}
	}
	switch s.rng.IntN(4) {
	case 1:
		r.Nonce = fmt.Sprintf("%016x", s.rng.Uint64())
	case 2, 3:
		if o != nil && len(o.hist) > 0 {
			if old, err := ParseSession(o.hist[s.rng.IntN(len(o.hist))], r.ID); err == nil {
				r.Nonce = old.Nonce // a past write's, or the current one's
			}
		}
	}
	if s.rng.IntN(2) == 0 {
		r.News = fmt.Sprintf("f%d", s.rng.IntN(1000))
	} else if o := s.store["news/"+r.ID]; o != nil {
		r.News = o.etag
	}
	if s.rng.IntN(2) == 0 {
		r.Wait = 750 * time.Millisecond
		if o := s.store["assign/"+r.ID]; o != nil {
			r.Page = o.etag
		}
	}
	return r
}
