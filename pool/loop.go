package pool

import (
	"context"
	"crypto/sha256"
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
	next time.Time // the next tick, on the local clock

	// closing holds the releases that wait since Run's context ended, and
	// stopAt is when the loop first saw it ended (see releaseAll).
	closing []*lead
	stopAt  time.Time

	listWarned bool      // a failed listing was logged at Warn (until one succeeds)
	peerWarned bool      // a failed request to the hub was logged (until one succeeds)
	joinLosses int       // writes of the member list that lost to another's in a row (joinRetry)
	hubReadAt  time.Time // peer mode: when the hub's session object may be read again after a failed request
	tickAt     time.Time // when the running tick began (lookAhead)
}

func (s *loopState) init(p *Pool) {
	s.p = p
	s.core = newCore(params{id: p.cfg.ID, fi: p.fi, ii: p.ii, lt: p.lt, n: len(p.cfg.Shards), sessions: p.keySessions,
		debug: p.log.Enabled(context.Background(), slog.LevelDebug)}, p.cfg.Shards)
}

// flushNotes writes the log lines the decisions asked for.
func (s *loopState) flushNotes() {
	for _, n := range s.notes {
		s.p.log.Log(context.Background(), n.level, n.msg, n.args...)
	}
	s.notes = nil // not kept for reuse: the lines' arguments hold views
}

// sync marks the leaderships whose contexts have ended as over, for the
// decisions (lead.over): a leadership's end reaches the loop as an event
// only once it has run, and the core must not count one that has ended.
func (s *loopState) sync() {
	for _, ld := range s.mine {
		if !ld.over && ld.l.Context().Err() != nil {
			ld.over = true
		}
	}
}

// loop runs the worker's decisions until ctx ends and every leadership is
// over.
func (p *Pool) loop(ctx context.Context) {
	s := &p.st
	for {
		for _, ev := range p.queue.take() {
			s.handle(ctx, ev)
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
			s.tick(ctx)
		}
		p.sleep(ctx, s.next, p.queue.wake)
	}
}

// handle takes in one event: the core decides (leadEnded,
// workReturned), the loop acts.
func (s *loopState) handle(ctx context.Context, ev event) {
	p := s.p
	defer s.flushNotes()
	switch {
	case ev.ended != nil:
		ld := ev.ended
		s.frequent()
		term, act, ok := s.leadEnded(ld, context.Cause(ld.l.Context()))
		if !ok {
			return // taken in before
		}
		p.sess.noteEnded(ld.shard, term)
		p.sess.drop(ld)
		p.sess.renewSoon()
		if act == actSettle {
			p.stats.expired.Add(1)
		}
		s.act(ctx, ld, act)
	case ev.workDone != nil:
		ld := ev.workDone
		s.frequent()
		s.act(ctx, ld, s.workReturned(ld))
		s.forget(ld)
	case ev.released != nil:
		s.released(ev.released, ev.err)
	default:
		s.next = p.now() // the session changed: look again now
	}
}

// act does what the core decided for a leadership.
func (s *loopState) act(ctx context.Context, ld *lead, act leadAct) {
	switch act {
	case actSettle, actExit:
		s.exit(ld, nil)
	case actRelease:
		s.release(ctx, ld)
	case actResign:
		ld.c.End(s3lect.ErrResigned)
	}
}

// exit marks a leadership over for its holder: Resign returns err from
// now on. The shard's record may still wait for its release.
func (s *loopState) exit(ld *lead, err error) {
	if !ld.exited {
		ld.exited = true
		ld.c.Exit(err)
	}
	s.forget(ld)
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
		s.released(ld, s.writeRelease(rctx, ld))
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
		s.released(ld, errs[i])
	}
}

// writeRelease writes the release of ld's shard.
func (s *loopState) writeRelease(ctx context.Context, ld *lead) error {
	p := s.p
	out := encode(shardRecord{Pool: formatVersion, Shard: ld.shard, Session: ld.session, Term: ld.term, TTL: ttlMillis(p.lt), LastUpdated: time.Now()})
	_, err := p.put(ctx, p.shardKey(ld.shard), out, ld.etag, ld.sum, time.Time{})
	return err
}

// released books the outcome of a release.
func (s *loopState) released(ld *lead, err error) {
	p := s.p
	if err != nil {
		p.log.Info("shard not released; the other workers wait for the lease to run out", "shard", ld.shard, "err", err)
		// Its record names this worker's session, which no other worker
		// can clear while it lives: this one looks at its next tick, and
		// takes the shard back by the orphan rule if nobody else does, at
		// the orphan wait whatever its rank (orphanRank).
		s.lookAt = p.now()
		s.shard(ld.shard).unreleased = true
	} else {
		p.stats.released.Add(1)
		p.sess.noteEnded(ld.shard, 0) // the released record holds the term
	}
	ld.settled = true
	s.exit(ld, err)
}

// tick watches the pool and, when something is to be done, looks at it
// and acts: hands shards over when this worker holds more than its share
// while another holds less, and claims shards nobody live owns while it
// holds less (or any shard left unowned for the orphan wait). The
// decisions are the core's; tick performs the store calls between them.
//
// On a store that lists (store.Lister), the watch is one listing of the
// session objects and one read of the member list; the session objects
// themselves are read only when a look is due (watch.go, lookDue).
// Otherwise every tick is a look, reading every member's session object.
func (s *loopState) tick(ctx context.Context) {
	p := s.p
	defer s.flushNotes()
	s.tickAt = p.now()
	s.next = p.slot(p.now().Add(p.fi/2), p.watchOffset()) // just after the renewals (waitRenewal)
	id, _ := p.sess.snapshot()
	if id == "" {
		return
	}
	s.settleStrays(ctx)
	listed, members := false, true
	if p.hub != nil {
		listed, members = s.watchPeers(ctx)
	}
	if !listed || s.storeDue(p.now()) {
		// Without the hub, or every InfrequentInterval: a listing, or on a
		// store that does not list, a look at every session.
		listed, members = s.listSessions(ctx), true
	}
	var data []byte
	var tag string
	if members {
		data, tag = s.readMembers(ctx)
	}
	now := p.now()
	s.sync()
	// A session that runs out within lookAhead: this tick looks as of
	// then, and its claims wait for that moment before they read the
	// sessions that must clear them (watch.go, lookAhead).
	asOf := s.expiring(now, now.Add(s.lookAhead()))
	look := !listed && !s.missedListing() || s.lookDue(asOf)
	if !look && len(s.reread) > 0 {
		s.readSessions(ctx, s.reread)
		now = p.now()
	}
	s.reread = nil
	if look && s.assembling(now) {
		// Nothing to hand over and nothing to claim yet: read only the
		// members never read (assembling).
		look = false
		if !members {
			data, tag = s.readMembers(ctx)
		}
		s.readSessions(ctx, s.unread())
		now = p.now()
	}
	if look {
		p.stats.looks.Add(1)
		if !members {
			data, tag = s.readMembers(ctx)
		}
		s.readPeers(ctx, data, tag)
		now = p.now()
		asOf = later(s.expiring(now, now.Add(s.lookAhead())), asOf)
	}
	s.sync()
	now = later(now, asOf)
	s.asOf = asOf
	defer func() { s.asOf = time.Time{} }()
	v := s.view(now, true)
	balanced, rebalanced := s.account(v, now)
	if rebalanced > 0 {
		p.stats.rebalanced(rebalanced)
	}
	p.stats.setView(v, balanced)
	for _, shard := range s.superseded(v, p.sess.endedTerms()) {
		p.sess.noteEnded(shard, 0)
	}
	if look {
		s.looked(v, now)
	}
	need, ok, hold := s.share(v, now)
	if !ok {
		if look && !mutForgetLook {
			// This look could take nothing in hand (its lookAt is spent):
			// the first tick that may act looks again. (A worker whose
			// release failed found itself off a member list put back
			// just then, looked at nothing more while its view stayed
			// stuck, and never took the shard back: the simulation's seed
			// 1192.)
			s.lookAt = later(hold, now)
		}
		if !hold.IsZero() {
			s.next = earliest(s.next, hold)
		}
		return // not yet seen the others long enough to know its share
	}
	if look {
		if need < 0 {
			for _, ld := range s.handOver(v, -need) {
				p.stats.handovers.Add(1)
				ld.c.End(errHandedOver)
			}
		}
		// Shards found taken, or not yet free, are set aside (notBefore), so
		// every round tries others. A look claims up to the worker's whole
		// deficit (8 store calls at a time: parallel), so that a joiner
		// takes every shard handed over to it at its first look, before the
		// orphan rule can give one to another worker.
		//
		// The rounds stop when the session the look began with has ended
		// or changed: its claims could only fail at the intent, and the
		// loop takes no event in during a look (Work's return, a lost
		// session's leaderships).
		//
		// Each round after the first looks at a view of its own: the
		// claims before it read every member's session object, and what
		// they showed is newer than the look's first view. (Every round
		// took the first view, and on a slow store, where a round lasts
		// seconds, a worker below its share spent up to 16 rounds on
		// shards that view showed unowned and others had claimed since,
		// each set aside for a lease, while the shards still unowned
		// waited for the orphan rule: TestSpreadOnASlowStore.) An
		// orphan is taken in the first round only: one per look.
		budget := max(need, 1)
		for round := 0; round < 16 && budget > 0 && ctx.Err() == nil; round++ {
			if cur, _ := p.sess.snapshot(); cur != id {
				break
			}
			if round > 0 && !mutStaleRounds {
				s.sync()
				at := later(p.now(), s.asOf) // as of the lease's end the look was timed to, if still ahead
				v = s.view(at, true)
				if need, _, _ = s.share(v, at); need <= 0 {
					break
				}
			}
			want, limit := s.wanted(v, min(need, budget), p.now())
			if len(want) == 0 {
				break
			}
			won := s.claim(ctx, want, limit, id)
			need, budget = need-won, budget-won
			if need <= 0 {
				break
			}
		}
		s.compact()
	}
	// Wake when a worker live in this view could next be found dead, or a
	// shard waited on may be taken. A session that ran out while this look
	// went on (its reads and claims take time) is looked at again at once,
	// not at the next interval.
	now = p.now()
	if look {
		s.lookAt = s.pending(v, now)
	}
	if p.hub != nil {
		p.hub.expectLive(v.live, s.members, s.membersTag, now)
	}
	if p.ii > p.fi && p.hub == nil && s.deferLive == nil && s.stable(v, listed, look) {
		// Settled, and no look put off to the next tick (deferLook): the
		// next tick on the next multiple of InfrequentInterval
		// on the wall clock. A worker that dies now is found at that tick's
		// listing (its session unchanged) by every survivor at once, and
		// watched every FrequentInterval from then on.
		s.next, s.slow = p.slot(p.infrequentSlot(now), p.watchOffset()), true
		return
	}
	s.slow = false
	if at := s.wake(v, now, s.lookAhead()); !at.IsZero() {
		s.next = earliest(s.next, at)
	}
}

// readMembers reads the member list and adds this worker to it if
// missing. It returns the list as read (tag "" when absent or not read).
func (s *loopState) readMembers(ctx context.Context) (data []byte, tag string) {
	p := s.p
	data, tag, err := p.get(ctx, p.keyMembers)
	if err != nil {
		p.log.Warn("cannot read the member list", "err", err)
		return nil, ""
	}
	var m membersRecord
	if tag != "" {
		if m, err = parseMembers(data); err != nil {
			p.log.Error("the member list is not a pool record; is Prefix shared with something else?", "key", p.keyMembers, "err", err)
			return nil, ""
		}
	}
	if join := s.membersRead(m, tag, p.now()); join != nil {
		if _, err := p.put(ctx, p.keyMembers, encode(*join), tag, sha256.Sum256(data), time.Time{}); err != nil {
			p.log.Info("cannot add this worker to the member list; trying again", "err", err)
			s.next = p.now().Add(s.joinRetry())
		} else {
			s.joinLosses = 0
		}
	}
	return data, tag
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

// readPeers reads the session objects a look reads (lookSessions), then
// takes members whose sessions are over off the list (data and tag: the
// list as readMembers read it).
func (s *loopState) readPeers(ctx context.Context, data []byte, tag string) {
	sent := s.readSessions(ctx, s.lookSessions())
	if s.p.lister == nil {
		// Without a listing, a look's reads are the store's word
		// (watchPeers).
		s.storeAt = s.p.now().Add(s.p.ii - s.p.fi/2)
	}
	if tag != "" {
		s.pruneMembers(ctx, data, tag, sent)
	}
}

// pruneMembers writes the member list (data, tag: as read) without the
// members the core finds over (prune).
func (s *loopState) pruneMembers(ctx context.Context, data []byte, tag string, sent map[string]time.Time) {
	p := s.p
	gone := s.prune(sent, p.now())
	if len(gone) == 0 {
		return
	}
	m, err := parseMembers(data)
	if err != nil {
		return
	}
	m = withoutMembers(m, gone)
	if _, err := p.put(ctx, p.keyMembers, encode(m), tag, sha256.Sum256(data), time.Time{}); err != nil {
		p.log.Info("cannot take members whose sessions are over off the member list", "members", gone, "err", err)
		return
	}
	p.log.Info("took members whose sessions are over off the member list", "members", gone)
	s.members = m.Workers
}

// readSessions reads the session objects of workers, in parallel, and
// has the core take them in. It returns the local time each read that
// succeeded was sent.
func (s *loopState) readSessions(ctx context.Context, workers []string) map[string]time.Time {
	p := s.p
	type res struct {
		data     []byte
		etag     string
		err      error
		sent, at time.Time
	}
	out := make([]res, len(workers))
	parallel(len(workers), func(i int) {
		r := &out[i]
		r.sent = p.now()
		r.data, r.etag, r.err = p.get(ctx, p.sessionKey(workers[i]))
		r.at = p.now()
	})
	sent := map[string]time.Time{}
	for i, w := range workers {
		r := &out[i]
		ok, first := s.sessionRead(w, r.data, r.etag, r.err, r.at)
		if first && ctx.Err() == nil {
			p.log.Warn("cannot read a worker's session object; no shard can be claimed while it cannot be read", "of", w, "err", r.err)
		}
		if ok {
			sent[w] = r.sent
			if p.hub != nil {
				s.doubt(s.peers[w], r.etag, r.at)
			}
		}
	}
	return sent
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

// claim tries to take the shards in want, as the protocol allows
// (docs/pool-protocol.md, "Claims and takeovers"): read each shard record;
// list the claims in this worker's session object (its intent); read the
// member list and every other worker's session object; write a claim only
// where every session read shows that it cannot lead the shard
// (clearance), with If-Match on the record read (If-None-Match where
// absent) and a term above every term read. It returns how many it won.
// It writes at most limit claims, in the order of want. The decisions
// between the store calls are the core's (recordsRead, clearanceSet,
// absent, cleared, claimRefused, won).
func (s *loopState) claim(ctx context.Context, want []string, limit int, id string) (won int) {
	p := s.p
	defer s.flushNotes()
	at := make([]attempt, len(want))
	parallel(len(want), func(i int) {
		a := &at[i]
		a.shard = want[i]
		a.data, a.etag, a.result = p.get(ctx, p.shardKey(a.shard))
	})
	claiming := s.recordsRead(at, p.sess.endedTerms(), limit, p.now())
	if len(claiming) == 0 {
		return 0
	}
	if !mutNoIntent {
		if err := p.announce(ctx, id, claiming); err != nil {
			p.sess.setClaiming(nil) // the claims are not made: no renewal lists them from now on
			p.log.Debug("cannot list the claims in the session", "err", err)
			s.intentFailed(claiming, p.now())
			return 0
		}
		// The claims' outcomes are known once claim returns: a renewal
		// drops the intent at once, so that it holds no other worker off
		// any longer than the claims took.
		defer p.announce(ctx, id, nil)
	}
	// Clearance: every other worker's session, read after the records and
	// the intent, by a member list read after them too.
	var fresh *membersRecord
	if !mutStaleMembers {
		if data, tag, err := p.get(ctx, p.keyMembers); err == nil && tag != "" {
			if m, err := parseMembers(data); err == nil {
				fresh = &m
			}
		}
	}
	ws := s.clearanceSet(at, fresh, p.now())
	if !s.asOf.IsZero() && !s.tickAt.IsZero() {
		s.notePreLook(p.now().Sub(s.tickAt))
		s.tickAt = time.Time{} // the tick's first claim only
	}
	// A look begun ahead of a session's end waits for it (watch.go,
	// lookAhead) before the session reads, which are what may clear a
	// takeover: they are sent at or after the lease's end, and after the
	// member list read that named them, as every clearing read is.
	if s.asOf.After(p.now()) && !p.sleep(ctx, s.asOf, nil) {
		return 0
	}
	var sent map[string]time.Time
	if mutNoReread {
		sent = map[string]time.Time{}
		for _, w := range ws {
			if s.peers[w] != nil {
				sent[w] = p.now()
			}
		}
	} else {
		sent = s.readSessions(ctx, ws)
	}
	s.bury(ctx, s.absent(ws, sent))
	s.cleared(at, ws, sent, limit, p.now())
	parallel(len(at), func(i int) {
		a := &at[i]
		if !a.ready {
			return
		}
		a.out = encode(shardRecord{Pool: formatVersion, Shard: a.shard, Owner: p.cfg.ID, Session: id, Term: a.term, TTL: ttlMillis(p.lt), LastUpdated: time.Now()})
		var over [32]byte
		if a.etag != "" {
			over = sha256.Sum256(a.data)
		}
		// Sent only while the session lives: by its lease as it stands
		// now, renewed since the look began or not.
		cur, deadline := p.sess.snapshot()
		if cur != id {
			a.result = fmt.Errorf("%w: the session ended", errLate)
			return
		}
		a.sent = true
		a.tag, a.result = p.put(ctx, p.shardKey(a.shard), a.out, a.etag, over, deadline)
	})
	for i := range at {
		a := &at[i]
		if a.result != nil || !a.ready {
			continue
		}
		if s.lead(ctx, a, id) {
			won++
		}
	}
	for i := range at {
		if a := &at[i]; a.ready && a.result != nil {
			s.claimRefused(a, id, p.now())
		}
	}
	return won
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

// lead turns a successful claim into a leadership, if the session it
// names is still this worker's live session now that the reply has come.
func (s *loopState) lead(ctx context.Context, a *attempt, id string) bool {
	p := s.p
	sum := sha256.Sum256(a.out)
	ld := p.sess.tie(a.shard, id, p.now, func(deadline time.Time) *lead {
		ld := &lead{shard: a.shard, term: a.term, session: id, sum: sum, etag: a.tag}
		// Its end reaches the loop as an event, which the loop takes in
		// after this tick, once ld is among its leaderships (won); ended
		// by its session, it is over for its holder at once (exitOnce).
		x := &exitOnce{}
		l, c := p.leads(ctx, a.term, deadline, func() {
			p.queue.post(event{ended: ld})
			x.ended()
		})
		ld.l, ld.c = l, x.set(l, c)
		return ld
	})
	if ld == nil {
		p.log.Info("claimed a shard for a session that has ended; releasing it", "shard", a.shard)
		s.stray(a.shard, id, a.term)
		return false
	}
	s.won(ld)
	p.sess.noteEnded(a.shard, 0) // the new leadership's listing holds the shard's terms now
	p.stats.claims.Add(1)
	p.sess.renewSoon()
	p.works.Add(1)
	go func() {
		defer p.works.Done()
		p.cfg.Work(ld.l.Context(), ld.shard, ld.l)
		p.queue.post(event{workDone: ld})
	}()
	return true
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

// settleStrays releases the records of claims this worker made but does
// not lead (strays, see core.stray), at the tick after the claim: a record
// that names a live session of this worker is one no other worker can
// clear while the session lives (the session lists nothing there, yet the
// record names it: see clearance), and this worker, once at its share,
// never looks at the shard again, so the shard would stay unled for as
// long as the session lives. The release goes over the record as read,
// If-Match, and only while it still names the stray claim exactly
// (strayRead). A read or write that fails is tried at the next tick.
func (s *loopState) settleStrays(ctx context.Context) {
	p := s.p
	defer s.flushNotes()
	shards := s.strayList()
	if len(shards) == 0 {
		return
	}
	type res struct {
		data, out []byte // the record as read; the release to write over it
		etag      string
		err       error
	}
	rs := make([]res, len(shards))
	parallel(len(shards), func(i int) {
		r := &rs[i]
		r.data, r.etag, r.err = p.get(ctx, p.shardKey(shards[i]))
	})
	var release []int
	for i, shard := range shards {
		r := &rs[i]
		out, done := s.strayRead(shard, r.data, r.etag, r.err, time.Now())
		switch {
		case out != nil:
			r.out = out
			release = append(release, i)
		case done:
			s.straySettled(shard)
		}
	}
	parallel(len(release), func(k int) {
		r := &rs[release[k]]
		if _, r.err = p.put(ctx, p.shardKey(shards[release[k]]), r.out, r.etag, sha256.Sum256(r.data), time.Time{}); r.err == nil {
			r.out = nil
		}
	})
	for _, i := range release {
		if rs[i].out == nil {
			p.log.Info("released a shard claimed without learning the outcome", "shard", shards[i], "strays", s.strays[shards[i]])
			s.straySettled(shards[i])
		}
	}
}
