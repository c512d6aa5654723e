package pool

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/shardlead"
)

// errHandedOver is the cause of a leadership the pool ended to hand its
// shard to a worker below its share.
var errHandedOver = fmt.Errorf("%w: handed over to balance the pool", s3lect.ErrResigned)

// loopState is the loop's: the core (the decisions and what they know)
// and what only the executor needs. Only the goroutine running Run
// touches it.
type loopState struct {
	core
	p    *Pool
	ctx  context.Context // Run's
	next time.Time       // the next tick, on the local clock

	// closing holds the releases that wait since Run's context ended, and
	// stopAt is when the loop first saw it ended (see releaseAll).
	closing []*lead
	stopAt  time.Time

	joinLosses int // writes of the member list that lost to another's in a row (joinRetry)
}

func (s *loopState) init(p *Pool) {
	s.p = p
	s.core = newCore(params{id: p.cfg.ID, fi: p.fi, ii: p.ii, lt: p.lt, n: len(p.cfg.Shards), sessions: p.keySessions, membersKey: p.keyMembers,
		lists: p.lister != nil, peer: p.hub != nil, serverAddr: p.cfg.ServerAddr,
		debug: p.log.Enabled(context.Background(), slog.LevelDebug)}, p.cfg.Shards)
}

// observe brings in, before each input, what the core cannot see: which
// leaderships' contexts have ended (lead.over: a leadership's end reaches
// the loop as an input only once it has run, and the core must not count
// one that has ended), the store's recent round trip, and whether Run's
// context has ended.
func (s *loopState) observe() {
	for _, ld := range s.mine {
		if !ld.over && ld.l.Context().Err() != nil {
			ld.over = true
		}
	}
	s.obs = observed{rtt: time.Duration(s.p.rtt.Load()), stopping: s.ctx.Err() != nil}
}

// run feeds in to the core and performs the effects, and each call's
// result in turn, until an input asks for no call.
func (s *loopState) run(in input) {
	for in != nil {
		s.observe()
		effs := s.core.next(in, s.p.now())
		in = nil
		for _, e := range effs {
			if r := s.perform(e); r != nil {
				in = r
			}
		}
	}
}

// loop runs the worker's decisions until ctx ends and every leadership is
// over.
func (p *Pool) loop(ctx context.Context) {
	s := &p.st
	s.ctx = ctx
	for {
		for _, ev := range p.queue.take() {
			s.run(ev.input())
		}
		if ctx.Err() != nil {
			s.releaseAll(ctx)
			if len(s.mine) == 0 {
				return
			}
			<-p.queue.wake // the leaderships end with ctx; wait for their Work
			continue
		}
		if !p.now().Before(s.next) {
			id, _ := p.sess.snapshot()
			s.run(inTick{id, p.sess.endedTerms()})
		}
		p.sleep(ctx, s.next, p.queue.wake)
	}
}

// input is the event as the core takes it in.
func (ev event) input() input {
	switch {
	case ev.ended != nil:
		return inEnded{ev.ended, context.Cause(ev.ended.l.Context())}
	case ev.workDone != nil:
		return inWorkDone{ev.workDone}
	case ev.released != nil:
		return inReleased{ev.released, ev.err}
	}
	return inChanged{}
}

// perform does one effect, and returns the result of a call (nil for the
// others).
func (s *loopState) perform(e effect) input {
	p, ctx := s.p, s.ctx
	switch e := e.(type) {
	case doNote:
		p.log.Log(context.Background(), e.level, e.msg, e.args...)
	case doNext:
		s.setNext(e.at)
	case doJoinLost:
		s.next = p.now().Add(s.joinRetry())
	case doJoined:
		s.joinLosses = 0
	case doCount:
		p.stats.count(e.c)
	case doView:
		if e.rebalanced > 0 {
			p.stats.rebalanced(e.rebalanced)
		}
		p.stats.setView(e.v, e.balanced)
	case doNoteEnded:
		p.sess.noteEnded(e.shard, e.term)
	case doDrop:
		p.sess.drop(e.ld)
	case doRenewSoon:
		p.sess.renewSoon()
	case doClaimingNone:
		p.sess.setClaiming(nil)
	case doExit:
		e.ld.c.Exit(e.err)
	case doRelease:
		s.release(ctx, e.ld)
	case doEnd:
		e.ld.c.End(e.cause)
	case doExpectLive:
		p.hub.expectLive(e.live, e.members, e.tag, e.at)

	case getRecords:
		r := inRecords{reads: make([]recordRead, len(e.shards))}
		parallel(len(e.shards), func(i int) {
			rr := &r.reads[i]
			rr.data, rr.etag, rr.err = p.get(ctx, p.shardKey(e.shards[i]))
		})
		r.wall = time.Now()
		return r
	case putRecords:
		r := inPuts{errs: make([]error, len(e.writes))}
		parallel(len(e.writes), func(i int) {
			w := e.writes[i]
			_, r.errs[i] = p.put(ctx, p.shardKey(w.key), w.data, w.etag, w.over, time.Time{})
		})
		return r
	case askHub:
		var r inDigest
		if e.self {
			r.d, r.err = p.hub.collect(ctx, e.wait)
		} else {
			r.d, r.err = p.ask(ctx, e.id, e.addr, p.hub.ownSession(), e.members, e.wait)
		}
		if r.err == nil {
			r.take = p.hub.takeMembers()
		}
		return r
	case list:
		lctx, cancel := context.WithTimeout(ctx, e.wait)
		sent := p.now()
		var r inListing
		r.entries, r.err = p.calls.List(lctx, p.keySessions)
		cancel()
		r.took = p.now().Sub(sent)
		r.timedOut = r.err != nil && errors.Is(lctx.Err(), context.DeadlineExceeded)
		return r
	case getMembers:
		var r inMembers
		r.read.data, r.read.etag, r.read.err = p.get(ctx, p.keyMembers)
		return r
	case putMembers:
		_, err := p.put(ctx, p.keyMembers, stampMembers(e.write.data), e.write.etag, e.write.over, time.Time{})
		return inPut{err}
	case getSessions:
		r := inSessions{reads: make([]sessRead, len(e.workers))}
		parallel(len(e.workers), func(i int) {
			rr := &r.reads[i]
			rr.sent = p.now()
			rr.data, rr.etag, rr.err = p.get(ctx, p.sessionKey(e.workers[i]))
			rr.at = p.now()
		})
		return r
	case getSession:
		id, _ := p.sess.snapshot()
		return inSession{id, p.sess.endedTerms()}
	case announce:
		return inAnnounce{p.announce(ctx, e.id, e.claiming)}
	case sleepUntil:
		return inSlept{p.sleep(ctx, e.t, nil)}
	case bury:
		s.bury(ctx, e.workers)
		return inDone{}
	case putClaims:
		return inClaims{s.putClaims(ctx, e)}
	case leadClaims:
		r := inLed{leads: make([]*lead, len(e.claims))}
		for i, w := range e.claims {
			r.leads[i] = s.lead(ctx, w, e.id)
		}
		return r
	default:
		panic(fmt.Sprintf("pool: an effect the loop does not know: %T", e))
	}
	return nil
}

// setNext sets when to tick next.
func (s *loopState) setNext(at nextAt) {
	p := s.p
	switch at.kind {
	case nextSlot:
		s.next = p.slot(at.t, p.watchOffset())
	case nextSlotBy:
		s.next = earliest(s.next, p.slot(at.t, p.watchOffset()))
	case nextInfrequent:
		s.next = p.slot(p.infrequentSlot(at.t), p.watchOffset())
	case nextBy:
		s.next = earliest(s.next, at.t)
	case nextAtOnce:
		s.next = at.t
	}
}

// release writes the shard's record released, over this leadership's
// claim, and ends the leadership for its holder if it had not ended.
// Once Run's context has ended, the release joins the others that wait
// for releaseAll.
//
// The release is written off the loop, in a goroutine of its own (at most
// 8 at a time, p.relSem), its outcome taken in as an event: a store that
// hangs holds up neither the loop nor the other releases (every Resign
// returns within one release's retries). Each has a timeout of 3 ×
// FrequentInterval + 2 s, and ends a quarter LeaderTimeout after Run's
// context does if it is still in flight then: a worker cut off from the
// store stops within its lease.
func (s *loopState) release(ctx context.Context, ld *lead) {
	p := s.p
	if ctx.Err() != nil && !mutSerialRelease {
		s.closing = append(s.closing, ld)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*p.fi+2*time.Second)
	if mutSerialRelease {
		defer cancel()
		s.run(inReleased{ld, s.writeRelease(rctx, ld)})
		return
	}
	// A leadership not yet over for its holder (Resign, or Work returned
	// while leading) is over when its release is written or given up: the
	// release's goroutine tells it (Exit) at once, not when the loop next
	// takes events in (a tick may hold it up for a store call's retries).
	exit := !ld.exited
	ld.exited = true
	p.works.Add(1)
	go func() {
		defer p.works.Done()
		defer cancel()
		go func() {
			select {
			case <-ctx.Done():
			case <-rctx.Done():
				return
			}
			t := time.NewTimer(max(p.realUntil(p.now().Add(p.lt/4)), 0))
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-rctx.Done():
			}
		}()
		select {
		case p.relSem <- struct{}{}:
		case <-rctx.Done():
			if exit {
				ld.c.Exit(context.Cause(rctx))
			}
			p.queue.post(event{released: ld, err: context.Cause(rctx)})
			return
		}
		err := s.writeRelease(rctx, ld)
		<-p.relSem
		if exit {
			ld.c.Exit(err)
		}
		p.queue.post(event{released: ld, err: err})
	}()
}

// releaseAll writes the releases that wait since Run's context ended,
// in parallel, all within a quarter LeaderTimeout of that end: a worker cut
// off from the store stops within its lease, whatever its number of
// shards, instead of trying each release in turn with the full retry
// schedule. A release not written leaves the shard to the others, who
// take it over when the session's lease has run out.
func (s *loopState) releaseAll(ctx context.Context) {
	p := s.p
	if s.stopAt.IsZero() {
		s.stopAt = time.Now()
	}
	batch := s.closing
	s.closing = nil
	if len(batch) == 0 {
		return
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), s.stopAt.Add(p.lt/4))
	defer cancel()
	errs := make([]error, len(batch))
	parallel(len(batch), func(i int) { errs[i] = s.writeRelease(rctx, batch[i]) })
	for i, ld := range batch {
		s.run(inReleased{ld, errs[i]})
	}
}

// writeRelease writes the release of ld's shard.
func (s *loopState) writeRelease(ctx context.Context, ld *lead) error {
	p := s.p
	out := encode(shardRecord{Pool: formatVersion, Shard: ld.shard, Session: ld.session, Term: ld.term, TTL: ttlMillis(p.lt), LastUpdated: time.Now()})
	_, err := p.put(ctx, p.shardKey(ld.shard), out, ld.etag, ld.sum, time.Time{})
	return err
}

// joinRetry is how long a worker whose write of the member list lost to
// another's waits before it reads the list again: a random time up to a
// quarter interval (twice as long after each loss in a row, up to an
// interval). Workers that start together all lose but one at every round
// of the list; retries at one instant (a quarter interval after the
// round) let one more in per round: 100 workers started at once on a
// store that takes 5 ms a call claimed nothing for 8 leases
// (TestColdStartOfAHundredWorkers).
func (s *loopState) joinRetry() time.Duration {
	p := s.p
	s.joinLosses++
	if mutJoinInStep {
		return p.fi / 4
	}
	span := min(p.fi/4<<min(s.joinLosses-1, 2), p.fi)
	return time.Duration(rand.Int64N(int64(span))) + 1
}

// parallel runs f(0..n-1), at most 8 at a time, and waits for them.
func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// bury writes a tombstone into each of the workers' session objects
// that a read found absent, unless something else got there first. An
// absence is not a sighting that can be aged: every deletion looks the
// same, so a session that wrote between two reads that found its object
// absent (a new session opened and its object deleted again, or a
// deleted object restored and renewed) would go unseen. A tombstone has
// bytes of its own: from its first sight on, it ages as any record of
// another session does (the takeover rule), and no session can renew
// over it, since every renewal is If-Match on the session's own last
// write. The tombstone is not a session record; the worker opens its
// next session over it.
func (s *loopState) bury(ctx context.Context, workers []string) {
	p := s.p
	parallel(len(workers), func(i int) {
		out := encode(tombstoneRecord{Pool: formatVersion, Worker: workers[i], By: p.cfg.ID, Nonce: newSessionID(), LastUpdated: time.Now()})
		if _, err := p.put(ctx, p.sessionKey(workers[i]), out, "", [32]byte{}, time.Time{}); err != nil {
			p.log.Debug("cannot bury an absent session object", "worker", workers[i], "err", err)
		}
	})
}

// putClaims writes the claims, eight at a time, each only while the
// session id lives: by its lease as it stands at the send, renewed since
// the look began or not.
func (s *loopState) putClaims(ctx context.Context, e putClaims) []claimPut {
	p := s.p
	out := make([]claimPut, len(e.claims))
	parallel(len(e.claims), func(i int) {
		w, r := e.claims[i], &out[i]
		r.out = encode(shardRecord{Pool: formatVersion, Shard: w.shard, Owner: p.cfg.ID, Session: e.id, Term: w.term, TTL: ttlMillis(p.lt), LastUpdated: time.Now()})
		cur, deadline := p.sess.snapshot()
		if cur != e.id {
			r.err = fmt.Errorf("%w: the session ended", errLate)
			return
		}
		r.sent = true
		r.tag, r.err = p.put(ctx, p.shardKey(w.shard), r.out, w.etag, w.over, deadline)
	})
	return out
}

// lead turns a claim that landed into a leadership and starts its Work,
// if the session it names is still this worker's live session now that
// the reply has come (nil: it is not).
func (s *loopState) lead(ctx context.Context, w claimWon, id string) *lead {
	p := s.p
	ld := p.sess.tie(w.shard, id, p.now, func(deadline time.Time) *lead {
		ld := &lead{shard: w.shard, term: w.term, session: id, sum: sha256.Sum256(w.out), etag: w.tag}
		// Its end reaches the loop as an event, which the loop takes in
		// after this tick, once ld is among its leaderships (won); ended
		// by its session, it is over for its holder at once (exitOnce).
		x := &exitOnce{}
		l, c := p.leads(ctx, w.term, deadline, func() {
			p.queue.post(event{ended: ld})
			x.ended()
		})
		ld.l, ld.c = l, x.set(l, c)
		return ld
	})
	if ld == nil {
		return nil
	}
	p.works.Add(1)
	go func() {
		defer p.works.Done()
		p.cfg.Work(ld.l.Context(), ld.shard, ld.l)
		p.queue.post(event{workDone: ld})
	}()
	return ld
}

// exitOnce is a leadership's control as the loop holds it: Exit takes
// effect once, whoever calls it first, the loop (exit, release) or the
// leadership's end. A leadership ended by its session (endedBySession)
// releases nothing, so it is over for its holder as its context ends: a
// Resign inside Work returns then, not when the loop takes the end in,
// after the tick in progress, which may be a look whose store calls hang
// for many leases (the look cannot claim without its session, but its
// calls in flight run their course).
type exitOnce struct {
	shardlead.Control // set before the leadership is handed out (set)

	mu     sync.Mutex
	l      *s3lect.Leadership
	early  bool // its context ended before set
	exited bool
}

// set completes x with the leadership and its control, and returns x.
func (x *exitOnce) set(l *s3lect.Leadership, c shardlead.Control) *exitOnce {
	x.mu.Lock()
	x.l, x.Control = l, c
	early := x.early
	x.mu.Unlock()
	if early {
		x.ended()
	}
	return x
}

// ended takes in the end of the leadership's context.
func (x *exitOnce) ended() {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.l == nil:
		x.early = true
	case !x.exited && endedBySession(context.Cause(x.l.Context())) && !mutSettleWaits:
		x.exited = true
		x.Control.Exit(nil)
	}
}

// Exit marks the leadership over for its holder, unless it was.
func (x *exitOnce) Exit(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.exited {
		x.exited = true
		x.Control.Exit(err)
	}
}
