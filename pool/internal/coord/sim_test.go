package coord

import (
	"bytes"
	"container/heap"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The simulation drives Worker and Coordinator directly: one event queue
// in virtual time, every choice (latencies, faults, the order of events
// due at one instant) drawn from the seed, so that a seed replays the same
// history, byte for byte, whatever the machine.

type simConfig struct {
	workers, shards int
	faultFor        time.Duration // faults happen in [0, faultFor)
	faultEvery      time.Duration // mean time between faults
	calmFor         time.Duration // how long the run goes on after the faults stop
	maxWorkers      int           // joins stop there
	timing          *timing       // every worker's, if set; else drawn
	noLog           bool          // keep no ledger (measurements at scale)
	contentETags    bool          // ETags hash the bytes (docs/pool-protocol.md, section 7)
	peer            bool          // peer mode, its faults and rolling changes of mode (simpeer_test.go)
}

var defaultSim = simConfig{workers: 5, shards: 16, faultFor: 90 * time.Second, faultEvery: 2 * time.Second, calmFor: 40 * time.Second, maxWorkers: 8}

type timing struct{ fi, lt time.Duration }

// timings are the ones a rolling change moves between (LeaderTimeout
// above two FrequentIntervals).
var timings = []timing{{time.Second, 3 * time.Second}, {time.Second, 4 * time.Second}, {1500 * time.Millisecond, 4 * time.Second}, {800 * time.Millisecond, 2500 * time.Millisecond}}

type obj struct {
	data []byte // nil: deleted
	etag string
	hist [][]byte // every version ever written, nil for a deletion
}

type lship struct {
	term     uint64
	deadline time.Time
	ended    bool
}

type proc struct {
	id        string
	n         int // index, for the ledger
	inc       int // incarnation: events of an earlier one are dropped
	up        bool
	closed    bool
	closing   bool // closed, its coordinator still handing its shards over
	rejoin    bool // leaving when the faults stopped: started again once closed
	rate      float64
	off       time.Duration
	tm        timing
	pauseTill time.Duration
	putBackAt time.Duration // the last putback fault's delete (0: none)
	suspEnd   time.Duration // a host suspend ends (its timers were moved on to after it)
	cutTill   time.Duration // the store unreachable
	grayTill  time.Duration // the pool's objects unreachable, the election not
	w         *Worker
	wTok      uint64
	c         *Coordinator
	cTok      uint64
	cEnd      time.Time // the coordinator's leadership ends (local)
	noRunTill time.Duration
	ls        map[string]*lship
	sessions  int
	calls     map[string]int // store requests sent, by kind
	twin      bool           // a second process of another's ID
	noted     uint64         // the highest era its process handed its Elector (NoteTerm)
	peer      *peerProc      // with simConfig.peer (simpeer_test.go)
}

type sim struct {
	cfg    simConfig
	seed   uint64
	rng    *rand.Rand
	now    time.Duration
	q      evHeap
	seq    uint64
	store  map[string]*obj
	etags  uint64
	procs  []*proc
	shards []string
	base   time.Time
	ledger bytes.Buffer // kept only with keep
	hash   hash.Hash    // of the whole ledger
	keep   bool
	line   []byte
	fails  []string
	sent   []simReport // peer mode: the workers' last reports, for replays (simpeer_test.go)

	holder   *proc
	holdInc  int
	term     uint64
	renewed  time.Duration
	holderLT time.Duration

	maxTerm   map[string]uint64
	calm      bool
	ledAt     time.Duration // when every shard was first led after the calm began
	steps     int
	faults    map[string]int
	overlaps  int
	nextCheck time.Duration
	starts    int
}

var (
	errTimeout = errors.New("timeout")
	errLost    = errors.New("reply lost")
	errLate    = errors.New("lease over")
)

func newSim(seed uint64, cfg simConfig) *sim {
	s := &sim{cfg: cfg, seed: seed, hash: sha256.New(), rng: rand.New(rand.NewPCG(seed, 0x5eed)), store: map[string]*obj{},
		base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), maxTerm: map[string]uint64{}, faults: map[string]int{}, ledAt: -1}
	for i := range cfg.shards {
		s.shards = append(s.shards, fmt.Sprintf("s%02d", i))
	}
	for range cfg.workers {
		s.addProc()
	}
	return s
}

func (s *sim) log(format string, args ...any) {
	if s.cfg.noLog {
		return
	}
	s.line = strconv.AppendFloat(s.line[:0], s.now.Seconds(), 'f', 4, 64)
	s.line = append(s.line, ' ')
	s.line = fmt.Appendf(s.line, format, args...)
	s.line = append(s.line, '\n')
	s.hash.Write(s.line)
	if s.keep {
		s.ledger.Write(s.line)
	}
}

func (s *sim) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log("FAIL %s", msg)
	s.fails = append(s.fails, fmt.Sprintf("t=%.4f %s", s.now.Seconds(), msg))
}

func (s *sim) dur(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

func (s *sim) at(t time.Duration, p *proc, what string, fn func()) {
	inc := 0
	if p != nil {
		inc = p.inc
	}
	s.atInc(t, p, inc, what, fn)
}

// atInc schedules fn for incarnation inc of p: if p has restarted since,
// it is dropped.
func (s *sim) atInc(t time.Duration, p *proc, inc int, what string, fn func()) {
	s.seq++
	heap.Push(&s.q, &event{at: t, tie: s.rng.Uint64(), seq: s.seq, p: p, inc: inc, what: what, fn: fn})
}

func (s *sim) addProc() *proc {
	p := &proc{id: fmt.Sprintf("w%d", len(s.procs)), n: len(s.procs), rate: 0.95 + 0.1*s.rng.Float64(),
		off: s.dur(0, time.Hour), tm: timings[s.rng.IntN(2)], calls: map[string]int{}}
	if s.cfg.timing != nil {
		p.tm = *s.cfg.timing
	}
	s.procs = append(s.procs, p)
	s.start(p)
	return p
}

func (p *proc) local(t time.Duration) time.Time {
	return time.Time{}.Add(p.off + time.Duration(float64(t)*p.rate))
}

// realAt is the first real time at which p's clock reads l or later.
func (p *proc) realAt(l time.Time) time.Duration {
	d := l.Sub(time.Time{}) - p.off
	return time.Duration(float64(d)/p.rate) + 1
}

func (s *sim) start(p *proc) {
	p.inc++
	p.up, p.closed, p.closing = true, false, false
	p.c, p.ls, p.noted = nil, map[string]*lship{}, 0
	p.w = NewWorker(WorkerConfig{ID: p.id, FrequentInterval: p.tm.fi, LeaderTimeout: p.tm.lt, NewSession: func() string {
		p.sessions++
		return fmt.Sprintf("%s.%d.%d.%d", p.id, p.n, p.inc, p.sessions) // random in the executor: the process index keeps twins apart
	}})
	s.peerStart(p)
	s.log("%s start #%d fi=%v lt=%v", p.id, p.inc, p.tm.fi, p.tm.lt)
	s.wdo(p, p.w.Start(p.local(s.now)))
	s.electTick(p)
}

func (s *sim) kill(p *proc) {
	s.log("%s killed", p.id)
	p.inc++
	p.up, p.c = false, nil
	p.ls = map[string]*lship{}
	s.peerKill(p)
}

func (s *sim) reachable(p *proc, pool bool) bool {
	return s.now >= p.cutTill && (!pool || s.now >= p.grayTill)
}

// call is one store request of p: it lands after a latency, then its
// reply comes back after another (or is lost).
func (s *sim) call(p *proc, what string, do func() (func(), string), failed func(error)) {
	inc := p.inc
	p.calls[strings.Fields(what)[0]]++
	if !s.reachable(p, true) {
		s.at(s.now+p.tm.fi, p, what+" timeout", func() { failed(errTimeout) })
		return
	}
	land := s.now + s.latency()
	if simLate != "" && !s.calm && strings.HasPrefix(what, "put ") && strings.Contains(what, simLate) && s.rng.IntN(12) == 0 {
		// -sim.late: the write lands long after its send (a request held in
		// the network, or an executor's retry sent after a host's resume).
		land += s.dur(0, 2*p.tm.lt)
	}
	s.at(land, nil, what+" lands", func() {
		reply, note := do()
		s.log("store %s %s", what, note)
		back := s.now + s.latency()
		if !s.calm && s.rng.IntN(50) == 0 {
			s.atInc(back, p, inc, what+" lost", func() { failed(errLost) })
			return
		}
		s.atInc(back, p, inc, what+" reply", reply)
	})
}

// adopt is how the executor's calls (internal/lease.Calls.Put) end a
// write whose reply was lost: they read the key, and a write that landed
// is the call's success.
func (s *sim) adopt(p *proc, key string, data []byte, deliver func(string, error)) func(error) {
	return func(err error) {
		if err != errLost {
			deliver("", err)
			return
		}
		s.call(p, "reread "+key, func() (func(), string) {
			d, tag := s.get(key)
			if bytes.Equal(d, data) {
				return func() { deliver(tag, nil) }, "adopted " + tag
			}
			return func() { deliver("", errLost) }, "not adopted"
		}, func(err error) { deliver("", err) })
	}
}

func (s *sim) latency() time.Duration {
	if !s.calm && s.rng.IntN(30) == 0 {
		return s.dur(100*time.Millisecond, 1200*time.Millisecond)
	}
	return s.dur(2*time.Millisecond, 40*time.Millisecond)
}

func (s *sim) get(key string) ([]byte, string) {
	o := s.store[key]
	if o == nil || o.data == nil {
		return nil, ""
	}
	return o.data, o.etag
}

func (s *sim) put(key string, data []byte, ifMatch string, cond bool) (string, error) {
	o := s.store[key]
	if cond {
		cur := ""
		if o != nil && o.data != nil {
			cur = o.etag
		}
		if cur != ifMatch {
			return "", store.ErrPreconditionFailed
		}
	}
	if o == nil {
		o = &obj{}
		s.store[key] = o
	}
	s.etags++
	o.data, o.etag = slices.Clone(data), s.etagOf(data)
	o.hist = append(o.hist, o.data)
	return o.etag, nil
}

// etagOf is a new write's ETag: unique per write (a version ID, a
// generation), or with contentETags a hash of the bytes, as S3 without
// versioning gives, so that exact bytes put back have their old ETag.
func (s *sim) etagOf(data []byte) string {
	if s.cfg.contentETags && data != nil {
		sum := sha256.Sum256(data)
		return fmt.Sprintf("h%x", sum[:6])
	}
	return fmt.Sprintf("e%d", s.etags)
}

// wdo carries out a worker's effects.
func (s *sim) wdo(p *proc, fx []Effect) {
	if _, v := p.w.Session(); v.Era > p.noted {
		p.noted = v.Era // the executor hands an applied page's era to its Elector
	}
	for _, e := range fx {
		if e.Op != OpTimer {
			s.log("%s w %s", p.id, e)
		}
		if p.peer != nil && s.peerEffect(p, e) {
			continue
		}
		switch e.Op {
		case OpTimer:
			p.wTok++
			tok := p.wTok
			s.at(max(p.realAt(e.At), s.now), p, "wtick", func() {
				if p.wTok == tok {
					s.wdo(p, p.w.Tick(p.local(s.now)))
				}
			})
		case OpGetSession:
			key := "workers/" + p.id
			s.call(p, "get "+key, func() (func(), string) {
				d, tag := s.get(key)
				return func() { s.wdo(p, p.w.SessionRead(p.local(s.now), d, tag, nil)) }, tag
			}, func(err error) { s.wdo(p, p.w.SessionRead(p.local(s.now), nil, "", err)) })
		case OpPutSession:
			key, sent := "workers/"+p.id, p.local(s.now)
			if !e.At.IsZero() && !sent.Before(e.At) {
				s.wdo(p, p.w.SessionPut(sent, sent, "", errLate))
				break
			}
			data, im := e.Data, e.IfMatch
			s.call(p, "put "+key, func() (func(), string) {
				tag, err := s.put(key, data, im, true)
				return func() { s.wdo(p, p.w.SessionPut(p.local(s.now), sent, tag, err)) }, fmt.Sprint(tag, err)
			}, s.adopt(p, key, data, func(tag string, err error) { s.wdo(p, p.w.SessionPut(p.local(s.now), sent, tag, err)) }))
		case OpPutNews:
			key, data := "news/"+p.id, e.Data
			s.call(p, "put "+key, func() (func(), string) {
				tag, _ := s.put(key, data, "", false)
				return func() { s.wdo(p, p.w.NewsPut(p.local(s.now), nil)) }, tag
			}, func(err error) { s.wdo(p, p.w.NewsPut(p.local(s.now), err)) })
		case OpGetPage:
			key := "assign/" + p.id
			s.call(p, "get "+key, func() (func(), string) {
				d, tag := s.get(key)
				return func() { s.wdo(p, p.w.PageRead(p.local(s.now), d, tag, nil)) }, tag
			}, func(err error) { s.wdo(p, p.w.PageRead(p.local(s.now), nil, "", err)) })
		case OpStart:
			s.started(p, e.Shard, e.Term, e.At)
		case OpStop:
			if l := p.ls[e.Shard]; l != nil && !l.ended {
				l.ended = true
				sh := e.Shard
				s.at(s.now+s.dur(0, p.tm.fi/2), p, "drained", func() { s.workDone(p, sh) })
			}
		case OpExtend:
			for _, sh := range sortedKeys(p.ls) {
				if l := p.ls[sh]; !l.ended {
					l.deadline = e.At
					s.checkExtend(p, sh, l)
				}
			}
		case OpClosed, OpFail:
			if p.c != nil && !p.closing {
				// As the executor does: a coordinator whose worker has
				// closed its session (or failed, a duplicate ID)
				// coordinates two more intervals, so that its shards go
				// to the others, then resigns.
				p.closing = true
				inc := p.inc
				s.atInc(s.now+2*p.tm.fi, p, inc, p.id+" resigns after its leave", func() {
					if s.holder == p && p.c != nil {
						s.holder = nil
					}
					s.wdo(p, []Effect{e})
				})
				continue
			}
			p.up, p.closed, p.closing = false, true, false
			p.inc++
			p.c = nil
			if e.Op == OpClosed && p.rejoin || e.Op == OpFail && s.calm && !p.twin {
				// A leave that was under way when the faults stopped ends
				// after the calm began, or a worker fails then (a
				// duplicate ID counted during the faults, W1): start it
				// again, as the calm does every worker that is down.
				p.rejoin = false
				s.at(s.now, nil, p.id+" restarts after its leave", func() {
					if !p.up {
						s.start(p)
					}
				})
			}
		}
	}
}

func (s *sim) workDone(p *proc, sh string) {
	if l := p.ls[sh]; l != nil {
		l.ended = true
		delete(p.ls, sh)
	}
	s.wdo(p, p.w.WorkDone(p.local(s.now), sh))
}

func (s *sim) live(q *proc, l *lship) bool {
	return q.up && !l.ended && q.local(s.now).Before(l.deadline)
}

// started checks a new leadership against every other.
func (s *sim) started(p *proc, sh string, term uint64, deadline time.Time) {
	for _, q := range s.procs {
		if l := q.ls[sh]; l != nil && s.live(q, l) {
			s.overlaps++
			s.fail("shard %s: %s starts at term %d while %s leads it at term %d", sh, p.id, term, q.id, l.term)
		}
	}
	if term <= s.maxTerm[sh] {
		s.fail("shard %s: term %d after %d", sh, term, s.maxTerm[sh])
	}
	s.maxTerm[sh] = max(s.maxTerm[sh], term)
	s.starts++
	p.ls[sh] = &lship{term: term, deadline: deadline}
}

// The election, as package s3lect's Elector guarantees it: a leadership
// ends (by its holder's clock) before anyone else's can begin, and terms
// rise.
func (s *sim) electTick(p *proc) {
	s.at(s.now+p.tm.fi, p, "elect", func() { s.electTick(p) })
	if !p.up || !s.reachable(p, false) {
		return
	}
	mine := s.holder == p && s.holdInc == p.inc
	if mine && p.local(s.now).Before(p.cEnd) && p.c != nil {
		s.renewed = s.now
		p.cEnd = p.local(s.now).Add(p.tm.lt - p.tm.lt/10)
		return
	}
	if s.now < p.noRunTill || p.closing {
		return
	}
	if s.holder != nil && s.now-s.renewed < s.holderLT {
		return
	}
	s.term = max(s.term, p.noted) + 1 // the Elector writes above every term it has seen
	s.holder, s.holdInc, s.renewed, s.holderLT = p, p.inc, s.now, p.tm.lt
	p.cEnd = p.local(s.now).Add(p.tm.lt - p.tm.lt/10)
	p.c = NewCoordinator(CoordConfig{Shards: s.shards, FrequentInterval: p.tm.fi, LeaderTimeout: p.tm.lt,
		Mark: fmt.Sprintf("%s.%d", p.id, s.seq), ListEvery: s.listEvery(p)}, s.term) // s.seq: unique, as the executor's random mark is
	s.log("%s elected coordinator, term %d", p.id, s.term)
	s.cdo(p, p.c, p.c.Tick(p.local(s.now)))
}

// coordLive reports whether c still coordinates for p; if its leadership
// has ended, it stops.
func (s *sim) coordLive(p *proc, c *Coordinator) bool {
	if p.c != c || c == nil {
		return false
	}
	if !p.local(s.now).Before(p.cEnd) {
		s.log("%s coordinator's leadership over", p.id)
		p.c = nil
		return false
	}
	return true
}

func (s *sim) cdo(p *proc, c *Coordinator, fx []Effect) {
	for _, e := range fx {
		if !s.coordLive(p, c) {
			return
		}
		if e.Op != OpTimer {
			s.log("%s c %s", p.id, e)
		}
		switch e.Op {
		case OpTimer:
			p.cTok++
			tok := p.cTok
			s.at(max(p.realAt(e.At), s.now), p, "ctick", func() {
				if p.cTok == tok && s.coordLive(p, c) {
					s.cdo(p, c, c.Tick(p.local(s.now)))
				}
			})
		case OpList:
			s.call(p, "list", func() (func(), string) {
				m := map[string]Entry{}
				for _, k := range sortedKeys(s.store) {
					o := s.store[k]
					if o.data == nil {
						continue
					}
					if id, ok := strings.CutPrefix(k, "workers/"); ok {
						en := m[id]
						en.Session = o.etag
						m[id] = en
					} else if id, ok := strings.CutPrefix(k, "news/"); ok {
						en := m[id]
						en.News = o.etag
						m[id] = en
					}
				}
				return func() {
					if s.coordLive(p, c) {
						s.cdo(p, c, c.Listed(p.local(s.now), m, nil))
					}
				}, fmt.Sprint(len(m))
			}, func(err error) {
				if s.coordLive(p, c) {
					s.cdo(p, c, c.Listed(p.local(s.now), nil, err))
				}
			})
		case OpGetSession, OpGetPage:
			key, id, op := "workers/"+e.Key, e.Key, e.Op
			if op == OpGetPage {
				key = "assign/" + e.Key
			}
			deliver := func(d []byte, tag string, err error) {
				if !s.coordLive(p, c) {
					return
				}
				if op == OpGetPage {
					s.cdo(p, c, c.PageRead(p.local(s.now), id, d, tag, err))
				} else {
					s.cdo(p, c, c.SessionRead(p.local(s.now), id, d, tag, err))
				}
			}
			s.call(p, "get "+key, func() (func(), string) {
				d, tag := s.get(key)
				return func() { deliver(d, tag, nil) }, tag
			}, func(err error) { deliver(nil, "", err) })
		case OpPutPage:
			key, id, data, im := "assign/"+e.Key, e.Key, e.Data, e.IfMatch
			deliver := func(tag string, err error) {
				if s.coordLive(p, c) {
					s.cdo(p, c, c.PagePut(p.local(s.now), id, tag, err))
				}
			}
			s.call(p, "put "+key, func() (func(), string) {
				tag, err := s.put(key, data, im, true)
				return func() { deliver(tag, err) }, fmt.Sprint(tag, err)
			}, s.adopt(p, key, data, deliver))
		case OpGetRoster:
			deliver := func(d []byte, tag string, err error) {
				if s.coordLive(p, c) {
					s.cdo(p, c, c.RosterRead(p.local(s.now), d, tag, err))
				}
			}
			s.call(p, "get departed", func() (func(), string) {
				d, tag := s.get("departed")
				return func() { deliver(d, tag, nil) }, tag
			}, func(err error) { deliver(nil, "", err) })
		case OpPutRoster:
			data, im := e.Data, e.IfMatch
			deliver := func(tag string, err error) {
				if s.coordLive(p, c) {
					s.cdo(p, c, c.RosterPut(p.local(s.now), tag, err))
				}
			}
			s.call(p, "put departed", func() (func(), string) {
				tag, err := s.put("departed", data, im, true)
				return func() { deliver(tag, err) }, fmt.Sprint(tag, err)
			}, s.adopt(p, "departed", data, deliver))
		case OpStepDown:
			p.noted = max(p.noted, e.Term)
			if s.holder == p {
				s.holder = nil
			}
			p.c = nil
			p.noRunTill = s.now + p.tm.lt
		}
	}
}
