package pool

import (
	"context"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/pool/internal/coord"
)

// coordinate campaigns for the pool's coordinator, and coordinates while
// it leads, until ctx ends or the worker's side is done.
func (p *Pool) coordinate(ctx context.Context, wdone <-chan struct{}) {
	for ctx.Err() == nil {
		lead, err := p.el.Campaign(ctx)
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
	ctx, cancel := context.WithCancel(lead.Context())
	defer cancel()
	e := &era{p: p, c: coord.NewCoordinator(cc, term), r: newRunner(eraCtx{ctx, lead.Context()}, &p.calls), cancel: cancel, parked: map[string]reportReq{}}
	defer e.r.stop()
	defer e.unpark()
	e.do(e.c.Tick(p.clock.Now()))
	return e.loop(wdone)
}

// era is one era of this worker as the pool's coordinator: its core, and
// what the core's effects need between events. Only the loop's goroutine
// touches it.
type era struct {
	p      *Pool
	c      *coord.Coordinator
	r      *runner // its ctx ends with the leadership, or at a step-down
	cancel context.CancelFunc
	down   bool
	parked map[string]reportReq // reports waiting for their page to change (4.8)
	wake   *time.Timer          // when the first parked report's wait is over
}

// eraCtx is the context of an era's calls: cancelled at a step-down, and
// over the moment the leadership's context says so. That one's Err reads
// the clock, and reports a lease over before its Done closes (a host
// suspend holds its timer back); a context derived from it with
// WithCancel would answer Err from its own state until then.
type eraCtx struct {
	context.Context // derived from lead, cancelled at a step-down
	lead            context.Context
}

func (c eraCtx) Err() error {
	if err := c.lead.Err(); err != nil {
		return err
	}
	return c.Context.Err()
}

// loop takes the era's events until the leadership ends, the core steps
// down (true) or, once the worker's side is done, its grace is over.
func (e *era) loop(wdone <-chan struct{}) (stepped bool) {
	p, c := e.p, e.c
	var grace <-chan time.Time
	for !e.down {
		woken := e.flush()
		select {
		case <-woken:
		case f := <-e.r.ev:
			f()
		case <-e.r.timer.C:
			e.do(c.Tick(p.clock.Now()))
		case rq := <-p.reports:
			e.do(e.answer(rq))
		case <-p.reshard:
			c.SetShards(p.shardList())
			e.do(c.Tick(p.clock.Now()))
		case <-e.r.ctx.Done():
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

// do carries out the coordinator core's effects.
func (e *era) do(fx []coord.Effect) {
	p, c, now := e.p, e.c, e.p.clock.Now
	for _, ef := range fx {
		if e.r.ctx.Err() != nil {
			return // no call once the leadership is over
		}
		switch ef.Op {
		case coord.OpTimer:
			e.r.timer.Reset(max(p.clock.RealUntil(ef.At), 0))
		case coord.OpList:
			e.r.async(func() func() {
				m, err := p.listWorkers(e.r.ctx)
				return func() {
					e.do(c.Listed(now(), m, err))
					p.warnETagForms(c)
				}
			})
		case coord.OpGetSession:
			e.r.get(p.sessionKey(ef.Key), func(data []byte, etag string, err error) { e.do(c.SessionRead(now(), ef.Key, data, etag, err)) })
		case coord.OpGetPage:
			e.r.getSeen(p.pageKey(ef.Key), func(data []byte, etag string, err error) { e.do(c.PageRead(now(), ef.Key, data, etag, err)) })
		case coord.OpPutPage:
			e.r.put(p.pageKey(ef.Key), ef.Data, ef.IfMatch, time.Time{}, func(etag string, err error) { e.do(c.PagePut(now(), ef.Key, etag, err)) })
		case coord.OpGetRoster:
			e.r.getSeen(p.rosterKey(), func(data []byte, etag string, err error) { e.do(c.RosterRead(now(), data, etag, err)) })
		case coord.OpPutRoster:
			e.r.put(p.rosterKey(), ef.Data, ef.IfMatch, time.Time{}, func(etag string, err error) { e.do(c.RosterPut(now(), etag, err)) })
		case coord.OpStepDown:
			p.log.Warn("the coordinator steps down", "term", c.Term(), "err", ef.Err)
			e.down = true
			e.cancel() // the calls in flight send no retry (4.6: no further call)
			if ef.Term > 0 {
				p.el.NoteTerm(ef.Term) // the next election starts above the later era (4.6)
			}
		}
	}
}
