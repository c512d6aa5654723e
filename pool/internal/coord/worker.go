package coord

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/s3lect/s3lect/store"
)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	ID               string
	FrequentInterval time.Duration
	LeaderTimeout    time.Duration
	// NewSession draws a new session ID (random, never drawn before).
	NewSession func() string
	// NewSecret, if set, draws a session's secret, from which each write
	// takes its Nonce (peer mode, 4.8).
	NewSecret func() string
}

type wstate int

const (
	wOpen   wstate = iota // reading its key, then creating a session
	wLive                 // the session's lease holds
	wEnding               // the session is over; reopening once Work has drained
	wDone                 // Closed or Fail emitted
)

// write is a session write in flight.
type write struct {
	opening bool // the first write of a session
	seq     uint64
	nonce   string
	listed  map[string]uint64 // the shards it lists that wait to start
	closed  bool
	news    bool
}

// dupSight is a foreign session read on the worker's key after a refused
// write, to be read again a FrequentInterval later.
type dupSight struct {
	session string
	seq     uint64
	at      time.Time
	rose    bool // its seq rose once since the first read
}

// Worker is one worker's side of the protocol: its session, the page it
// applied, the shards whose Work runs. Its methods are the events; each
// returns the effects for the executor to carry out, in order.
type Worker struct {
	cfg    WorkerConfig
	margin time.Duration
	st     wstate

	sess      string
	secret    string          // the session's secret: each write's Nonce derives from it
	nonce     string          // the Nonce of the last write that succeeded
	mine      map[string]bool // the sessions this worker opened
	displaced int             // live sessions ended by a foreign session of this ID, seen to renew
	checkDup  bool
	dup       dupSight // a foreign live session on the key, read once: is it renewing?
	etag      string   // the object as this worker last wrote (or, opening, read) it
	seq       uint64
	deadline  time.Time // the session's lease ends
	nextTick  time.Time

	applied  Ver               // the page applied, releases drained
	target   Ver               // the page applied, releases maybe draining
	by, tby  string            // the eras' marks (Page.By) of applied and target
	page     map[string]uint64 // the target page's shards
	running  map[string]uint64 // Work started and not returned: listed in the session
	stopping map[string]bool   // running shards whose leadership ended
	starting map[string]uint64 // to start once a write listing them lands
	resigned map[string]bool   // named by the target page, but Work returned by itself
	started  map[string]uint64 // the highest term each shard's Work started at, ever

	inflight *write
	// lost: the write of this seq whose outcome was unknown, first sent
	// at lostSent. The next write of the seq sends the same bytes, and
	// the executor takes them on the key as its success: they may be
	// the first attempt's, so the lease counts from that send.
	lostSeq  uint64
	lostSent time.Time
	wantPut  bool
	wantNews bool
	readPage bool
	reading  bool // a session read in flight
	paging   bool // a page read in flight
	// soonTill: a page said grants are near (Page.Soon); until then the
	// page is read every quarter interval, next at nextSoon.
	soonTill, nextSoon time.Time
	leaving            bool
}

// NewWorker returns a worker that starts with Start.
func NewWorker(cfg WorkerConfig) *Worker {
	return &Worker{cfg: cfg, margin: cfg.LeaderTimeout / 10, mine: map[string]bool{},
		running: map[string]uint64{}, stopping: map[string]bool{}, starting: map[string]uint64{}, resigned: map[string]bool{}, started: map[string]uint64{}}
}

// Session returns the current session ("" between sessions) and the
// page version applied.
func (w *Worker) Session() (string, Ver) { return w.sess, w.applied }

// Nonce returns the Nonce of the session's last write that succeeded
// ("" without NewSecret): peer mode reports it (4.8).
func (w *Worker) Nonce() string { return w.nonce }

// Start opens the first session.
func (w *Worker) Start(now time.Time) []Effect {
	var fx []Effect
	w.open(&fx)
	return w.timer(now, fx)
}

func (w *Worker) open(fx *[]Effect) {
	w.st = wOpen
	if !w.reading && w.inflight == nil {
		w.reading = true
		*fx = append(*fx, Effect{Op: OpGetSession, Key: w.cfg.ID})
	}
}

// SessionRead is the result of OpGetSession.
func (w *Worker) SessionRead(now time.Time, data []byte, etag string, err error) []Effect {
	var fx []Effect
	w.reading = false
	if w.st != wOpen {
		return w.timer(now, fx)
	}
	if err != nil {
		if w.leaving {
			// No session, no Work: nothing is left to close (a store
			// that cannot be reached must not keep Run from returning).
			w.st = wDone
			return append(fx, Effect{Op: OpClosed})
		}
		return w.timer(now, fx) // retried at the next tick
	}
	if w.checkDup && etag != "" {
		// A displacement counts only when the foreign session is seen to
		// renew, twice (W1): a duplicate process does; an earlier write
		// put back stands still. The key is read every tick meanwhile.
		if s, perr := ParseSession(data, w.cfg.ID); perr == nil && s.Session != "" && !w.mine[s.Session] && !s.Closed {
			ttl := max(time.Duration(s.TTL)*time.Millisecond, w.cfg.LeaderTimeout)
			switch d := w.dup; {
			case d.session == "":
				w.dup = dupSight{session: s.Session, seq: s.Seq, at: now}
				return w.timer(now, fx) // read it again at the next tick
			case d.session == s.Session && s.Seq > d.seq && !d.rose:
				// Risen once: an operator who puts the key back to two
				// consecutive versions shows that much too. Read on for a
				// second rise within its ttl.
				w.dup = dupSight{session: s.Session, seq: s.Seq, at: now, rose: true}
				return w.timer(now, fx)
			case d.session == s.Session && s.Seq > d.seq && now.Sub(d.at) < ttl:
				w.displaced++ // risen again within its ttl: it renews
			case d.session == s.Session && now.Sub(d.at) < ttl:
				return w.timer(now, fx)
			}
		}
		w.checkDup, w.dup = false, dupSight{}
		if w.displaced >= 2 {
			w.st = wDone
			return append(fx, Effect{Op: OpFail, Err: ErrDuplicateID})
		}
	}
	if w.leaving {
		w.st = wDone
		return append(fx, Effect{Op: OpClosed})
	}
	w.etag = etag
	w.sess = w.cfg.NewSession()
	w.secret, w.nonce = "", ""
	if w.cfg.NewSecret != nil {
		w.secret = w.cfg.NewSecret()
	}
	w.mine[w.sess] = true
	w.seq, w.lostSeq = 0, 0
	w.applied, w.target, w.page, w.by, w.tby = Ver{}, Ver{}, nil, "", ""
	clear(w.resigned)
	w.put(now, &fx)
	return w.timer(now, fx)
}

func (w *Worker) content(closed bool) Session {
	s := Session{V: wireVersion, ID: w.cfg.ID, Session: w.sess, Seq: w.seq + 1, TTL: ttlMillis(w.cfg.LeaderTimeout),
		Applied: w.applied, AppliedBy: w.by, Took: w.target, TookBy: w.tby, Leaving: w.leaving, Closed: closed}
	if w.secret != "" {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", w.secret, s.Seq)))
		s.Nonce = hex.EncodeToString(sum[:8])
	}
	if !closed {
		s.Leads = maps.Clone(w.running)
		maps.Copy(s.Leads, w.starting)
	}
	return s
}

// put writes the session now, or after the write in flight.
func (w *Worker) put(now time.Time, fx *[]Effect) {
	if w.inflight != nil {
		w.wantPut = true
		return
	}
	w.wantPut = false
	closed := w.leaving && len(w.running) == 0
	s := w.content(closed)
	wr := &write{opening: w.st == wOpen, seq: s.Seq, nonce: s.Nonce, closed: closed, news: w.wantNews || closed || w.st == wOpen, listed: maps.Clone(w.starting)}
	w.wantNews = false
	w.inflight = wr
	e := Effect{Op: OpPutSession, Key: w.cfg.ID, Data: Marshal(s), IfMatch: w.etag, Term: w.applied.Era}
	if w.st == wLive {
		e.At = w.deadline // no attempt is sent once the lease is over
	}
	*fx = append(*fx, e)
}

// Tick is a timer that fired.
func (w *Worker) Tick(now time.Time) []Effect {
	var fx []Effect
	switch w.st {
	case wOpen:
		w.open(&fx)
	case wLive:
		if !now.Before(w.deadline) {
			w.end(ErrLeaseOver, &fx)
			break
		}
		if !now.Before(w.nextTick) {
			w.nextTick = now.Add(w.cfg.FrequentInterval)
			w.readPage = true
			w.put(now, &fx)
		} else if now.Before(w.soonTill) && !now.Before(w.nextSoon) && !w.paging {
			w.paging = true
			fx = append(fx, Effect{Op: OpGetPage, Key: w.cfg.ID})
		}
		if now.Before(w.soonTill) && !now.Before(w.nextSoon) {
			w.nextSoon = now.Add(w.cfg.FrequentInterval / 4)
		}
	}
	return w.timer(now, fx)
}

func (w *Worker) timer(now time.Time, fx []Effect) []Effect {
	if w.st == wDone {
		return fx
	}
	at := now.Add(w.cfg.FrequentInterval)
	if w.st == wLive {
		at = w.nextTick
		if w.deadline.Before(at) {
			at = w.deadline
		}
		if now.Before(w.soonTill) && w.nextSoon.Before(at) {
			at = w.nextSoon
		}
	}
	return append(fx, Effect{Op: OpTimer, At: at})
}

// SessionPut is the result of OpPutSession; sent is when its first
// attempt went out.
func (w *Worker) SessionPut(now, sent time.Time, etag string, err error) []Effect {
	var fx []Effect
	wr := w.inflight
	if wr == nil {
		return w.timer(now, fx) // no write in flight: a stray reply
	}
	w.inflight = nil
	if w.st == wOpen && !wr.opening {
		// A write of the session that ended while it was in flight: the
		// new session opens by reading the key afresh.
		w.open(&fx)
		return w.timer(now, fx)
	}
	switch {
	case err == nil:
		if w.st == wLive && !now.Before(w.deadline) {
			// The lease in force ran out before this reply came (a
			// paused process, a reply that took long): the coordinator
			// may have given the shards away; a later lease is no use.
			w.end(ErrLeaseOver, &fx)
			break
		}
		w.etag, w.seq, w.nonce = etag, wr.seq, wr.nonce
		if w.st == wOpen {
			w.st = wLive
			w.nextTick = now.Add(w.cfg.FrequentInterval)
			w.readPage = true
		}
		if w.st != wLive {
			break
		}
		if wr.seq == w.lostSeq && w.lostSent.Before(sent) {
			sent = w.lostSent
		}
		w.lostSeq = 0
		w.deadline = sent.Add(w.cfg.LeaderTimeout - w.margin)
		if !now.Before(w.deadline) {
			w.end(ErrLeaseOver, &fx) // the reply came after the lease it gave
			break
		}
		if wr.closed {
			w.st = wDone
			return append(fx, Effect{Op: OpPutNews, Key: w.cfg.ID, Data: Marshal(Session{V: wireVersion, ID: w.cfg.ID, Session: w.sess, Seq: w.seq, Closed: true})},
				Effect{Op: OpClosed})
		}
		if len(w.running) > 0 {
			fx = append(fx, Effect{Op: OpExtend, At: w.deadline})
		}
		for _, sh := range sortedKeys(wr.listed) {
			if t, ok := w.starting[sh]; ok && t == wr.listed[sh] {
				delete(w.starting, sh)
				w.running[sh] = t
				w.started[sh] = t
				fx = append(fx, Effect{Op: OpStart, Shard: sh, Term: t, At: w.deadline})
			}
		}
		if wr.news {
			fx = append(fx, Effect{Op: OpPutNews, Key: w.cfg.ID, Data: Marshal(Session{V: wireVersion, ID: w.cfg.ID, Session: w.sess, Seq: w.seq})})
		}
		if w.readPage && !w.paging {
			w.readPage, w.paging = false, true
			fx = append(fx, Effect{Op: OpGetPage, Key: w.cfg.ID})
		}
		if w.wantPut || len(w.starting) > 0 || w.leaving && len(w.running) == 0 {
			w.put(now, &fx)
		}
	case errors.Is(err, store.ErrPreconditionFailed):
		// Another write took the object: this session is over.
		if w.st == wLive {
			w.end(ErrSessionLost, &fx)
		} else if w.st == wOpen {
			w.open(&fx)
		}
	default:
		// Unknown outcome: the lease runs on; the next tick writes again.
		w.wantNews = w.wantNews || wr.news
		if w.lostSeq != wr.seq {
			w.lostSeq, w.lostSent = wr.seq, sent
		}
	}
	return w.timer(now, fx)
}

// NewsPut is the result of OpPutNews: a news write that failed is made
// again after the next session write.
func (w *Worker) NewsPut(now time.Time, err error) []Effect {
	if err != nil && w.st == wLive {
		w.wantNews = true
	}
	return nil
}

// end ends the session, its lease over (ErrLeaseOver) or its object
// taken by another write (ErrSessionLost): every leadership ends now,
// and a new session opens once their Work has returned.
func (w *Worker) end(cause error, fx *[]Effect) {
	w.stopAll(cause, fx)
	w.sess = ""
	w.st = wEnding
	w.checkDup = w.checkDup || cause == ErrSessionLost
	w.wantPut, w.readPage, w.wantNews = false, false, false
	w.reopen(fx)
}

// stopAll ends every leadership that has not ended, for cause, and drops
// the shards waiting to start.
func (w *Worker) stopAll(cause error, fx *[]Effect) {
	for _, sh := range sortedKeys(w.running) {
		if !w.stopping[sh] {
			w.stopping[sh] = true
			*fx = append(*fx, Effect{Op: OpStop, Shard: sh, Err: cause})
		}
	}
	clear(w.starting)
}

func (w *Worker) reopen(fx *[]Effect) {
	if w.st == wEnding && len(w.running) == 0 {
		w.open(fx)
	}
}

// PageRead is the result of OpGetPage.
func (w *Worker) PageRead(now time.Time, data []byte, etag string, err error) []Effect {
	var fx []Effect
	w.paging = false
	if err != nil || etag == "" || w.st != wLive {
		return w.timer(now, fx)
	}
	p, perr := ParsePage(data, w.cfg.ID)
	if perr != nil || p.Session != w.sess || !w.target.Less(p.Ver) {
		return w.timer(now, fx)
	}
	w.target, w.page, w.tby = p.Ver, p.Shards, p.By
	if p.Soon {
		w.soonTill, w.nextSoon = now.Add(w.cfg.LeaderTimeout+w.cfg.FrequentInterval), now.Add(w.cfg.FrequentInterval/4)
	}
	clear(w.resigned)
	for _, sh := range sortedKeys(w.running) {
		if t, ok := w.page[sh]; (!ok || t != w.running[sh]) && !w.stopping[sh] {
			w.stopping[sh] = true
			fx = append(fx, Effect{Op: OpStop, Shard: sh})
		}
	}
	w.settle()
	w.put(now, &fx)
	return w.timer(now, fx)
}

// settle lists the target page's shards that do not run (none once
// leaving: a leaving worker takes pages, so that its session says so, but
// starts nothing), and acknowledges the page once no release is draining.
func (w *Worker) settle() {
	clear(w.starting)
	for sh, t := range w.page {
		if w.leaving {
			break
		}
		if _, ok := w.running[sh]; !ok && !w.resigned[sh] && t > w.started[sh] {
			w.starting[sh] = t
		}
	}
	if len(w.stopping) == 0 && w.applied != w.target {
		w.applied, w.by = w.target, w.tby
		w.wantNews = true
	}
}

// WorkDone reports that shard's Work returned.
func (w *Worker) WorkDone(now time.Time, shard string) []Effect {
	var fx []Effect
	if _, ok := w.running[shard]; !ok {
		return w.timer(now, fx)
	}
	was := w.stopping[shard]
	delete(w.running, shard)
	delete(w.stopping, shard)
	switch {
	case w.st == wLive && w.leaving:
		if len(w.running) == 0 {
			w.put(now, &fx)
		}
	case w.st == wLive:
		if !was {
			w.resigned[shard] = true // Work returned by itself: given up until a newer page
		}
		w.settle()
		w.wantNews = true
		w.put(now, &fx)
	case w.st == wEnding:
		w.reopen(&fx)
	}
	return w.timer(now, fx)
}

// Leave ends the worker: its shards' leaderships end, and once their
// Work has returned the session is closed (its last write lists nothing).
func (w *Worker) Leave(now time.Time) []Effect {
	var fx []Effect
	if w.leaving || w.st == wDone {
		return fx
	}
	w.leaving = true
	w.stopAll(nil, &fx)
	switch {
	case w.st == wLive && len(w.running) == 0:
		w.put(now, &fx)
	case w.st != wLive && len(w.running) == 0 && !w.reading && w.inflight == nil:
		w.st = wDone
		fx = append(fx, Effect{Op: OpClosed})
	}
	return w.timer(now, fx)
}
