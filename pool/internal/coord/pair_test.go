package coord

import (
	"crypto/md5"
	"fmt"
	"testing"
	"time"
)

// pair is the store model of the scripted coordinator tests: a
// coordinator of era 1 over shards a to d, and two workers, w1 and w2,
// whose renewals fall every FrequentInterval (1 s) at .3 s and .6 s past
// the second; LeaderTimeout 3 s, and the coordinator lists every
// LeaderTimeout/2, as in peer mode. An object's ETag is the MD5 of its
// bytes, as on S3. A test scripts the workers (which renewals land, what
// they report, when they lose the store) and the operator (put-backs) in
// the events it gives run; run serves the coordinator's effects.
type pair struct {
	t      *testing.T
	c      *Coordinator
	ws     map[string]*pairWorker
	obj    map[string][]byte // the store's session objects (nil: none)
	pages  map[string][]byte
	nonces bool // every write carries a Nonce (peer mode, 4.8)
	// store, if set, says how the store answers call e, sent at d: after
	// lat (0: at once, its effects run at the next step), or failing with
	// err. Unset: every call at once, without error.
	store func(d time.Duration, e Effect) (lat time.Duration, err error)
	// watch, if set, sees every effect before it is served.
	watch   func(d time.Duration, e Effect)
	queue   []Effect // effects to run at the next step
	pending []pendingCall
}

type pairWorker struct {
	s       Session       // its last write that it knows landed
	etag    string        // that write's ETag
	sent    time.Duration // when that write was sent
	page    Page          // the last page the coordinator wrote it
	renewAt time.Duration // its next renewal
}

type pendingCall struct {
	due time.Duration
	fn  func(now time.Time) []Effect
}

const pairFI, pairLT = time.Second, 3 * time.Second

// newPair returns the pool with both sessions open at seq 1 (open), or
// with no session object yet (each worker's first renewal creates it).
func newPair(t *testing.T, nonces, open bool) *pair {
	p := &pair{t: t, nonces: nonces, ws: map[string]*pairWorker{}, obj: map[string][]byte{}, pages: map[string][]byte{},
		c: NewCoordinator(CoordConfig{Shards: []string{"a", "b", "c", "d"}, FrequentInterval: pairFI, LeaderTimeout: pairLT, Mark: "m", ListEvery: pairLT / 2}, 1)}
	for i, id := range []string{"w1", "w2"} {
		w := &pairWorker{renewAt: time.Duration(300*(i+1)) * time.Millisecond}
		if open {
			w.s = Session{V: wireVersion, ID: id, Session: "S" + id, Seq: 1, TTL: 3000, Leads: map[string]uint64{}}
			p.obj[id] = Marshal(w.s)
			w.etag = p.tag(id)
		}
		p.ws[id] = w
	}
	p.queue = p.c.Tick(at(0))
	return p
}

func md5tag(b []byte) string { return fmt.Sprintf("%x", md5.Sum(b)) }

// tag is the ETag of id's session object ("" if none).
func (p *pair) tag(id string) string {
	if p.obj[id] == nil {
		return ""
	}
	return md5tag(p.obj[id])
}

// due reports whether worker id renews at d, and schedules its next renewal.
func (p *pair) due(d time.Duration, id string) bool {
	w := p.ws[id]
	if d != w.renewAt {
		return false
	}
	w.renewAt += pairFI
	return true
}

// next is worker id's next write (as Worker.content makes it): its seq
// one higher, the last page written for its session applied.
func (p *pair) next(id string) Session {
	w := p.ws[id]
	s := w.s
	if s.Session == "" {
		s = Session{V: wireVersion, ID: id, Session: "S" + id, TTL: 3000}
	}
	s.Seq++
	if w.s.Applied.Less(w.page.Ver) && w.page.Session == s.Session {
		s.Applied, s.AppliedBy, s.Leads = w.page.Ver, w.page.By, w.page.Shards
	}
	if p.nonces {
		s.Nonce = fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("secret-%s/%d", s.Session, s.Seq))))[:16]
	}
	return s
}

// write puts s on id's key, If-Match the worker's last write (the test
// fails if the store holds another), and returns its bytes.
func (p *pair) write(d time.Duration, id string, s Session) []byte {
	if p.tag(id) != p.ws[id].etag {
		p.t.Fatalf("t=%v: %s's write refused: the schedule does not hold", d, id)
	}
	p.obj[id] = Marshal(s)
	return p.obj[id]
}

// landed makes s, sent at d, worker id's last write that it knows landed.
func (p *pair) landed(d time.Duration, id string, s Session) {
	w := p.ws[id]
	w.s, w.etag, w.sent = s, md5tag(Marshal(s)), d
}

// renew writes worker id's next renewal, sent at d, and its reply comes.
func (p *pair) renew(d time.Duration, id string) {
	s := p.next(id)
	p.write(d, id, s)
	p.landed(d, id, s)
}

// leaseEnd is when worker id's leaderships end: LeaderTimeout minus a
// tenth after the send of its last write that landed.
func (p *pair) leaseEnd(id string) time.Duration { return p.ws[id].sent + pairLT - pairLT/10 }

// report takes in a report for id naming e, or (e zero) worker id's
// honest report of its last write.
func (p *pair) report(d time.Duration, id string, e Entry) {
	if e == (Entry{}) {
		e = Entry{Session: p.ws[id].etag, Nonce: p.ws[id].s.Nonce}
	}
	p.queue = append(p.queue, p.c.Reported(at(d), id, e)...)
}

// run steps from 0 to until by 10 ms. A step runs, at one instant, the
// effects of the calls the last step answered, those of the answers due
// now, the test's events(d) and a Tick; then it serves their effects.
func (p *pair) run(until time.Duration, events func(d time.Duration)) {
	for d := time.Duration(0); d < until; d += 10 * time.Millisecond {
		now := at(d)
		rest := p.pending[:0]
		for _, c := range p.pending {
			if c.due <= d {
				p.queue = append(p.queue, c.fn(now)...)
			} else {
				rest = append(rest, c)
			}
		}
		p.pending = rest
		events(d)
		fx := append(p.queue, p.c.Tick(now)...)
		p.queue = nil
		for _, e := range fx {
			if p.watch != nil {
				p.watch(d, e)
			}
			p.serve(d, e)
		}
	}
}

// serve carries out effect e, sent at d.
func (p *pair) serve(d time.Duration, e Effect) {
	var lat time.Duration
	var err error
	if p.store != nil {
		lat, err = p.store(d, e)
	}
	c, id := p.c, e.Key
	var fn func(now time.Time) []Effect
	switch e.Op {
	case OpStepDown:
		p.t.Fatalf("t=%v: stepped down: %v", d, e.Err)
	case OpList:
		entries := map[string]Entry{"w1": {Session: p.tag("w1")}, "w2": {Session: p.tag("w2")}}
		if err != nil {
			entries = nil
		}
		fn = func(now time.Time) []Effect { return c.Listed(now, entries, err) }
	case OpGetSession:
		data, tag := p.obj[id], p.tag(id)
		fn = func(now time.Time) []Effect { return c.SessionRead(now, id, data, tag, err) }
	case OpGetPage:
		data, tag := p.pages[id], ""
		if data != nil {
			tag = md5tag(data)
		}
		fn = func(now time.Time) []Effect { return c.PageRead(now, id, data, tag, err) }
	case OpPutPage:
		pg, perr := ParsePage(e.Data, id)
		if perr != nil {
			p.t.Fatal(perr)
		}
		p.pages[id], p.ws[id].page = e.Data, pg
		tag := md5tag(e.Data)
		fn = func(now time.Time) []Effect { return c.PagePut(now, id, tag, err) }
	case OpGetRoster:
		fn = func(now time.Time) []Effect { return c.RosterRead(now, nil, "", err) }
	case OpPutRoster:
		fn = func(now time.Time) []Effect { return c.RosterPut(now, "r", err) }
	default:
		return
	}
	if lat == 0 {
		p.queue = append(p.queue, fn(at(d))...)
		return
	}
	p.pending = append(p.pending, pendingCall{d + lat, fn})
}

// lostReport is the workers' script of the put-back schedules (4.8): both
// renew and report every interval, but w1's renewal at T+1 s, which
// lands, goes unreported, and then w1 loses the store. backup is w1's
// object as its renewal at T left it.
type lostReport struct {
	T          time.Duration
	backup     []byte
	cut        bool
	leadsAtCut map[string]uint64 // the shards w1's last write lists
}

func (l *lostReport) events(p *pair, d time.Duration) {
	for _, id := range []string{"w1", "w2"} {
		if id == "w1" && l.cut || !p.due(d, id) {
			continue
		}
		p.renew(d, id)
		switch {
		case id == "w1" && d == l.T+pairFI:
			l.cut, l.leadsAtCut = true, p.ws[id].s.Leads
			continue
		case id == "w1" && d == l.T:
			l.backup = p.obj[id]
		}
		p.report(d, id, Entry{})
	}
}
