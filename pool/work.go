package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/shardlead"
	"github.com/s3lect/s3lect/pool/internal/coord"
	"github.com/s3lect/s3lect/store"
)

// runner is the one goroutine that owns a core (a worker's or a
// coordinator's): store calls run in goroutines of their own and send
// their results back to it as functions to run.
type runner struct {
	ev    chan func()
	quit  chan struct{} // closed when the loop ends: results are dropped
	calls sync.WaitGroup
	timer *time.Timer
	ctx   context.Context // the store calls'
	store *lease.Calls
	seen  map[string]lease.Sighting // the objects this loop writes, as it last wrote or read them
}

func newRunner(ctx context.Context, calls *lease.Calls) *runner {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &runner{ev: make(chan func()), quit: make(chan struct{}), timer: t, ctx: ctx, store: calls, seen: map[string]lease.Sighting{}}
}

// async runs call in a goroutine and hands its result, the function it
// returns, to the loop.
func (r *runner) async(call func() func()) {
	r.calls.Go(func() {
		f := call()
		select {
		case r.ev <- f:
		case <-r.quit:
		}
	})
}

// stop ends the loop's side: calls in flight are dropped, and waited for.
func (r *runner) stop() {
	close(r.quit)
	r.timer.Stop()
	r.calls.Wait()
}

// get reads key and hands the result to then, in the loop.
func (r *runner) get(key string, then func(data []byte, etag string, err error)) {
	r.async(func() func() {
		data, etag, err := r.store.Get(r.ctx, key)
		return func() { then(data, etag, err) }
	})
}

// getSeen is get of an object this loop writes: what a read returned is
// what the next write goes over (put).
func (r *runner) getSeen(key string, then func(data []byte, etag string, err error)) {
	r.get(key, func(data []byte, etag string, err error) {
		if err == nil {
			r.seen[key] = lease.Sight(data, etag)
		}
		then(data, etag, err)
	})
}

// put writes data to key with If-Match ifMatch (over the object as this
// loop last saw it, if it saw it at that ETag), sending no attempt from
// notAfter on if it is not zero, and hands the result to then, in the
// loop.
func (r *runner) put(key string, data []byte, ifMatch string, notAfter time.Time, then func(etag string, err error)) {
	over := r.seen[key]
	if over.ETag != ifMatch {
		over = lease.Sighting{ETag: ifMatch} // not as this loop saw it: go over the ETag alone
	}
	r.async(func() func() {
		etag, _, err := r.store.Put(r.ctx, key, data, over, notAfter)
		return func() {
			if err == nil {
				r.seen[key] = lease.Sight(data, etag)
			}
			then(etag, err)
		}
	})
}

// workLoop is this worker's side while Run runs: its core, and what the
// core's effects need between events. Only the loop's goroutine touches
// it, but for lastNews.
type workLoop struct {
	p        *Pool
	w        *coord.Worker
	r        *runner
	key      string // the session object's
	leads    shardlead.Factory[*s3lect.Leadership]
	runs     map[string]shardlead.Control
	newsTag  string
	lastNews atomic.Pointer[string] // the ETag of a news write that succeeded last, set by its call
	pageTag  string                 // the ETag of this worker's page as last read
	noted    uint64                 // the highest era handed to the election (NoteTerm)
	result   error
	done     bool
}

// work runs this worker's side until its session is closed (after ctx
// ends) or it finds a duplicate.
func (p *Pool) work(ctx context.Context) error {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	l := &workLoop{p: p, r: newRunner(cctx, &p.calls), key: p.sessionKey(p.cfg.ID), leads: newLeaderships(p.clock), runs: map[string]shardlead.Control{}}
	l.w = coord.NewWorker(coord.WorkerConfig{ID: p.cfg.ID, FrequentInterval: p.cfg.FrequentInterval, LeaderTimeout: p.cfg.LeaderTimeout,
		NewSession: func() string {
			p.sessions.Add(1)
			return lease.NewID()
		}, NewSecret: lease.NewID})
	l.do(l.w.Start(p.clock.Now()))
	leave := ctx.Done()
	for !l.done {
		select {
		case f := <-l.r.ev:
			f()
		case <-l.r.timer.C:
			l.do(l.w.Tick(p.clock.Now()))
		case <-leave:
			leave = nil
			l.do(l.w.Leave(p.clock.Now()))
		}
	}
	l.r.stop() // the calls in flight (the closing news) finish first
	if news := l.lastNews.Load(); p.cfg.PeerMode && l.result == nil && news != nil {
		// Tell the coordinator that the session closed (its news changed):
		// it reads the session at once, and its long-polling takers get
		// the shards as their pages are written (4.8), instead of at its
		// next listing.
		p.sendReport(cctx, report{ID: p.cfg.ID, Session: l.r.seen[l.key].ETag, News: *news})
	}
	return l.result
}

// do carries out the worker core's effects.
func (l *workLoop) do(fx []coord.Effect) {
	now := l.p.clock.Now
	for _, e := range fx {
		switch e.Op {
		case coord.OpTimer:
			// A Go timer runs on the monotonic clock, which a host
			// suspend stops: the core looks at the clock (which
			// counts the suspend) at least every lease.Tick, so that
			// the leaderships end within LeaderTimeout/20 of a resume
			// that finds the lease over (docs/pool-protocol.md, 3).
			l.r.timer.Reset(max(min(l.p.clock.RealUntil(e.At), lease.Tick(l.p.cfg.LeaderTimeout)), 0))
		case coord.OpGetSession:
			l.r.getSeen(l.key, func(data []byte, etag string, err error) { l.do(l.w.SessionRead(now(), data, etag, err)) })
		case coord.OpPutSession:
			if e.Term > l.noted {
				// The election's next term goes above every era this
				// worker applied, even if its objects were put back to
				// earlier terms (docs/pool-protocol.md, 4.6). A page is
				// applied once its revoked shards drain, maybe long after
				// it was read: the write that says so names its era.
				l.noted = e.Term
				l.p.el.NoteTerm(l.noted)
			}
			sent := now()
			l.r.put(l.key, e.Data, e.IfMatch, e.At, func(etag string, err error) { l.do(l.w.SessionPut(now(), sent, etag, err)) })
		case coord.OpPutNews:
			l.putNews(e.Data)
		case coord.OpGetPage:
			l.getPage()
		case coord.OpStart:
			l.start(e.Shard, e.Term, e.At)
		case coord.OpStop:
			l.stop(e.Shard, e.Err)
		case coord.OpExtend:
			for _, sh := range slices.Sorted(maps.Keys(l.runs)) {
				l.runs[sh].Extend(e.At)
			}
		case coord.OpClosed:
			l.done = true
		case coord.OpFail:
			l.done = true
			l.result = fmt.Errorf("%w: another process writes session %q; give every worker of the pool a unique ID (Config.ID)", ErrDuplicateID, l.key)
		}
	}
}

// putNews writes the worker's news object in a goroutine (writeNews).
func (l *workLoop) putNews(data []byte) {
	tag := l.newsTag
	l.r.async(func() func() {
		etag, err := l.p.writeNews(l.r.ctx, data, tag)
		if err == nil {
			l.lastNews.Store(&etag)
		}
		return func() {
			if err == nil {
				l.newsTag = etag
			}
			l.do(l.w.NewsPut(l.p.clock.Now(), err))
		}
	})
}

// writeNews writes the worker's news object over whatever it holds: it
// only tells the coordinator when to read the session.
func (p *Pool) writeNews(ctx context.Context, data []byte, tag string) (string, error) {
	key := p.newsKey(p.cfg.ID)
	for range 2 {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.FrequentInterval)
		etag, err := p.cfg.Store.PutIfMatch(cctx, key, data, tag)
		cancel()
		p.count("put", err)
		if !errors.Is(err, store.ErrPreconditionFailed) {
			return etag, err
		}
		if _, tag, err = p.calls.Get(ctx, key); err != nil {
			return "", err
		}
	}
	return "", store.ErrPreconditionFailed
}

// getPage reads this worker's page; in peer mode it reports its objects
// to the coordinator first, and reads nothing if the answer names the
// page it last read.
func (l *workLoop) getPage() {
	p, w := l.p, l.w
	rep := report{ID: p.cfg.ID, Session: l.r.seen[l.key].ETag, News: l.newsTag, Nonce: w.Nonce(), Page: l.pageTag, Wait: reportWait(p.cfg.FrequentInterval).Milliseconds()}
	l.r.async(func() func() {
		if p.cfg.PeerMode {
			if tag, ok := p.sendReport(l.r.ctx, rep); ok && tag == rep.Page && tag != "" {
				return func() { l.do(w.PageRead(p.clock.Now(), nil, "", errPageUnchanged)) }
			}
		}
		data, etag, err := p.calls.Get(l.r.ctx, p.pageKey(p.cfg.ID))
		return func() {
			if err == nil {
				l.pageTag = etag
			}
			l.do(w.PageRead(p.clock.Now(), data, etag, err))
		}
	})
}

// start runs shard's Work at term, its lease ending at deadline.
func (l *workLoop) start(shard string, term uint64, deadline time.Time) {
	lead, ctl := l.leads(l.r.ctx, term, deadline, func() {})
	l.runs[shard] = ctl
	l.p.setLeading(shard, true)
	l.p.starts.Add(1)
	l.r.calls.Go(func() {
		l.p.cfg.Work(lead.Context(), shard, lead)
		l.r.ev <- func() { // the loop waits for every Work: never dropped
			ctl.Exit(nil)
			delete(l.runs, shard)
			l.p.setLeading(shard, false)
			l.do(l.w.WorkDone(l.p.clock.Now(), shard))
		}
	})
}

// stop ends shard's leadership (its Work drains) for the core's reason:
// the lease over, the session lost, or else revoked by the coordinator
// or Run's end.
func (l *workLoop) stop(shard string, why error) {
	ctl := l.runs[shard]
	if ctl == nil {
		return
	}
	l.p.stops.Add(1)
	l.p.setLeading(shard, false)
	cause := s3lect.ErrResigned
	switch {
	case errors.Is(why, coord.ErrLeaseOver):
		cause = s3lect.ErrLeaseExpired
	case errors.Is(why, coord.ErrSessionLost):
		cause = s3lect.ErrLeadershipLost
	}
	ctl.End(cause)
}

func (p *Pool) setLeading(shard string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.leading[shard] = true
	} else {
		delete(p.leading, shard)
	}
	p.owned.Store(int64(len(p.leading)))
}
