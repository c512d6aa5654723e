package s3lect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// The run loop is the one goroutine that owns an elector's election state.
// Everything else talks to it over channels: API calls send requests and
// wait for answers; the storage goroutines (the reader, for follower
// reads and takeovers, and the renewer, for a leader's renewals and
// release) send results tagged with the generation of the call; the peer
// poller sends what it heard; a leadership's end arrives from its
// context. The decisions are the core's (core.go); the loop performs
// their effects, and keeps no flag of the election's beside the core's.

// request is an API call to the run loop. Each kind is answered on its
// own channel, which has room for the answer, so the loop never blocks on
// it.
type request interface {
	// serve takes the call in: it returns the event it makes for the
	// decisions, or nil when the loop answers it by itself.
	serve(lp *loop) event
}

// campaignReq is one Campaign call.
type campaignReq struct {
	id     uint64
	ctx    context.Context
	answer chan campaignAnswer // capacity 1; the loop sends exactly one answer
}

type campaignAnswer struct {
	l   *Leadership
	err error
}

type (
	withdrawReq    evWithdraw                   // a Campaign gave up
	subscribeReq   struct{ sub *subscription }  // Changes or Observe
	unsubscribeReq struct{ sub *subscription }  // an Observe context ended
	closeReq       struct{}                     // Close
	pingReq        struct{ done chan struct{} } // closed by the loop: it is not stuck
	countSubsReq   struct{ n chan int }         // answered with the number of subscriptions (tests)
	noteTermReq    struct{ term uint64 }        // NoteTerm
)

func (r *campaignReq) serve(lp *loop) event {
	lp.camps[r.id] = r
	return evCampaign{id: r.id, lease: lp.e.newLease()}
}

func (r withdrawReq) serve(*loop) event { return evWithdraw(r) }

func (r subscribeReq) serve(lp *loop) event {
	lp.subs[r.sub] = struct{}{}
	if lp.status.known {
		r.sub.ch <- lp.status.change
	}
	return nil
}

func (r unsubscribeReq) serve(lp *loop) event {
	if _, ok := lp.subs[r.sub]; ok {
		delete(lp.subs, r.sub)
		close(r.sub.ch)
	}
	return nil
}

func (closeReq) serve(lp *loop) event {
	lp.stopRds()
	return evClose{}
}

func (r pingReq) serve(*loop) event {
	close(r.done)
	return nil
}

func (r noteTermReq) serve(*loop) event { return evNoteTerm(r) }

func (r countSubsReq) serve(lp *loop) event {
	r.n <- len(lp.subs)
	return nil
}

// subscription is one Changes or Observe channel. The loop alone sends on
// ch and closes it.
type subscription struct {
	ch chan Change // capacity 1: holds the latest change the reader has not taken
}

// loop is the run loop's own bookkeeping: what the decisions need not see.
type loop struct {
	e       *Elector
	c       core
	status  status // what the core showed last
	done    bool   // the core has finished Close (doClosed)
	failed  error  // and Close returns this
	camps   map[uint64]*campaignReq
	lead    *Leadership // the Leadership handed out, until it is over
	subs    map[*subscription]struct{}
	readCtx context.Context // reads; cancelled when Close begins
	stopRds context.CancelFunc
	timer   *time.Timer
	reader  worker // a follower's storage goroutine: its reads and takeovers
	renewer worker // a leader's storage goroutine: its renewals and release
}

// run is the elector's run loop. It returns when Close has finished every
// leadership and answered every Campaign: nil, or the failure of a release
// that Close had to write (a leadership Close ended, or a takeover that won
// while Close waited for it), which Close returns.
func (e *Elector) run(ctx context.Context) error {
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	lp := &loop{e: e, c: newCore(e.params()), camps: map[uint64]*campaignReq{},
		subs: map[*subscription]struct{}{}, readCtx: rctx, stopRds: stop, timer: time.NewTimer(time.Hour)}
	defer lp.timer.Stop()
	defer func() {
		for sub := range lp.subs {
			close(sub.ch)
		}
	}()
	lp.step(evTimer{})
	for !lp.done {
		var ev event
		select {
		case r := <-e.reqs:
			ev = r.serve(lp)
		case r := <-e.results:
			ev = r
		case r := <-e.peerReports:
			ev = evPeer(r)
		case l := <-e.leadDone:
			if l != lp.lead || !lp.c.leading() {
				continue // an earlier leadership, or an end the core already knows
			}
			ev = evLeadDone{context.Cause(l.ctx)}
		case <-lp.timer.C:
			ev = evTimer{}
		}
		if ev == nil {
			continue
		}
		if l := lp.lead; l != nil && lp.c.leading() && l.ctx.Err() != nil {
			// The leadership's context ended (Resign, the parent, the
			// expiry timer) and the core has not heard yet: take that in
			// first, so that a renewal cut short by it is not read as a
			// failed one (docs/protocol.md, section 9, 18).
			lp.step(evLeadDone{context.Cause(l.ctx)})
		}
		lp.step(ev)
	}
	return lp.failed
}

// step feeds ev to the decisions and performs the effects.
func (lp *loop) step(ev event) {
	e := lp.e
	fx, wake := lp.c.next(ev, e.clock.Now())
	for _, f := range fx {
		f.do(lp)
	}
	lp.timer.Stop()
	if !wake.IsZero() {
		lp.timer.Reset(max(e.clock.RealUntil(wake), time.Millisecond/10))
	}
}

func (lp *loop) read(f doRead) {
	lp.send(lp.readCtx, &lp.reader, f.gen, getReq{key: lp.e.key, sighting: true})
}

func (lp *loop) readTerm(f doReadTerm) {
	lp.send(lp.readCtx, &lp.reader, f.gen, getReq{key: lp.e.termKey})
}

func (lp *loop) findTerm(f doFindTerm) {
	lp.send(lp.readCtx, &lp.reader, f.gen, findReq{from: f.from})
}

// A takeover's writes run to their end, under the elector's context, so
// that their outcome is known.

func (lp *loop) claimTerm(f doClaimTerm) {
	lp.send(lp.e.ctx, &lp.reader, f.gen, putOf(lp.e.claimKey(f.term), f.write, time.Time{}))
}

func (lp *loop) raiseTerm(f doRaiseTerm) {
	lp.send(lp.e.ctx, &lp.reader, f.gen, putOf(lp.e.termKey, f.write, time.Time{}))
}

func (lp *loop) claim(f doClaim) {
	lp.send(lp.e.ctx, &lp.reader, f.gen, putOf(lp.e.key, f.write, time.Time{}))
}

func (lp *loop) renew(f doRenew) {
	ctx := lp.e.ctx
	if lp.lead != nil { // not yet for a recreated lockfile's leadership waiting to be handed out
		ctx = lp.lead.ctx // Resign, the parent and the lease deadline all cut a renewal short
	}
	lp.send(ctx, &lp.renewer, f.gen, putOf(lp.e.key, f.write, f.notAfter))
}

func (lp *loop) release(f doRelease) {
	// Under the elector's context: Close cancels it only after the release.
	lp.send(lp.e.ctx, &lp.renewer, f.gen, releaseReq{putOf(lp.e.key, f.write, time.Time{}), f.orOver})
}

func (lp *loop) startLead(f doLead) {
	e := lp.e
	c := lp.camps[f.campID]
	delete(lp.camps, f.campID)
	l := newLeadership(e, c.ctx, f.term, f.deadline, nil)
	lp.lead = l
	e.stats.won()
	lp.reader.stop() // a leader reads nothing
	// Leader() and the peer handler say so before Campaign returns.
	e.publishSnapshot(lp.status, lp.lead)
	c.answer <- campaignAnswer{l: l}
}

func (lp *loop) renewed(f doRenewed) { lp.lead.extend(f.deadline) } // only for a handed leadership

func (lp *loop) endLead(f doEnd) {
	if lp.lead != nil {
		lp.lead.cancel(f.cause)
	}
}

func (lp *loop) exited(f doExited) {
	lp.renewer.stop()
	l := lp.lead
	if l == nil {
		return // won for a Campaign that had given up: never handed out
	}
	lp.lead = nil
	// Leader(), Stats and the peer handler say so before Resign returns.
	lp.e.publishSnapshot(lp.status, nil)
	l.cancel(ErrResigned) // no-op unless it was never cancelled
	lp.e.stats.ended(context.Cause(l.ctx))
	l.stop()
	l.endErr = f.err
	close(l.exited)
}

func (lp *loop) answer(f doAnswer) {
	c := lp.camps[f.campID]
	delete(lp.camps, f.campID)
	err := f.err
	var opErr *opError
	if err != nil && err != ErrClosed && err != ErrCampaigning && c.ctx.Err() == nil && !errors.As(err, &opErr) {
		err = fmt.Errorf("s3lect: campaign for %q: %w", lp.e.key, err)
	}
	c.answer <- campaignAnswer{err: err}
}

func (lp *loop) setPeer(f doPeer) { lp.e.setPeerTarget(f.t) }

func (lp *loop) publish(f doPublish) {
	for sub := range lp.subs {
		select { // replace a value the reader has not taken; only the loop sends
		case <-sub.ch:
		default:
		}
		sub.ch <- f.c
	}
}

func (lp *loop) show(f doStatus) {
	lp.status = f.st
	lp.e.publishSnapshot(lp.status, lp.lead)
}

func (lp *loop) log(f doLog) {
	if e := lp.e; e.log.Enabled(context.Background(), slog.LevelInfo) {
		e.log.Info(f.msg, f.args...)
	}
}

func (lp *loop) closed(f doClosed) { lp.done, lp.failed = true, f.err }

// ask sends r to the run loop, starting it if needed. It returns false if
// the loop has ended (the elector is closed) or ctx ended first.
func (e *Elector) ask(ctx context.Context, r request) bool {
	if !e.start() {
		return false
	}
	select {
	case e.reqs <- r:
		return true
	case <-e.loopDone:
		return false
	case <-ctx.Done():
		return false
	}
}

// ping returns nil once the run loop has answered, or ctx's error. A loop
// that does not answer is stuck.
func (e *Elector) ping(ctx context.Context) error {
	r := pingReq{done: make(chan struct{})}
	if !e.ask(ctx, r) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrClosed
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
