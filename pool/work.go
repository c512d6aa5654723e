package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
}

func newRunner() *runner {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &runner{ev: make(chan func()), quit: make(chan struct{}), timer: t}
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

// work runs this worker's side until its session is closed (after ctx
// ends) or it finds a duplicate.
func (p *Pool) work(ctx context.Context) error {
	el := p.el
	w := coord.NewWorker(coord.WorkerConfig{ID: p.cfg.ID, FrequentInterval: p.cfg.FrequentInterval, LeaderTimeout: p.cfg.LeaderTimeout,
		NewSession: func() string {
			p.sessions.Add(1)
			return lease.NewID()
		}, NewSecret: lease.NewID})
	r := newRunner()
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	leads := newLeaderships(p.clock)
	runs := map[string]shardlead.Control{}
	key := p.sessionKey(p.cfg.ID)
	var sess lease.Sighting // the session object as last written or read
	newsTag := ""
	var lastNews atomic.Pointer[string] // the ETag of a news write that succeeded last, set by its call
	pageTag := ""                       // the ETag of this worker's page as last read
	var noted uint64                    // the highest era handed to the election (NoteTerm)
	var result error
	done := false
	var do func([]coord.Effect)
	do = func(fx []coord.Effect) {
		for _, e := range fx {
			switch e.Op {
			case coord.OpTimer:
				// A Go timer runs on the monotonic clock, which a host
				// suspend stops: the core looks at the clock (which
				// counts the suspend) at least every lease.Tick, so that
				// the leaderships end within LeaderTimeout/20 of a resume
				// that finds the lease over (docs/pool-protocol.md, 3).
				r.timer.Reset(max(min(p.clock.RealUntil(e.At), lease.Tick(p.cfg.LeaderTimeout)), 0))
			case coord.OpGetSession:
				r.async(func() func() {
					data, etag, err := p.calls.Get(cctx, key)
					return func() {
						if err == nil {
							sess = lease.Sight(data, etag)
						}
						do(w.SessionRead(p.clock.Now(), data, etag, err))
					}
				})
			case coord.OpPutSession:
				over, data, notAfter, sent := writeOver(sess, e.IfMatch), e.Data, e.At, p.clock.Now()
				r.async(func() func() {
					etag, _, err := p.calls.Put(cctx, key, data, over, notAfter)
					return func() {
						if err == nil {
							sess = lease.Sight(data, etag)
						}
						do(w.SessionPut(p.clock.Now(), sent, etag, err))
					}
				})
			case coord.OpPutNews:
				data, tag := e.Data, newsTag
				r.async(func() func() {
					etag, err := p.putNews(cctx, data, tag)
					if err == nil {
						lastNews.Store(&etag)
					}
					return func() {
						if err == nil {
							newsTag = etag
						}
						do(w.NewsPut(p.clock.Now(), err))
					}
				})
			case coord.OpGetPage:
				rep, last := report{ID: p.cfg.ID, Session: sess.ETag, News: newsTag, Nonce: w.Nonce(), Page: pageTag, Wait: (p.cfg.FrequentInterval * 3 / 4).Milliseconds()}, pageTag
				r.async(func() func() {
					if p.cfg.PeerMode {
						if tag, ok := p.sendReport(cctx, rep); ok && tag == last && tag != "" {
							return func() { do(w.PageRead(p.clock.Now(), nil, "", errPageUnchanged)) }
						}
					}
					data, etag, err := p.calls.Get(cctx, p.pageKey(p.cfg.ID))
					return func() {
						if err == nil {
							pageTag = etag
						}
						do(w.PageRead(p.clock.Now(), data, etag, err))
						if _, v := w.Session(); v.Era > noted {
							// The election's next term goes above every era this
							// worker applied, even if its objects were put back
							// to earlier terms (docs/pool-protocol.md, 4.6).
							noted = v.Era
							el.NoteTerm(noted)
						}
					}
				})
			case coord.OpStart:
				shard := e.Shard
				l, ctl := leads(cctx, e.Term, e.At, func() {})
				runs[shard] = ctl
				p.setLeading(shard, true)
				p.starts.Add(1)
				r.calls.Go(func() {
					p.cfg.Work(l.Context(), shard, l)
					r.ev <- func() { // the loop waits for every Work: never dropped
						ctl.Exit(nil)
						delete(runs, shard)
						p.setLeading(shard, false)
						do(w.WorkDone(p.clock.Now(), shard))
					}
				})
			case coord.OpStop:
				if ctl := runs[e.Shard]; ctl != nil {
					p.stops.Add(1)
					p.setLeading(e.Shard, false)
					cause := s3lect.ErrResigned // revoked by the coordinator, or Run ends
					switch {
					case errors.Is(e.Err, coord.ErrLeaseOver):
						cause = s3lect.ErrLeaseExpired
					case errors.Is(e.Err, coord.ErrSessionLost):
						cause = s3lect.ErrLeadershipLost
					}
					ctl.End(cause)
				}
			case coord.OpExtend:
				for _, sh := range slices.Sorted(maps.Keys(runs)) {
					runs[sh].Extend(e.At)
				}
			case coord.OpClosed:
				done = true
			case coord.OpFail:
				done = true
				result = fmt.Errorf("%w: another process writes session %q; give every worker of the pool a unique ID (Config.ID)", ErrDuplicateID, key)
			}
		}
	}
	do(w.Start(p.clock.Now()))
	leave := ctx.Done()
	for !done {
		select {
		case f := <-r.ev:
			f()
		case <-r.timer.C:
			do(w.Tick(p.clock.Now()))
		case <-leave:
			leave = nil
			do(w.Leave(p.clock.Now()))
		}
	}
	r.stop() // the calls in flight (the closing news) finish first
	if news := lastNews.Load(); p.cfg.PeerMode && result == nil && news != nil {
		// Tell the coordinator that the session closed (its news changed):
		// it reads the session at once, and its long-polling takers get
		// the shards as their pages are written (4.8), instead of at its
		// next listing.
		p.sendReport(cctx, report{ID: p.cfg.ID, Session: sess.ETag, News: *news})
	}
	cancel()
	return result
}

// putNews writes the worker's news object over whatever it holds: it
// only tells the coordinator when to read the session.
func (p *Pool) putNews(ctx context.Context, data []byte, tag string) (string, error) {
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

// coordinate campaigns for the pool's coordinator, and coordinates while
// it leads, until ctx ends or the worker's side is done.
func (p *Pool) coordinate(ctx context.Context, wdone <-chan struct{}) {
	el := p.el
	for ctx.Err() == nil {
		lead, err := el.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("coordinator campaign failed", "err", err)
			select {
			case <-time.After(p.cfg.FrequentInterval):
			case <-ctx.Done():
			}
			continue
		}
		stepped := p.lead(lead, wdone)
		rctx, cancel := context.WithTimeout(context.Background(), p.cfg.FrequentInterval)
		lead.Resign(rctx)
		cancel()
		select {
		case <-wdone:
			return
		default:
		}
		if stepped {
			// A coordinator that stepped down stands out of the election
			// for a lease, as the simulation's procs do: one that reaches
			// the election but not the pool's objects would win again at
			// once (docs/pool-protocol.md, 4.5).
			select {
			case <-wdone:
				return
			case <-time.After(p.cfg.LeaderTimeout):
			case <-ctx.Done():
				return
			}
		}
	}
}

// lead runs one era of the coordinator, until the leadership ends, the
// core steps down or the worker's side is done. It reports whether the
// core stepped down.
func (p *Pool) lead(lead *s3lect.Leadership, wdone <-chan struct{}) (stepped bool) {
	term := lead.Term()
	if term >= 1<<32 {
		p.log.Error("the coordinator's election term is at 2^32: shard terms would not fit; delete the coordinator's lockfile and term object to start again", "term", term)
		return true
	}
	p.coordEra.Store(term)
	p.coordinating.Store(true)
	defer p.coordinating.Store(false)
	p.log.Info("coordinating the pool", "term", term)
	cc := coord.CoordConfig{Shards: p.shardList(), FrequentInterval: p.cfg.FrequentInterval, LeaderTimeout: p.cfg.LeaderTimeout, Mark: lease.NewID()}
	if p.cfg.PeerMode {
		// Reports take the listing's place; it only finds the workers
		// that cannot report, and keeps a store call within every half
		// lease (a coordinator whose calls all failed for a lease steps
		// down).
		cc.ListEvery = p.cfg.LeaderTimeout / 2
	}
	c := coord.NewCoordinator(cc, term)
	lctx := lead.Context()
	r := newRunner()
	defer r.stop()
	pages := map[string]lease.Sighting{}
	var roster lease.Sighting // the roster of departed workers as last read or written
	down := false
	var do func([]coord.Effect)
	do = func(fx []coord.Effect) {
		for _, e := range fx {
			if lctx.Err() != nil {
				return // no call once the leadership is over
			}
			switch e.Op {
			case coord.OpTimer:
				r.timer.Reset(max(p.clock.RealUntil(e.At), 0))
			case coord.OpList:
				r.async(func() func() {
					m, err := p.listWorkers(lctx)
					return func() {
						do(c.Listed(p.clock.Now(), m, err))
						p.warnETagForms(c)
					}
				})
			case coord.OpGetSession:
				id := e.Key
				r.async(func() func() {
					data, etag, err := p.calls.Get(lctx, p.sessionKey(id))
					return func() { do(c.SessionRead(p.clock.Now(), id, data, etag, err)) }
				})
			case coord.OpGetPage:
				id := e.Key
				r.async(func() func() {
					data, etag, err := p.calls.Get(lctx, p.pageKey(id))
					return func() {
						if err == nil {
							pages[id] = lease.Sight(data, etag)
						}
						do(c.PageRead(p.clock.Now(), id, data, etag, err))
					}
				})
			case coord.OpPutPage:
				id, data := e.Key, e.Data
				over := writeOver(pages[id], e.IfMatch)
				r.async(func() func() {
					etag, _, err := p.calls.Put(lctx, p.pageKey(id), data, over, time.Time{})
					return func() {
						if err == nil {
							pages[id] = lease.Sight(data, etag)
						}
						do(c.PagePut(p.clock.Now(), id, etag, err))
					}
				})
			case coord.OpGetRoster:
				r.async(func() func() {
					data, etag, err := p.calls.Get(lctx, p.rosterKey())
					return func() {
						if err == nil {
							roster = lease.Sight(data, etag)
						}
						do(c.RosterRead(p.clock.Now(), data, etag, err))
					}
				})
			case coord.OpPutRoster:
				data, over := e.Data, writeOver(roster, e.IfMatch)
				r.async(func() func() {
					etag, _, err := p.calls.Put(lctx, p.rosterKey(), data, over, time.Time{})
					return func() {
						if err == nil {
							roster = lease.Sight(data, etag)
						}
						do(c.RosterPut(p.clock.Now(), etag, err))
					}
				})
			case coord.OpStepDown:
				p.log.Warn("the coordinator steps down", "term", term, "err", e.Err)
				down = true
				if e.Term > 0 {
					p.el.NoteTerm(e.Term) // the next election starts above the later era (4.6)
				}
			}
		}
	}
	do(c.Tick(p.clock.Now()))
	var grace <-chan time.Time
	parked := map[string]parkedReq{} // reports waiting for their page to change (4.8)
	var wake *time.Timer
	var woken <-chan time.Time
	defer func() {
		if wake != nil {
			wake.Stop()
		}
		for _, rq := range parked {
			rq.reply <- reportAnswer{} // not answered: the worker reads its page
		}
	}()
	for !down {
		if next := flush(c, p.clock.Now(), parked); next.IsZero() {
			woken = nil
		} else {
			if wake == nil {
				wake = time.NewTimer(0)
			}
			wake.Reset(max(p.clock.RealUntil(next), 0))
			woken = wake.C
		}
		select {
		case <-woken:
		case f := <-r.ev:
			f()
		case <-r.timer.C:
			do(c.Tick(p.clock.Now()))
		case rq := <-p.reports:
			do(answer(c, p.clock.Now(), rq, parked))
		case <-p.reshard:
			c.SetShards(p.shardList())
			do(c.Tick(p.clock.Now()))
		case <-lctx.Done():
			return false
		case <-wdone:
			// This worker has closed its session: coordinate two more
			// intervals, so that its shards go to the others before the
			// election starts a new era (which waits a lease).
			wdone, grace = nil, time.After(2*p.cfg.FrequentInterval)
		case <-grace:
			return false
		}
	}
	return true
}

// writeOver is what a write with If-Match ifMatch goes over: last, the object
// as this process last wrote or read it, if it is at that ETag.
func writeOver(last lease.Sighting, ifMatch string) lease.Sighting {
	if last.ETag != ifMatch {
		return lease.Sighting{ETag: ifMatch}
	}
	return last
}

// cutKey returns the worker ID of a key dir/<ID>.json.
func cutKey(rel, dir string) (string, bool) {
	id, ok := strings.CutPrefix(rel, dir)
	if !ok {
		return "", false
	}
	id, ok = strings.CutSuffix(id, ".json")
	return id, ok && id != "" && !strings.Contains(id, "/")
}
