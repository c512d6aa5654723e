package pool

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/shardlead"
	"github.com/s3lect/s3lect/store"
)

// session is the worker's lease. One goroutine owns it: the heartbeat's
// (heartbeat), which renews it, ties leaderships to it and ends them all
// when it is lost. Everything else asks that goroutine over reqs (do), so
// that what holds together holds in one step of one goroutine: every
// leadership in leads belongs to the session id, and its lease ends at
// deadline; when the session is lost, every one of them is ended and
// leads is emptied in the same step.
type session struct {
	// Owned by the heartbeat's goroutine while it runs (see do).
	id       string    // the live session; "" while there is none
	deadline time.Time // its lease's end, on the local clock
	leads    map[string]*lead
	claiming map[string]uint64 // the shards the loop is about to claim, with their terms
	ended    map[string]uint64 // terms of leaderships that ended without a release (sessionRecord.Ended)

	// reqs carries requests to the owner, which runs each in turn; stopped
	// is closed once the owner no longer serves them (see do).
	reqs    chan func(*session)
	stopped chan struct{}
	// shown is what Leading reads: the leaderships, published by the
	// owner whenever leads changes.
	shown atomic.Pointer[[]*lead]

	kick chan struct{} // capacity 1: ownership changed, renew soon
	// flush asks for a renewal now, sent after the request; the reply
	// channel (capacity 1) gets its outcome.
	flush chan chan error
}

// do runs f on the session in the owner's goroutine and waits for it.
// Once the owner has stopped serving (Run's end: the loop and every Work
// have returned by then), f runs in the caller, alone with the session.
// The owner itself never calls do.
func (s *session) do(f func(*session)) {
	done := make(chan struct{})
	select {
	case s.reqs <- func(s *session) { f(s); close(done) }:
		<-done
	case <-s.stopped:
		f(s)
	}
}

// serve runs the requests that arrive until stop is closed.
func (s *session) serve(stop <-chan struct{}) {
	for {
		select {
		case f := <-s.reqs:
			f(s)
		case <-stop:
			return
		}
	}
}

// show publishes the leaderships for Leading. Owner only.
func (s *session) show() {
	out := slices.Collect(maps.Values(s.leads))
	s.shown.Store(&out)
}

// note records that this worker's leadership of shard at term ended
// without a release, or (term 0) that a higher term superseded it. Owner
// only; others call noteEnded.
func (s *session) note(shard string, term uint64) {
	if term == 0 {
		delete(s.ended, shard)
	} else {
		s.ended[shard] = max(s.ended[shard], term)
	}
}

// noteEnded is note, asked of the owner.
func (s *session) noteEnded(shard string, term uint64) {
	s.do(func(s *session) { s.note(shard, term) })
}

// endedTerms returns a copy of the terms noted by noteEnded.
func (s *session) endedTerms() map[string]uint64 {
	var out map[string]uint64
	s.do(func(s *session) { out = maps.Clone(s.ended) })
	return out
}

// setClaiming sets the shards the next renewals list as about to be claimed.
func (s *session) setClaiming(m map[string]uint64) {
	s.do(func(s *session) { s.claiming = m })
}

// snapshot returns the live session and its lease's end ("" if none).
func (s *session) snapshot() (id string, deadline time.Time) {
	s.do(func(s *session) { id, deadline = s.id, s.deadline })
	return id, deadline
}

// drop unties ld from the session, if it still is.
func (s *session) drop(ld *lead) {
	s.do(func(s *session) {
		if s.leads[ld.shard] == ld {
			delete(s.leads, ld.shard)
			s.show()
		}
	})
}

// tie makes a leadership of shard for the session id, with the session's
// lease, if id is still the live session and its lease runs at now (by
// now, a function of the clock read in the owner's step); make builds the
// leadership with the lease's end. It returns nil when the session has
// ended.
func (s *session) tie(shard, id string, now func() time.Time, make func(deadline time.Time) *lead) (ld *lead) {
	s.do(func(s *session) {
		if s.id != id || !now().Before(s.deadline) {
			return
		}
		ld = make(s.deadline)
		s.leads[shard] = ld
		s.show()
	})
	return ld
}

// announce lists claiming in the session object, by a renewal of session
// id sent after the call, and returns when that renewal has landed, or
// with an error when it failed, the session changed, or the heartbeat
// did not take the request within a FrequentInterval.
func (p *Pool) announce(ctx context.Context, id string, claiming map[string]uint64) error {
	p.sess.setClaiming(claiming)
	reply := make(chan error, 1)
	t := time.NewTimer(p.fi)
	defer t.Stop()
	select {
	case p.sess.flush <- reply:
	case <-t.C:
		return errors.New("the heartbeat is not renewing")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply: // the heartbeat always answers; reply has room for it
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if cur, _ := p.sess.snapshot(); cur != id {
		return errors.New("the session changed")
	}
	return nil
}

// listing returns the shards of the live leaderships, with their terms,
// those about to be claimed, and the terms of those ended unreleased.
// Owner only.
func (s *session) listing() (map[string]uint64, map[string]uint64, map[string]uint64) {
	out := make(map[string]uint64, len(s.leads))
	for name, l := range s.leads {
		out[name] = l.term
	}
	return out, maps.Clone(s.claiming), maps.Clone(s.ended)
}

// renewSoon asks the heartbeat for an early renewal, so that the others
// learn of a change of ownership without waiting a whole interval.
func (s *session) renewSoon() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// lead is one leadership of a shard by this worker.
type lead struct {
	shard   string
	term    uint64
	session string
	l       *s3lect.Leadership
	c       shardlead.Control
	sum     [32]byte // the SHA-256 of the claim's bytes
	etag    string   // the claim's ETag: the release goes over it

	// Loop-owned: its context's end was seen, Work returned, Exit was
	// called (Resign returns), the record was released or left to expire.
	ended, workDone, exited, settled bool
	// over: its context has ended, or the core has ended it, as the
	// decisions count it (loopState.sync).
	over bool
}

// heartbeat keeps the worker's session alive: it opens a session, renews
// it every FrequentInterval, extends every leadership tied to it after
// each renewal, and ends them all when a renewal fails. Then it opens a
// new session. When ctx ends it writes the session object released.
//
// Its goroutine owns the session (see session.do): it serves the others'
// requests while it waits, for a renewal or for a store call (await), and
// after it has stopped, until ctx ends.
func (p *Pool) heartbeat(ctx context.Context) {
	ss := &p.sess
	defer close(ss.stopped)
	defer ss.serve(ctx.Done())
	var lastData []byte
	var lastTag string
	opened := map[string]bool{} // the sessions this process opened
	for ctx.Err() == nil {
		id := newSessionID()
		var data []byte
		var tag string
		var err error
		p.await(func() { data, tag, err = p.get(ctx, p.keySession) })
		if err != nil {
			p.log.Warn("cannot read the session object", "err", err)
			p.nap(ctx, p.now().Add(p.fi))
			continue
		}
		if stop, wait := p.twinLives(data); stop {
			return
		} else if wait {
			p.nap(ctx, p.now().Add(p.fi))
			continue
		}
		if prev, err := parseSession(data); err == nil && prev.Worker == p.cfg.ID {
			// The terms an earlier session (of this process, or of one
			// that ran before it) led or knew of live on in this one.
			for shard, term := range prev.Shards {
				ss.note(shard, term)
			}
			for shard, term := range prev.Ended {
				ss.note(shard, term)
			}
		}
		first := p.now()
		deadline := first.Add(p.lt - p.margin)
		out := encode(sessionRecord{Pool: formatVersion, Worker: p.cfg.ID, Session: id, TTL: ttlMillis(p.lt), LastUpdated: time.Now(),
			Ended: maps.Clone(ss.ended), Addr: p.addr()})
		over := sha256.Sum256(data)
		p.await(func() { tag, err = p.put(ctx, p.keySession, out, tag, over, deadline) })
		if err == nil && !p.now().Before(deadline) {
			err = errLate
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("cannot open a session", "err", err)
			}
			if p.displaced(ctx, err, opened) {
				return
			}
			p.nap(ctx, p.now().Add(p.fi))
			continue
		}
		opened[id] = true
		ss.id, ss.deadline = id, deadline
		p.hub.own(tag, out)
		p.stats.sessions.Add(1)
		p.queue.post(event{})
		lastData, lastTag = out, tag
		sent := first
		for seq := uint64(1); ; seq++ {
			ok, reply := p.waitRenewal(ctx, sent)
			if !ok {
				p.closeSession(id, lastData, lastTag)
				return
			}
			sent = p.now()
			shards, claiming, ended := ss.listing()
			out := encode(sessionRecord{Pool: formatVersion, Worker: p.cfg.ID, Session: id, Seq: seq,
				Held: sent.Sub(first).Milliseconds(), TTL: ttlMillis(p.lt), LastUpdated: time.Now(), Shards: shards, Claiming: claiming, Ended: ended,
				Addr: p.addr()})
			deadline, over := ss.deadline, sha256.Sum256(lastData)
			var tag string
			var err error
			p.await(func() { tag, err = p.put(ctx, p.keySession, out, lastTag, over, deadline) })
			// Leaderships tied to the session while the renewal was in
			// flight (tie) had its lease as it stood: they are extended
			// or ended with the others, in this step.
			replied := p.now()
			p.noteRTT(replied.Sub(sent))
			cause := renewalOutcome(err, replied, ss.deadline)
			if cause == nil {
				// The reply came while the lease was live: it now runs
				// from this round's send.
				ss.deadline = sent.Add(p.lt - p.margin)
				for _, l := range ss.leads {
					l.c.Extend(ss.deadline)
				}
				lastData, lastTag = out, tag
				p.hub.own(tag, out)
				reportFlush(reply, nil)
				continue
			}
			reportFlush(reply, fmt.Errorf("pool: renew the session: %w", cmp.Or(err, errLate)))
			for _, l := range ss.leads {
				l.c.End(cause)
			}
			clear(ss.leads)
			ss.show()
			ss.id, ss.deadline = "", time.Time{}
			p.hub.own("", nil)
			p.queue.post(event{})
			if ctx.Err() != nil {
				p.closeSession(id, lastData, lastTag)
				return
			}
			p.log.Warn("session lost; its shards are left to the other workers", "err", err)
			if p.displaced(ctx, err, opened) {
				return
			}
			break
		}
		p.nap(ctx, p.now().Add(p.fi))
	}
}

// await runs the store call f in a goroutine of its own and serves the
// session's requests until it returns: a renewal in flight never holds
// the loop up. f must not touch the session. Heartbeat only.
func (p *Pool) await(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	for {
		select {
		case <-done:
			return
		case r := <-p.sess.reqs:
			r(&p.sess)
		}
	}
}

// nap waits until local time t or until ctx ends, serving the session's
// requests. Heartbeat only.
func (p *Pool) nap(ctx context.Context, t time.Time) {
	timer := time.NewTimer(max(p.realUntil(t), 0))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case r := <-p.sess.reqs:
			r(&p.sess)
		case <-ctx.Done():
			return
		}
	}
}

// displaced notes, after a write of the session object refused by a
// precondition (err), the session of this worker's ID that this process
// never opened which the object now holds, with its seq. It reports
// false: a record seen once is not proof of a twin (a restarted worker's
// earlier incarnation, or an old version restored, leaves one). twinLives
// decides at the next read.
func (p *Pool) displaced(ctx context.Context, err error, opened map[string]bool) bool {
	if !errors.Is(err, store.ErrPreconditionFailed) || mutNoDuplicateCheck || ctx.Err() != nil {
		return false
	}
	var data []byte
	var tag string
	var gerr error
	p.await(func() { data, tag, gerr = p.get(ctx, p.keySession) })
	if gerr != nil || tag == "" {
		return false
	}
	noteTwin(p.twins, data, p.cfg.ID, opened)
	return false
}

// noteTwin notes in twins the session record data holds, read from this
// worker's (id) session object after a write of it was refused, when it
// is a live session of id that this process never opened (opened): a
// session that displaced this one.
func noteTwin(twins map[string]twin, data []byte, id string, opened map[string]bool) {
	if rec, err := parseSession(data); err == nil && rec.Worker == id && !rec.Released && !opened[rec.Session] {
		if _, seen := twins[rec.Session]; !seen {
			twins[rec.Session] = twin{seq: rec.Seq}
		}
	}
}

// twinLives looks at the session object's bytes data, read before
// opening a session, for another process running with this worker's ID:
// a session that displaced this worker, seen again at a higher seq twice
// (it renews; a restored version never does, and a dead incarnation's
// last write landing late advances it once at most). On the first
// advance it reports wait: the worker looks again a FrequentInterval
// later instead of opening a session over it. On the second it stops Run
// with ErrDuplicateID and reports stop.
func (p *Pool) twinLives(data []byte) (stop, wait bool) {
	err, wait := twinCheck(p.twins, data, p.cfg.ID)
	if err != nil {
		p.stopRun(err)
		return true, false
	}
	return false, wait
}

// twinCheck is twinLives' decision, on twins (noteTwin) and the session
// object's bytes data of worker id: the error Run returns (a twin seen
// advancing twice), or wait (seen advancing once).
func twinCheck(twins map[string]twin, data []byte, id string) (stop error, wait bool) {
	rec, err := parseSession(data)
	if err != nil || rec.Worker != id || mutNoDuplicateCheck {
		return nil, false
	}
	tw, seen := twins[rec.Session]
	if !seen || rec.Seq <= tw.seq {
		return nil, false
	}
	tw.seq, tw.advances = rec.Seq, tw.advances+1
	twins[rec.Session] = tw
	if tw.advances < 2 {
		return nil, true
	}
	return fmt.Errorf("%w: another process runs as worker %q (its session %s overwrote this one's and renews); give every worker a unique ID, such as its pod or host name",
		ErrDuplicateID, id, rec.Session), false
}

// twin is a session of this worker's ID that this process never opened,
// seen displacing it: its highest seq seen, and how often it rose.
type twin struct {
	seq      uint64
	advances int
}

// reportFlush sends the outcome of a flushed renewal, if one was asked for.
func reportFlush(reply chan error, err error) {
	if reply != nil {
		reply <- err
	}
}

// waitRenewal waits until the next renewal is due, or a quarter interval
// after the last one when ownership changed, or until the loop asks for
// a renewal now (flush: its reply channel is returned). It returns false
// when ctx ends.
//
// Renewals are due on the wall clock's multiples of FrequentInterval (at
// least a quarter interval after the last), and the workers list each
// other's session objects shortly after them (watchOffset): with
// wall clocks roughly in step, every worker first sees a renewal about as
// soon as it lands, so all survivors of a death find it at about the same
// time. The wall clock only times the calls; no lease is measured on it.
func (p *Pool) waitRenewal(ctx context.Context, sent time.Time) (bool, chan error) {
	due := p.slot(sent.Add(p.fi/4), 0)
	t := time.NewTimer(max(p.realUntil(due), 0))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.sess.kick:
			if early := sent.Add(p.fi / 4); p.now().Before(early) {
				return p.sleepOrFlush(ctx, early)
			}
		case reply := <-p.sess.flush:
			return true, reply
		case r := <-p.sess.reqs:
			r(&p.sess)
			continue
		case <-ctx.Done():
			return false, nil
		}
		return true, nil
	}
}

// sleepOrFlush waits until local time t, or until the loop asks for a
// renewal now.
func (p *Pool) sleepOrFlush(ctx context.Context, t time.Time) (bool, chan error) {
	timer := time.NewTimer(max(p.realUntil(t), 0))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return true, nil
		case reply := <-p.sess.flush:
			return true, reply
		case r := <-p.sess.reqs:
			r(&p.sess)
		case <-ctx.Done():
			return false, nil
		}
	}
}

// slot returns the first local time not before after at which the wall
// clock reads a multiple of FrequentInterval plus offset.
func (p *Pool) slot(after time.Time, offset time.Duration) time.Time {
	now := p.now()
	wall := time.Now().Add(after.Sub(now)) // the wall clock at after, near enough
	next := wall.Truncate(p.fi).Add(offset)
	for next.Before(wall) {
		next = next.Add(p.fi)
	}
	return after.Add(next.Sub(wall))
}

// closeSession writes the session object released, over the session's last
// write, when the worker stops. Its leaderships have ended by then.
func (p *Pool) closeSession(id string, lastData []byte, lastTag string) {
	// A quarter LeaderTimeout, as the shards' releases (releaseAll): a worker
	// cut off from the store stops within its lease.
	p.hub.own("", nil)
	timeout := p.lt / 4
	if mutSerialRelease {
		timeout = 3 * p.fi
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := encode(sessionRecord{Pool: formatVersion, Worker: p.cfg.ID, Session: id, Seq: ^uint64(0), TTL: ttlMillis(p.lt), LastUpdated: time.Now(), Released: true,
		Ended: maps.Clone(p.sess.ended)})
	var err error
	p.await(func() { _, err = p.put(ctx, p.keySession, out, lastTag, sha256.Sum256(lastData), time.Time{}) })
	if err != nil {
		p.log.Info("session not released; the other workers wait for it to expire", "err", err)
		return
	}
	p.closed = out
}

// event is what reaches the loop from outside it: a leadership's context
// ended, a Work call returned, or (neither set) the session changed.
type event struct {
	ended, workDone *lead
	released        *lead // a release written (err nil) or given up (err)
	err             error
}

// eventQueue carries events to the loop without ever blocking the sender.
type eventQueue struct {
	mu   sync.Mutex
	evs  []event
	wake chan struct{} // capacity 1: events are waiting
}

func (q *eventQueue) post(ev event) {
	q.mu.Lock()
	q.evs = append(q.evs, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) take() []event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	return evs
}

// renewalOutcome decides on a renewal's outcome (err), its reply taken in
// at local time replied, with the session's lease ending at deadline
// (docs/pool-protocol.md, "The session's lease"): nil when the lease now
// runs from the renewal's send; otherwise the cause that ends every
// leadership tied to the session: ErrLeadershipLost when the object no
// longer held the session's last write (another wrote it), else
// ErrLeaseExpired (the renewal failed, or its reply came after the
// lease's end: the leaderships' own timers have ended them by then).
func renewalOutcome(err error, replied, deadline time.Time) error {
	switch {
	case err == nil && (replied.Before(deadline) || mutLateReply):
		return nil
	case errors.Is(err, store.ErrPreconditionFailed):
		return s3lect.ErrLeadershipLost
	}
	return s3lect.ErrLeaseExpired
}
