package coord

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/s3lect/s3lect/store"
)

// CoordConfig configures a Coordinator.
type CoordConfig struct {
	Shards           []string
	FrequentInterval time.Duration
	LeaderTimeout    time.Duration
	// Mark is this era's mark on its pages (Page.By): random, never drawn
	// before (the executor draws 128 bits).
	Mark string
	// ListEvery is how often the coordinator lists the workers after its
	// era's first listing; 0: every FrequentInterval. In peer mode the
	// workers' reports (Reported) take the listing's place, and it only
	// finds the workers that cannot report.
	ListEvery time.Duration
}

// view is a live session as the coordinator last read it.
type view struct {
	session string
	seq     uint64
	etag    string
	prev    string        // the ETag a read returned of it before etag ("" none)
	wait    time.Duration // how long its object must stand unchanged: max(own LeaderTimeout, ttl)
	applied Ver
	took    Ver // the page taken (Session.Took), at or above applied
	leaving bool
	leads   map[string]uint64
	since   time.Time // when a read first showed it (this era, or since revived)
	// need: until the session has taken a page at or above it, it may
	// hold any shard. Read before every key of the era's first listing
	// was, a session may still apply a page of an earlier era that this
	// one never saw; a session revived (4.3) may lead what its ghost held.
	need Ver
}

// seqOr is the view's seq, 0 without a view.
func (v *view) seqOr() uint64 {
	if v == nil {
		return 0
	}
	return v.seq
}

type pageState struct {
	read    bool   // read in this era
	old     string // the session a page of an earlier era read on this key names
	etag    string // as last written or read
	session string // the session the latest shards are for
	shards  map[string]uint64
	hist    []histEntry // pages written for session above the version it took
	writing bool
	dirty   bool      // the last write's outcome is unknown: write again
	wrote   time.Time // the last write's success
}

type histEntry struct {
	ver    Ver
	shards map[string]uint64
}

type key struct {
	sight   string    // the session object's ETag, last seen ("" absent)
	seen    time.Time // when sight was first seen
	news    string
	cur     *view
	gone    map[string]uint64 // sessions over on this key: the highest seq read of each (closed: max)
	getting bool
	getAt   time.Time // when the read in flight was asked for
	wantGet bool
	paging  bool
	page    pageState
	// departed: the key holds a closed session (the roster or a read says
	// so); it is not read at an era's start, nor in the listings' turn.
	departed bool
	skipped  bool // departed at the era's first listing: never read at its start
	// listed is an ETag a listing showed, first at listedAt, that no read
	// has returned yet ("" when none).
	listed     string
	listedAt   time.Time
	listedSent time.Time // the send of the listing that first showed a write no read has returned since
	sentSeq    uint64    // the seq of the session in view when the listing in flight was sent
	listedSeq  uint64    // the same for the listing at listedSent
	unread     int       // listed ETags a later listing replaced before a read returned them
	readTag    string    // the ETag the last read of this era returned
	readAt     time.Time // when that read returned
	readRaw    string    // the same, in the store's form (etag.go)
	// rnonce is the Nonce the latest report named, first at rAt, for the
	// write at ETag rtag; probed, the one a read was sent for once the
	// reports stopped (4.8). A listing that shows the key at another ETag
	// drops it: the reported write was superseded.
	rnonce, rtag, probed string
	rAt                  time.Time
}

// Coordinator decides the assignment for one era: the term of one
// leadership of the pool's election.
type Coordinator struct {
	cfg      CoordConfig
	term     uint64
	grants   uint64
	n        uint64 // page writes of this era
	lmax     time.Duration
	maxTTL   int64
	keys     map[string]*key
	shards   map[string]bool
	order    []string // cfg.Shards by hash
	rank     map[string]int
	capacity int // shards one page can name
	owner    map[string]string
	ghosts   []ghost
	listing  bool
	listed   bool      // the era's first listing has returned
	allRead  time.Time // every key of the first listing read; zero before
	nextLst  time.Time
	listSent time.Time // the send of the listing in flight, or of the last one
	// The gate (4.1): the era's first grant waits for a listing sent at
	// or after allRead + lmax (gateSent) and a read, sent after it, of
	// every key it showed at an ETag no read of this era had returned
	// (gateKeys); gated once all are in.
	gateSent time.Time
	gateKeys map[string]bool
	gated    bool
	// failing[op] is the send of the first store call of op after the
	// last one of op that succeeded (zero: none since): the era steps
	// down once one of them is LeaderTimeout old while op is still owed
	// (4.5).
	failing [nOps]time.Time
	first   time.Time // the first session seen joining an empty pool
	lastNew time.Time
	down    bool
	later   uint64 // the highest later era a page or session showed (4.6)
	sweep   int
	roster  rosterState
	idx     planIndex // plan's, kept between events (plan.go)
	forms   [2]string // an ETag as listed and as read, in two forms (etag.go)
}

// NewCoordinator returns the coordinator of the era of term, which must
// be below 2^32 (shard terms are term<<32 + a count of the era's grants).
func NewCoordinator(cfg CoordConfig, term uint64) *Coordinator {
	c := &Coordinator{cfg: cfg, term: term, keys: map[string]*key{}, owner: map[string]string{},
		lmax: cfg.LeaderTimeout, maxTTL: ttlMillis(cfg.LeaderTimeout), roster: rosterState{closed: map[string]string{}}}
	c.SetShards(cfg.Shards)
	return c
}

// Term is the era's term.
func (c *Coordinator) Term() uint64 { return c.term }

// Ready reports whether the era decides grants: every session it found at
// its start has taken one of its pages or is over, and a lease has passed
// since it read them.
func (c *Coordinator) Ready(now time.Time) bool {
	if !c.gated || slices.ContainsFunc(c.ghosts, func(g ghost) bool { return g.all }) {
		return false
	}
	for _, k := range c.keys {
		if k.cur != nil && k.cur.took.Less(k.cur.need) {
			return false
		}
		if k.cur == nil && (k.listed != "" || k.unread > 0) && (k.wantGet || k.getting) {
			return false // a write listed on a key with no session in view, its read owed (4.3)
		}
	}
	return true
}

func (c *Coordinator) k(id string) *key {
	k := c.keys[id]
	if k == nil {
		k = &key{gone: map[string]uint64{}}
		c.keys[id] = k
	}
	return k
}

// SessionRead is the result of OpGetSession for worker id.
func (c *Coordinator) SessionRead(now time.Time, id string, data []byte, etag string, err error) []Effect {
	k := c.k(id)
	k.getting = false
	if err != nil || c.down {
		k.wantGet = true
		return c.after(now, nil)
	}
	c.ok(OpGetSession)
	// One form of ETag for listings and reads (etag.go).
	k.readRaw, etag = etag, sameForm(etag)
	if etag != k.sight {
		k.sight, k.seen = etag, now
	}
	k.readTag, k.readAt = etag, now
	if c.gateKeys[id] && !k.getAt.Before(c.gateSent) {
		delete(c.gateKeys, id)
	}
	s, perr := ParseSession(data, id)
	ok := etag != "" && perr == nil && s.Session != ""
	if ok && s.Nonce != "" && s.Nonce == k.rnonce && etag == k.rtag && etag == k.sight && k.rAt.Before(k.seen) && !c.listing {
		// A report named this write's Nonce at rAt, so the write had
		// been sent by then; not while a listing is out, which may show
		// a later write and drop the report (4.8).
		k.seen = k.rAt
	}
	if ok {
		if err := c.foreign(id, s.Applied, s.AppliedBy); err != nil {
			return c.stepDown(now, err)
		}
		if err := c.foreign(id, s.Took, s.TookBy); err != nil {
			return c.stepDown(now, err)
		}
	}
	c.note(id, etag, ok && s.Closed)
	k.departed = ok && s.Closed
	// The writes listings showed that no read returned, since the last
	// read: each may have been a ghost's renewal, written over since,
	// unless the session the key shows, read before, wrote at least as
	// many times between the two reads (4.3).
	n := k.unread
	if k.listed != "" && k.listed != etag {
		n++
	}
	listedSent := k.listedSent
	base := min(k.cur.seqOr(), k.listedSeq) // the view's seq as known when that listing was sent, or since
	unread := n > 0 && !(ok && k.cur != nil && s.Session == k.cur.session && k.cur.since.Before(listedSent) && s.Seq > base && uint64(n) < s.Seq-base)
	if k.getAt.Before(k.listedAt) && k.listed != etag {
		k.wantGet = true // sent before the listing: it cannot answer for its write; read again
	} else {
		k.listed, k.unread = "", 0
	}
	revived := c.readGhosts(now, id, k, s, ok, unread)
	if unread && !revived && !(ok && !s.Closed && k.cur != nil && s.Session == k.cur.session && k.cur.since.Before(listedSent)) {
		// A write listed that no read returned, and the read does not
		// show the session in view going on (in view before that
		// listing was sent: one a read showed while the listing was out
		// may have written over the listed write): it may have been the
		// renewal of a session the era never read (hidden from its
		// start, its last write put back), written over since, maybe
		// after renewing again. Every shard is held for the longest
		// lease from this read's return.
		w := max(c.lmax, time.Duration(c.maxTTL)*time.Millisecond)
		c.ghosts = append(c.ghosts, ghost{id: id, until: now.Add(w), wait: w, holds: map[string]bool{}, all: true})
	}
	switch {
	case ok && k.cur != nil && s.Session == k.cur.session:
		v := k.cur
		if s.Seq < v.seq || s.Seq == v.seq && etag != v.etag {
			c.ghost(now, id, k) // an earlier write put back: a ghost (4.3)
			break
		}
		if etag != v.etag {
			v.prev = v.etag
		}
		v.seq, v.etag, v.leads, v.leaving = s.Seq, etag, s.Leads, s.Leaving
		v.applied = maxVer(v.applied, s.Applied)
		if took := maxVer(s.Applied, s.Took); v.took.Less(took) {
			v.took = took
			k.page.hist = slices.DeleteFunc(k.page.hist, func(e histEntry) bool { return !took.Less(e.ver) })
		}
		if len(k.page.hist) > 0 && !k.page.writing && !k.page.wrote.IsZero() && now.Sub(k.page.wrote) > 2*c.cfg.FrequentInterval {
			// Renewing, but not applying its page: the page may have been
			// deleted or put back. Read it, and write it again.
			k.page.read, k.page.dirty, k.page.wrote = false, true, time.Time{}
		}
		if s.Closed || !k.getAt.Before(k.seen.Add(v.wait)) {
			c.over(k) // closed, or unchanged for its lease by a read sent after it
			if s.Closed {
				k.gone[s.Session] = math.MaxUint64 // it writes no more
			}
		}
	default:
		if k.cur != nil {
			c.ghost(now, id, k)
		}
		if top, over := k.gone[s.Session]; ok && over && !s.Closed && s.Seq > top {
			// A later write of a session this era took to be over: its
			// writes were put back (on S3, its next write then succeeds),
			// and it wrote again. Live again, as a revived ghost (4.3).
			delete(k.gone, s.Session)
			c.newView(now, k, s, etag, true)
		} else if ok && !over {
			c.newView(now, k, s, etag, revived)
		}
	}
	return c.after(now, nil)
}

// newView takes in the live session s that a read of k showed, the
// first of it (or of it revived) in this era.
func (c *Coordinator) newView(now time.Time, k *key, s Session, etag string, revived bool) {
	if s.Closed {
		k.gone[s.Session] = math.MaxUint64
		return
	}
	k.cur = &view{session: s.Session, seq: s.Seq, etag: etag, applied: s.Applied, took: maxVer(s.Applied, s.Took), leads: s.Leads, leaving: s.Leaving,
		wait: max(c.cfg.LeaderTimeout, time.Duration(s.TTL)*time.Millisecond), since: now}
	switch {
	case revived || k.skipped || !c.allRead.IsZero() && !c.gated ||
		s.Applied != (Ver{}) || s.Took != (Ver{}) || len(s.Leads) > 0 || k.page.old == s.Session:
		// Revived; on a key this era did not read at its start (4.7);
		// first read after the era's start and before its gate; or a
		// session that led, or may lead, by a page of an earlier era,
		// hidden from this era's start (4.1). A session opened in this
		// era after its gate has none of these.
		k.cur.need = Ver{c.term, c.n + 1}
	case c.allRead.IsZero():
		k.cur.need = Ver{c.term, 1}
	}
	c.maxTTL = max(c.maxTTL, s.TTL)
	if c.allRead.IsZero() {
		c.lmax = max(c.lmax, k.cur.wait)
	}
	if c.first.IsZero() {
		c.first = now
	}
	c.lastNew = now
	if k.page.session != s.Session {
		k.page.session, k.page.shards, k.page.hist = s.Session, nil, nil
	}
}

// over ends k's live session: closed, or its lease over.
func (c *Coordinator) over(k *key) {
	k.gone[k.cur.session] = k.cur.seq
	k.cur = nil
	k.page.hist = nil
}

// holds adds to into the shards k's live session may lead: those it
// lists, and those of every page written for it above the one it applied;
// it reports whether that session may lead any shard (read at the era's
// start, it may apply a page of an earlier era that this one never saw).
func (c *Coordinator) holds(k *key, into map[string]bool) bool {
	v := k.cur
	for s := range v.leads {
		into[s] = true
	}
	for _, e := range k.page.hist {
		for s := range e.shards {
			into[s] = true
		}
	}
	for s := range k.page.shards {
		into[s] = true
	}
	return v.took.Less(v.need)
}

// PageRead is the result of OpGetPage for worker id.
func (c *Coordinator) PageRead(now time.Time, id string, data []byte, etag string, err error) []Effect {
	k := c.k(id)
	k.paging = false
	if err != nil || c.down {
		return c.after(now, nil)
	}
	c.ok(OpGetPage)
	k.page.read, k.page.etag = true, etag
	if etag != "" {
		if p, perr := ParsePage(data, id); perr == nil {
			if err := c.foreign(id, p.Ver, p.By); err != nil {
				return c.stepDown(now, err)
			}
			if c.allRead.IsZero() {
				c.maxTTL = max(c.maxTTL, p.MaxTTL)
				c.lmax = max(c.lmax, time.Duration(p.MaxTTL)*time.Millisecond)
			}
			if p.Ver.Era < c.term {
				c.learn(id, p)
				k.page.old = p.Session
				if v := k.cur; v != nil && v.session == p.Session && v.took.Less(p.Ver) {
					v.need = Ver{c.term, c.n + 1} // it may still apply that page (4.1)
				}
			}
		}
	}
	return c.after(now, nil)
}

// learn takes from an earlier era's page p, on key id, who led its
// shards and where they go back to, until this era grants: grants give a
// shard back to the worker that had it, and home first (4.4). Hints
// only: a page put back, or left from an earlier session, misplaces
// shards, no more.
func (c *Coordinator) learn(id string, p Page) {
	if c.grants > 0 {
		return
	}
	if c.idx.home == nil {
		c.idx.home = map[string]string{}
	}
	for s := range p.Shards {
		if c.owner[s] == "" {
			c.owner[s] = id
		}
		if h := p.Homes[s]; h != "" && h != id && c.idx.home[s] == "" {
			c.idx.home[s] = h
		}
	}
}

// PagePut is the result of OpPutPage for worker id.
func (c *Coordinator) PagePut(now time.Time, id string, etag string, err error) []Effect {
	k := c.k(id)
	k.page.writing = false
	switch {
	case err == nil:
		c.ok(OpPutPage)
		k.page.etag, k.page.dirty, k.page.wrote = etag, false, now
	case errors.Is(err, store.ErrPreconditionFailed):
		k.page.read, k.page.dirty = false, true // read it again, then write over it
	default:
		k.page.dirty = true
	}
	return c.after(now, nil)
}

// foreign returns an error if a page of version v marked by, read on
// key id or applied by its session, shows that another coordinator
// decides at this era or after it: a later era, or this era's term
// repeated (docs/pool-protocol.md, 4.6).
func (c *Coordinator) foreign(id string, v Ver, by string) error {
	switch {
	case c.term < v.Era:
		if v.Era < 1<<32 {
			c.later = max(c.later, v.Era)
		}
		return fmt.Errorf("worker %q shows a page of era %d, after this era (%d)", id, v.Era, c.term)
	case c.term == v.Era && by != c.cfg.Mark:
		return fmt.Errorf("worker %q shows a page of this era (%d) that another coordinator wrote: the election's term has repeated (its lockfile and term object put back?)", id, c.term)
	}
	return nil
}

// Tick is a timer that fired; the first starts the era.
func (c *Coordinator) Tick(now time.Time) []Effect { return c.after(now, nil) }

// after runs the era's rules once an event has been taken in.
func (c *Coordinator) after(now time.Time, fx []Effect) []Effect {
	if c.down {
		return fx
	}
	if err := c.stuck(now); err != nil {
		return c.stepDown(now, err)
	}
	if !c.roster.read && !c.roster.reading {
		c.roster.reading = true
		fx = append(fx, Effect{Op: OpGetRoster})
	}
	c.ghosts = slices.DeleteFunc(c.ghosts, func(g ghost) bool { return g.done })
	deciding := false // a ghost's wait is over and the read that decides it is not back
	for _, g := range c.ghosts {
		if k := c.keys[g.id]; !now.Before(g.until) && !g.ending {
			k.wantGet = k.wantGet || !k.getting // a fresh read decides
			deciding = true
		}
	}
	gate := !c.allRead.IsZero() && c.gateSent.IsZero() && !now.Before(c.allRead.Add(c.lmax))
	if !c.listing && !deciding && (gate || !now.Before(c.nextLst)) && (c.listed || c.roster.read) {
		// Not while a ghost's deciding read is out: it returns with no
		// listing out, which could show a write it does not (4.3).
		c.listing, c.listSent = true, now
		for _, k := range c.keys {
			k.sentSeq = k.cur.seqOr()
		}
		c.nextLst = now.Add(c.cfg.FrequentInterval)
		if c.listed && c.cfg.ListEvery > 0 {
			c.nextLst = now.Add(c.cfg.ListEvery)
		}
		fx = append(fx, Effect{Op: OpList})
	}
	if c.listed && c.allRead.IsZero() {
		done := true
		for _, k := range c.keys {
			if !k.departed && (k.wantGet || k.getting || !k.page.read) {
				done = false
			}
		}
		if done {
			c.allRead = now
			c.hidden(now)
		}
	}
	for _, id := range sortedKeys(c.keys) {
		k := c.keys[id]
		if k.cur != nil && !now.Before(k.seen.Add(k.cur.wait)) && !k.getting {
			k.wantGet = true // its lease may be over: a fresh read decides
		}
		if k.cur != nil && k.rnonce != "" && k.probed != k.rnonce && !now.Before(k.rAt.Add(c.late(k))) && !k.getting {
			k.probed, k.wantGet = k.rnonce, true // its reports stopped: read it, to count from the last one
		}
		if k.wantGet && !k.getting {
			k.wantGet, k.getting, k.getAt = false, true, now
			fx = append(fx, Effect{Op: OpGetSession, Key: id})
		}
		if !k.page.read && !k.paging && !k.page.writing && !k.departed {
			k.paging = true
			fx = append(fx, Effect{Op: OpGetPage, Key: id})
		}
	}
	if !c.gateSent.IsZero() && len(c.gateKeys) == 0 {
		c.gated = true
	}
	fx = c.plan(now, fx)
	fx = c.rosterWrite(now, fx)
	return c.timer(now, fx)
}

func (c *Coordinator) timer(now time.Time, fx []Effect) []Effect {
	for _, e := range fx {
		if e.Op != OpStepDown && e.Op != OpTimer && c.failing[e.Op].IsZero() {
			c.failing[e.Op] = now // every other effect of the coordinator is a store call
		}
	}
	at := c.nextLst
	if c.listing || !at.After(now) {
		at = now.Add(c.cfg.FrequentInterval)
	}
	soon := func(t time.Time) {
		if t.After(now) && t.Before(at) {
			at = t
		}
	}
	for _, k := range c.keys {
		if k.cur != nil {
			soon(k.seen.Add(k.cur.wait))
			if k.rnonce != "" && k.probed != k.rnonce {
				soon(k.rAt.Add(c.late(k)))
			}
		}
	}
	for _, g := range c.ghosts {
		soon(g.until)
	}
	if !c.allRead.IsZero() {
		soon(c.allRead.Add(c.lmax))
	}
	if !c.first.IsZero() {
		soon(c.lastNew.Add(c.cfg.FrequentInterval))
		soon(c.first.Add(c.cfg.LeaderTimeout))
	}
	return append(fx, Effect{Op: OpTimer, At: at})
}

// late is how long after a worker's last report its next one is overdue:
// half its lease, or a FrequentInterval and a quarter if longer.
func (c *Coordinator) late(k *key) time.Duration {
	return max(c.cfg.FrequentInterval*5/4, k.cur.wait/2)
}
