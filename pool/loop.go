package pool

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// errHandedOver is the cause of a leadership the pool ended to hand its
// shard to a worker below its share.
var errHandedOver = fmt.Errorf("%w: handed over to balance the pool", s3lect.ErrResigned)

// loopState is what the loop knows; only the goroutine running Run
// touches it.
type loopState struct {
	p       *Pool
	order   []string              // the shards, in an order every worker shares (shardHash)
	mine    map[string]*lead      // this worker's leaderships not yet over (Work running or release pending)
	peers   map[string]*peerView  // by worker: what its session object showed
	shards  map[string]*shardView // by shard, for the shards this worker has looked at (see shard)
	peak    int                   // the most entries shards has had since it was last rebuilt
	members []string
	next    time.Time // the next tick, on the local clock

	unbalancedAt time.Time // when this worker last saw the pool become unbalanced; zero while balanced

	// memberTTL is the ttl the member list states for each member: the
	// longest lease it has run with (membersRecord.TTL).
	memberTTL map[string]int64

	// closing holds the releases that wait since Run's context ended, and
	// stopAt is when the loop first saw it ended (see releaseAll).
	closing []*lead
	stopAt  time.Time

	// What the last look saw (watch.go): its view's live workers, the
	// member list it read, and when a shard it set aside is due again.
	// pruneAt and pruneWait pace the looks that only prune.
	lookLive, lookMembers []string
	membersTag, lookTag   string // the member list's ETag as last read, and as the last look read it
	lookAt                time.Time
	pruneAt, settleAt     time.Time
	pruneWait, settleWait time.Duration
	settleStuck           bool           // the last two looks found the same counts, not settled
	lookCounts            map[string]int // the last look's counts
	listWarned            bool           // a failed listing was logged at Warn (until one succeeds)

	// strays are this worker's claims whose outcome it never learnt (every
	// attempt failed after one may have landed), or that landed for a
	// session already over: records that may name a session of its own at a
	// term it does not lead. See settleStrays.
	strays map[string]stray

	// listedAt is when a read of the member list first found this worker
	// in it. It claims nothing before a FrequentInterval after that, so
	// that workers that start together see each other first.
	listedAt time.Time
}

// peerView is one worker's session object as this worker has read it.
type peerView struct {
	read   bool
	sight  sighting
	seenAt time.Time // when the current sighting was first seen
	// session is the session the current sighting names ("" when absent or
	// not a session record), and runStart when this worker first saw a
	// sighting of the run of sightings naming it that goes on to now: a
	// session's writes are contiguous, so no other session wrote between.
	session  string
	runStart time.Time
	rec      sessionRecord
	ok       bool  // rec is a valid session record of this worker, its session's latest write as far as this worker knows
	ttl      int64 // the longest ttl its session records have stated
	// gap is set when a read of the object failed: the next sighting,
	// even the same as before, counts from its own read (an object can
	// change and be restored to the same bytes while a worker cannot see).
	gap bool
	// maxSession and maxSeq are the highest write of a session seen: a
	// record of that session with a lower seq is an older write restored.
	maxSession string
	maxSeq     uint64
	warned     bool // a failed read was logged at Warn (until one succeeds)
	// raw is the session record the object holds, restored or not: the
	// terms it lists count (listedTerm, prune) even when it says nothing
	// of what its session leads now.
	raw sessionRecord
	// advanced reports that rec followed a lower seq of its session seen
	// by this worker: it is not an older write restored (which a worker
	// that never saw the later ones could not otherwise tell).
	advanced bool
	// tried: this worker has sent a read of the object (readSessions), not
	// only seen it listed.
	tried bool

	// What the listings of the session objects showed (watch.go), on a
	// store that lists: lsight is the ETag the last listing showed ("" when
	// it showed none, or a read or a listing failed since), first listed at
	// lseenAt (that listing's return); lchanged, that a listing showed
	// another ETag than sight (or none) since the last read.
	lsight   string
	lseenAt  time.Time
	lchanged bool
}

func (v *peerView) update(worker string, data []byte, etag string, now time.Time) {
	s := sight(data, etag)
	// A listing that showed this very ETag, with no failed read or listing
	// since, and no read since that returned another ETag, saw that write
	// landed by its return (no ETag names two contents): a session record
	// that counts may be aged from then (below). A listing that showed
	// another ETag proves nothing: it may lag.
	listedAt := now
	if etag != "" && !v.lseenAt.IsZero() && v.lseenAt.Before(now) && (etag == v.lsight || mutStaleList && v.lsight != "") {
		listedAt = v.lseenAt
	}
	if etag != v.lsight && !mutStaleList {
		// This read saw the object hold another write than the listings
		// showed: their sighting ends here. (A listing that lagged showed
		// an older write; put back later, that write must not count from
		// the listing that showed it before this read.)
		v.lsight, v.lseenAt = "", time.Time{}
	}
	if v.read && s == v.sight && !v.gap {
		if v.lchanged {
			// The same bytes again, after a listing showed other ones: an
			// exact copy put back, or a listing that lags. The sighting
			// counts anew; the write is the same (rec, advanced).
			v.lchanged = false
			v.seenAt, v.runStart = later(v.seenAt, listedAt), later(v.runStart, listedAt)
		}
		return
	}
	v.gap, v.lchanged = false, false
	v.rec, v.ok, v.raw = sessionRecord{}, false, sessionRecord{}
	sess := ""
	if etag != "" {
		if rec, err := parseSession(data); err == nil && rec.Worker == worker {
			v.raw = rec
			v.ttl = max(v.ttl, rec.TTL)
			restored := rec.Session == v.maxSession && rec.Seq < v.maxSeq && !mutNoRestoreCheck
			v.advanced = rec.Session == v.maxSession && rec.Seq > v.maxSeq && v.read || mutNoRestoreCheck
			if rec.Session != v.maxSession || rec.Seq > v.maxSeq {
				v.maxSession, v.maxSeq = rec.Session, rec.Seq
			}
			if !restored {
				// A restored older write says nothing of what its session
				// leads now: it counts as no session record at all.
				v.rec, v.ok, sess = rec, true, rec.Session
			}
		}
	}
	// Only a session record that counts is aged from the listing that
	// first showed it: it is its session's write, landed before that
	// listing returned, and no later write of the session has landed
	// since, or this read would have returned it (the takeover rule).
	// Anything else (a tombstone, an older write restored, something not
	// the pool's) counts from this read.
	first := now
	if v.ok || mutStaleList {
		first = listedAt
	}
	v.sight, v.seenAt = s, first
	if !v.read || sess == "" || sess != v.session {
		v.runStart = first
	}
	v.session, v.read = sess, true
}

// live reports whether the worker's session counts as alive at now (see
// liveUntil).
func (v *peerView) live(now time.Time, lt time.Duration, memberTTL int64) bool {
	return now.Before(v.liveUntil(lt, memberTTL))
}

// liveUntil returns when the worker's session stops counting as alive,
// by what this worker has seen of its object: a session record, not
// released, counts until its wait (the longer of this worker's
// LeaderTimeout and the record's ttl) after it was first seen. A write
// that a listing showed and no read has returned yet counts as a session
// record (a renewal, as far as this worker knows) from that listing on,
// with the longest ttl this worker knows for the worker (memberTTL: the
// member list's); of a read and a listing, the later counts (a listing
// may lag). Liveness only shapes the spread and when to look;
// claims rest on the fresh reads of clearance.
func (v *peerView) liveUntil(lt time.Duration, memberTTL int64) time.Time {
	var until time.Time
	if v.ok && !v.rec.Released {
		until = v.seenAt.Add(wait(lt, v.rec.TTL))
	}
	if v.lsight != "" && v.lsight != v.sight.ETag {
		until = later(until, v.lseenAt.Add(wait(lt, max(v.ttl, memberTTL))))
	}
	return until
}

// shardView is what this worker knows of one shard's record.
type shardView struct {
	highest     uint64    // the highest term seen
	seenRecord  bool      // a record was seen: a later absence is a deletion
	absentSince time.Time // the record absent after one was seen, since
	ownerGone   time.Time // mutation absentaged only: the owner's session object first seen absent
	notBefore   time.Time // do not try before
	candSince   time.Time // unowned in this worker's view, since
	foreign     bool      // not a pool record: never touched
}

// shard returns what this worker knows of a shard, made when it first
// looks at it: a worker that never needs a shard keeps nothing for it.
func (s *loopState) shard(name string) *shardView {
	sv := s.shards[name]
	if sv == nil {
		sv = &shardView{}
		s.shards[name] = sv
		s.peak = max(s.peak, len(s.shards))
	}
	return sv
}

// compact rebuilds shards when it has shrunk to a quarter of its peak
// (after a common start, every shard was looked at): a Go map keeps its
// largest size.
func (s *loopState) compact() {
	if len(s.shards) >= s.peak/4 {
		return
	}
	m := make(map[string]*shardView, len(s.shards))
	for k, v := range s.shards {
		m[k] = v
	}
	s.shards, s.peak = m, len(m)
}

func (s *loopState) init(p *Pool) {
	s.p = p
	s.mine = map[string]*lead{}
	s.peers = map[string]*peerView{}
	s.shards = map[string]*shardView{}
	s.order = slices.Clone(p.cfg.Shards)
	slices.SortFunc(s.order, func(a, b string) int {
		ha, hb := shardHash(a), shardHash(b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
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

// handle takes in one event.
func (s *loopState) handle(ctx context.Context, ev event) {
	p := s.p
	switch {
	case ev.ended != nil:
		ld := ev.ended
		if ld.ended {
			return
		}
		ld.ended = true
		// Its term stays in the session's listing (Ended) until a release
		// puts it in the record: the record may have been deleted.
		p.sess.noteEnded(ld.shard, max(ld.term, s.shard(ld.shard).highest))
		p.sess.mu.Lock()
		if p.sess.leads[ld.shard] == ld {
			delete(p.sess.leads, ld.shard)
		}
		p.sess.mu.Unlock()
		p.sess.renewSoon()
		cause := context.Cause(ld.l.Context())
		switch {
		case errors.Is(cause, s3lect.ErrLeaseExpired) || errors.Is(cause, s3lect.ErrLeadershipLost):
			p.stats.expired.Add(1)
			ld.settled = true // the record stays; the others take it over when the lease has run out
			s.exit(ld, nil)
		case cause == s3lect.ErrResigned || ld.workDone:
			s.release(ctx, ld) // Resign by the user releases at once, as an elector's does
		case !mutResignWaits:
			// A handover or Run's end: the release waits for Work, but
			// the leadership is over for its holder now, so that a
			// Resign called inside Work (defer lead.Resign(ctx))
			// returns at once instead of waiting for a release that
			// waits for Work to return.
			s.exit(ld, nil)
		}
	case ev.workDone != nil:
		ld := ev.workDone
		ld.workDone = true
		switch {
		case !ld.ended:
			ld.c.End(s3lect.ErrResigned) // Work returned while leading: resign
		case !ld.settled:
			s.release(ctx, ld)
		}
		s.forget(ld)
	default:
		s.next = p.now() // the session changed: look again now
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

// forget drops a leadership whose Work has returned and whose record is
// settled.
func (s *loopState) forget(ld *lead) {
	if ld.workDone && ld.settled && s.mine[ld.shard] == ld {
		delete(s.mine, ld.shard)
	}
}

// release writes the shard's record released, over this leadership's
// claim, and ends the leadership for its holder if it had not ended.
// Once Run's context has ended, the release joins the others that wait
// for releaseAll.
func (s *loopState) release(ctx context.Context, ld *lead) {
	if ctx.Err() != nil && !mutSerialRelease {
		s.closing = append(s.closing, ld)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*s.p.fi+2*time.Second)
	defer cancel()
	s.released(ld, s.writeRelease(rctx, ld))
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
		// takes the shard back by the orphan rule if nobody else does.
		s.lookAt = p.now()
	} else {
		p.stats.released.Add(1)
		p.sess.noteEnded(ld.shard, 0) // the released record holds the term
	}
	ld.settled = true
	s.exit(ld, err)
}

// view is one tick's picture of the pool.
type view struct {
	live    []string          // live workers, sorted, this one included while its session lives
	counts  map[string]int    // shards each live worker owns
	listed  map[string]string // shard -> the live worker whose session lists it
	targets map[string]int
}

func (s *loopState) view(now time.Time, me bool) view {
	p := s.p
	v := view{counts: map[string]int{}, listed: map[string]string{}, targets: map[string]int{}}
	if me {
		v.live = append(v.live, p.cfg.ID)
		v.counts[p.cfg.ID] = s.liveMine()
	}
	for id, pv := range s.peers {
		// A worker counts when its session lives, and it is a member, or
		// this worker has read its object (a listing shows every session
		// object ever written: a worker that left long ago and was never
		// read does not count).
		if id == p.cfg.ID || !pv.live(now, p.lt, s.memberTTL[id]) || !pv.read && !slices.Contains(s.members, id) {
			continue
		}
		v.live = append(v.live, id)
		v.counts[id] = len(pv.rec.Shards)
		for shard := range pv.rec.Shards {
			v.listed[shard] = id
		}
	}
	slices.Sort(v.live)
	n, w := len(p.cfg.Shards), len(v.live)
	for i, id := range v.live {
		v.targets[id] = n / w
		if i < n%w {
			v.targets[id]++
		}
	}
	return v
}

// liveMine counts this worker's leaderships that have not ended (their
// end may not have reached the loop yet).
func (s *loopState) liveMine() int {
	n := 0
	for _, ld := range s.mine {
		if ld.l.Context().Err() == nil {
			n++
		}
	}
	return n
}

// tick watches the pool and, when something is to be done, looks at it
// and acts: hands shards over when this worker holds more than its share
// while another holds less, and claims shards nobody live owns while it
// holds less (or any shard left unowned for the orphan wait).
//
// On a store that lists (store.Lister), the watch is one listing of the
// session objects and one read of the member list; the session objects
// themselves are read only when a look is due (watch.go, lookDue).
// Otherwise every tick is a look, reading every member's session object.
func (s *loopState) tick(ctx context.Context) {
	p := s.p
	s.next = p.slot(p.now().Add(p.fi/2), p.fi/4) // a quarter interval after the renewals (waitRenewal)
	id, _ := p.sess.snapshot()
	if id == "" {
		return
	}
	s.settleStrays(ctx)
	listed := s.listSessions(ctx)
	data, tag := s.readMembers(ctx)
	now := p.now()
	look := !listed || s.lookDue(now)
	if look {
		s.readPeers(ctx, data, tag)
		now = p.now()
	}
	v := s.view(now, true)
	s.account(v, now)
	s.supersede(v)
	if look {
		s.looked(v, now)
	}
	need := v.targets[p.cfg.ID] - v.counts[p.cfg.ID]
	if s.listedAt.IsZero() || now.Before(s.listedAt.Add(p.fi)) {
		if !s.listedAt.IsZero() {
			s.next = earliest(s.next, s.listedAt.Add(p.fi))
		}
		return // not yet seen the others long enough to know its share
	}
	if look {
		if need < 0 {
			s.handOver(v, -need)
		}
		// Shards found taken, or not yet free, are set aside (notBefore), so
		// every round tries others. A look claims up to the worker's whole
		// deficit (8 store calls at a time: parallel), so that a joiner
		// takes every shard handed over to it at its first look, before the
		// orphan rule can give one to another worker.
		budget := max(need, 1)
		for round := 0; round < 16 && budget > 0 && ctx.Err() == nil; round++ {
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
	for _, wid := range v.live {
		if pv := s.peers[wid]; wid != p.cfg.ID && pv != nil {
			s.next = earliest(s.next, pv.liveUntil(p.lt, s.memberTTL[wid]))
		}
	}
	if look {
		s.lookAt = s.pending(v, now)
	}
	if s.lookAt.After(now) {
		s.next = earliest(s.next, s.lookAt)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// account updates the rebalancing figures from a view: the pool is
// balanced when every shard is owned and every live worker owns ⌊N/W⌋ or
// ⌈N/W⌉ of them.
func (s *loopState) account(v view, now time.Time) {
	n, w := len(s.p.cfg.Shards), len(v.live)
	balanced := w > 0
	sum := 0
	for _, id := range v.live {
		c := v.counts[id]
		sum += c
		if c < n/w || c > (n+w-1)/w {
			balanced = false
		}
	}
	if sum != n {
		balanced = false
	}
	switch {
	case balanced && !s.unbalancedAt.IsZero():
		s.p.stats.rebalanced(now.Sub(s.unbalancedAt))
		s.unbalancedAt = time.Time{}
	case !balanced && s.unbalancedAt.IsZero():
		s.unbalancedAt = now
	}
	s.p.stats.setView(v, balanced)
}

// handOver ends up to n of this worker's leaderships, when some other live
// worker holds less than its share. Their shards are released once their
// Work has returned.
func (s *loopState) handOver(v view, n int) {
	p := s.p
	deficit := 0
	for _, id := range v.live {
		if id != p.cfg.ID {
			deficit += max(v.targets[id]-v.counts[id], 0)
		}
	}
	n = min(n, deficit)
	for i := len(s.order) - 1; i >= 0 && n > 0; i-- {
		if ld := s.mine[s.order[i]]; ld != nil && ld.l.Context().Err() == nil {
			p.stats.handovers.Add(1)
			p.log.Debug("handing a shard over", "shard", ld.shard, "live", v.live, "counts", v.counts, "targets", v.targets)
			ld.c.End(errHandedOver)
			n--
		}
	}
}

// wanted returns the shards to look at now and how many of them to claim
// at most: unowned ones, as many as it needs and as many again (others may
// have claimed some already, unknown to its view), or else at most one
// that has stayed unowned for the orphan wait (see orphanWait). (A
// handful more, not twice as many: at a common start every worker needs
// many, and a burst of reads would slow the store for every session.)
//
// The workers that see the same pool share the unowned shards out without
// racing: each lists them in the order every worker shares (s.order), and
// starts at the sum of the deficits of the live workers ranked before it,
// so that each takes its own run of the list. After a death every
// survivor sees the same dead worker's shards unowned at about the same
// moment, and each claims its deficit in one look; a race lost (views
// that differ) costs one precondition failure and a look further on.
func (s *loopState) wanted(v view, need int, now time.Time) ([]string, int) {
	p := s.p
	var free []string // unowned in this worker's view, in the shared order
	var orphan string
	orphanWait := s.orphanWait(v)
	for _, name := range s.order {
		if s.mine[name] != nil {
			s.shard(name).candSince = time.Time{}
			continue
		}
		if v.listed[name] != "" {
			// Another live worker owns it: forget it, so that a worker
			// keeps state only for its own shards and those it looks at.
			// What is lost cannot matter: any term this worker led there
			// was overwritten by the claim of the one that lists it.
			delete(s.shards, name)
			continue
		}
		sv := s.shard(name)
		if sv.foreign {
			continue
		}
		if sv.candSince.IsZero() {
			sv.candSince = now
		}
		free = append(free, name)
		if orphan == "" && !now.Before(sv.notBefore) && !now.Before(sv.candSince.Add(orphanWait)) {
			orphan = name
		}
	}
	if need <= 0 {
		if orphan == "" {
			return nil, 0
		}
		return []string{orphan}, 1
	}
	start := 0
	for _, id := range v.live {
		if id == p.cfg.ID {
			break
		}
		start += max(v.targets[id]-v.counts[id], 0)
	}
	look := need + min(need, 8) + 2
	want := make([]string, 0, look)
	for i := range free {
		name := free[(start+i)%len(free)]
		if now.Before(s.shards[name].notBefore) {
			continue
		}
		if want = append(want, name); len(want) == look {
			break
		}
	}
	return want, need
}

// orphanWait is how long a shard must stay unowned in this worker's view
// before it claims the shard whatever its share: the longest lease among
// the live workers, its own included. A worker with a longer
// FrequentInterval (a rolling change of configuration) then has had at
// least two looks at a shard another worker released for it, before that
// worker may take it back.
func (s *loopState) orphanWait(v view) time.Duration {
	d := s.p.lt
	for _, id := range v.live {
		if pv := s.peers[id]; id != s.p.cfg.ID && pv != nil && pv.ok {
			d = wait(d, pv.rec.TTL)
		}
	}
	return d
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
	// Listed means named, with a ttl as long as this worker's lease.
	listed := slices.Contains(m.Workers, p.cfg.ID) && (m.TTL[p.cfg.ID] >= ttlMillis(p.lt) || mutNoMemberTTL) && m.Left[p.cfg.ID] == ""
	s.membersTag = tag
	if listed && s.listedAt.IsZero() {
		s.listedAt = p.now()
	}
	s.noteMemberTTL(m)
	if !listed {
		s.listedAt = time.Time{}
		m.Pool = formatVersion
		if !slices.Contains(m.Workers, p.cfg.ID) {
			m.Workers = append(slices.Clone(m.Workers), p.cfg.ID)
			slices.Sort(m.Workers)
		}
		m.TTL = maps.Clone(m.TTL)
		if m.TTL == nil {
			m.TTL = map[string]int64{}
		}
		m.TTL[p.cfg.ID] = max(m.TTL[p.cfg.ID], ttlMillis(p.lt))
		if m.Left[p.cfg.ID] != "" {
			m.Left = maps.Clone(m.Left)
			delete(m.Left, p.cfg.ID)
		}
		if _, err := p.put(ctx, p.keyMembers, encode(m), tag, sha256.Sum256(data), time.Time{}); err != nil {
			p.log.Info("cannot add this worker to the member list; trying again", "err", err)
			s.next = p.now().Add(p.fi / 4)
		}
	}
	s.members = m.Workers
	return data, tag
}

// readPeers reads the session object of every other member, and of every
// worker that has left the member list since the last look (so that a
// worker that took itself off when it stopped is seen released), then
// takes members whose sessions are over off the list (data and tag: the
// list as readMembers read it).
func (s *loopState) readPeers(ctx context.Context, data []byte, tag string) {
	p := s.p
	var others []string
	for _, id := range s.members {
		if id != p.cfg.ID {
			others = append(others, id)
		}
	}
	for _, id := range s.lookMembers {
		if id != p.cfg.ID && !slices.Contains(s.members, id) {
			others = append(others, id)
		}
	}
	sent := s.readSessions(ctx, others)
	if tag != "" && !mutKeepMembers {
		s.prune(ctx, data, tag, sent)
	}
}

// noteMemberTTL takes in the ttls a member list states. They only grow:
// a member's lease as the list once stated it is waited out even after the
// list was deleted.
func (s *loopState) noteMemberTTL(m membersRecord) {
	if s.memberTTL == nil {
		s.memberTTL = map[string]int64{}
	}
	if mutNoMemberTTL {
		return
	}
	for w, ttl := range m.TTL {
		s.memberTTL[w] = max(s.memberTTL[w], ttl)
	}
}

// prune takes the members whose sessions are over, and whose objects list
// no term that a live session has not superseded, off the member list,
// so that the workers stop reading them. Only the live worker with the
// lowest ID does it, so that the others do not race it for the list. A
// member goes when its session object holds a released session record,
// or the same session record (or tombstone, or anything not a session
// record) has stayed unchanged for a lease: whatever session it had has
// ended, and a new one adds the worker again (and claims nothing before
// a FrequentInterval after that). An absent object is not enough: an
// absence is not a sighting (see bury).
func (s *loopState) prune(ctx context.Context, data []byte, tag string, sent map[string]time.Time) {
	p := s.p
	now := p.now()
	// The terms the live sessions hold, this worker's included: a member
	// whose object lists a term not superseded here stays, since a claim
	// after a deleted record needs that term (sessionRecord.Ended).
	held := map[string]uint64{}
	for _, ld := range s.mine {
		held[ld.shard] = max(held[ld.shard], ld.term)
	}
	for w, pv := range s.peers {
		if pv.live(now, p.lt, s.memberTTL[w]) {
			for shard, term := range pv.rec.Shards {
				held[shard] = max(held[shard], term)
			}
		}
	}
	superseded := func(rec sessionRecord) bool {
		for _, m := range []map[string]uint64{rec.Shards, rec.Ended} {
			for shard, term := range m {
				if held[shard] <= term {
					return false
				}
			}
		}
		return true
	}
	var gone []string
	for _, w := range s.members {
		pv := s.peers[w]
		readAt, read := sent[w]
		switch {
		case w == p.cfg.ID || !read || pv == nil:
		case pv.live(now, p.lt, s.memberTTL[w]) && w < p.cfg.ID:
			return // a live worker with a lower ID prunes
		case pv.sight.ETag == "" || !superseded(pv.raw):
		case pv.ok && pv.rec.Released:
			gone = append(gone, w)
		case !readAt.Before(pv.seenAt.Add(wait(p.lt, max(pv.ttl, pv.rec.TTL, s.memberTTL[w])))):
			gone = append(gone, w)
		}
	}
	if len(gone) == 0 {
		return
	}
	m, err := parseMembers(data)
	if err != nil {
		return
	}
	m.Workers = slices.DeleteFunc(slices.Clone(m.Workers), func(w string) bool { return slices.Contains(gone, w) })
	m.TTL, m.Left = maps.Clone(m.TTL), maps.Clone(m.Left)
	for _, w := range gone {
		delete(m.TTL, w)
		delete(m.Left, w)
	}
	if _, err := p.put(ctx, p.keyMembers, encode(m), tag, sha256.Sum256(data), time.Time{}); err != nil {
		p.log.Info("cannot take members whose sessions are over off the member list", "members", gone, "err", err)
		return
	}
	p.log.Info("took members whose sessions are over off the member list", "members", gone)
	s.members = m.Workers
}

// readSessions reads the session objects of workers, in parallel, and
// updates their views. It returns the local time each read was sent.
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
		pv := s.peers[w]
		if pv == nil {
			pv = &peerView{}
			s.peers[w] = pv
		}
		pv.tried = true
		if err := out[i].err; err != nil {
			pv.gap = !mutNoRestoreCheck
			// The listings' sighting breaks too: the next one counts from
			// its own listing.
			pv.lsight, pv.lseenAt = "", time.Time{}
			if !pv.warned && ctx.Err() == nil {
				pv.warned = true
				p.log.Warn("cannot read a worker's session object; no shard can be claimed while it cannot be read", "of", w, "err", err)
			}
			continue
		}
		pv.warned = false
		pv.update(w, out[i].data, out[i].etag, out[i].at)
		sent[w] = out[i].sent
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

// attempt is one shard this tick tries to take.
type attempt struct {
	shard  string
	data   []byte // the record as read
	etag   string
	rec    shardRecord
	term   uint64 // the term to write
	cand   bool   // a claim may be written, once the session reads clear it
	ready  bool
	result error
	sent   bool // the write was sent: a failure leaves its outcome unknown
	tag    string
	out    []byte
}

// stray is a claim of this worker's that it does not lead: the session
// and term its record would name.
type stray struct {
	session string
	term    uint64
}

// claim tries to take the shards in want, as the protocol allows
// (docs/protocol.md, section 10): read each shard record; list the claims
// in this worker's session object (its intent); read the member list and
// every other worker's session object; write a claim only where every
// session read shows that it cannot lead the shard (clearance), with
// If-Match on the record read (If-None-Match where absent) and a term
// above every term read. It returns how many it won. It writes at most
// limit claims, in the order of want.
func (s *loopState) claim(ctx context.Context, want []string, limit int, id string) (won int) {
	p := s.p
	at := make([]attempt, len(want))
	parallel(len(want), func(i int) {
		a := &at[i]
		a.shard = want[i]
		a.data, a.etag, a.result = p.get(ctx, p.shardKey(a.shard))
	})
	now := p.now()
	own := p.sess.endedTerms()
	for i := range at {
		a := &at[i]
		sv := s.shard(a.shard)
		sv.highest = max(sv.highest, own[a.shard])
		if a.result != nil {
			sv.notBefore = now.Add(p.fi)
			continue
		}
		if a.etag == "" {
			if sv.seenRecord {
				// Deleted: watched for LeaderTimeout, as an elector
				// watches a deleted lockfile.
				if sv.absentSince.IsZero() {
					sv.absentSince = now
				}
				if now.Before(sv.absentSince.Add(p.lt)) {
					sv.notBefore = sv.absentSince.Add(p.lt)
					continue
				}
			}
			a.term, a.cand = sv.highest+1, true
			continue
		}
		rec, err := parseShard(a.data)
		if err == nil && rec.Shard != a.shard {
			err = fmt.Errorf("%w: the record names shard %q", errNotPool, rec.Shard)
		}
		if err != nil {
			if !sv.foreign {
				p.log.Error("shard record is not the pool's; the shard is left alone until it is", "shard", a.shard, "err", err)
			}
			sv.foreign = true
			continue
		}
		sv.seenRecord, sv.absentSince = true, time.Time{}
		sv.highest = max(sv.highest, rec.Term)
		a.rec, a.cand = rec, true
		a.term = sv.highest + 1
		// A record naming this very session is claimed anew, term + 1,
		// like any other: a claim of ours whose reply was lost, landed
		// (perhaps long after, over a deleted record), is never adopted,
		// so a term that another worker may have led since is never led
		// again.
	}
	// The intent: this session lists the shards it is about to claim, with
	// their terms, before it reads the others' sessions. Two workers that
	// claim one shard at once cannot then both find the other clear: each
	// lists before it reads, so the later reader sees the earlier lister.
	// Only the first limit candidates: listing more would stand in the
	// way of the workers whose share they are (see wanted).
	claiming := map[string]uint64{}
	for i := range at {
		if a := &at[i]; a.cand {
			if len(claiming) == limit {
				a.cand = false
				continue
			}
			claiming[a.shard] = a.term
		}
	}
	if len(claiming) == 0 {
		return 0
	}
	if !mutNoIntent {
		if err := p.announce(ctx, id, claiming); err != nil {
			p.sess.setClaiming(nil) // the claims are not made: no renewal lists them from now on
			p.log.Debug("cannot list the claims in the session", "err", err)
			for shard := range claiming {
				s.shard(shard).notBefore = now.Add(p.fi / 4)
			}
			return 0
		}
		// The claims' outcomes are known once claim returns: a renewal
		// drops the intent at once, so that it holds no other worker off
		// any longer than the claims took.
		defer p.announce(ctx, id, nil)
	}
	// Clearance: every other worker's session, read after the records and
	// the intent, by a member list read after them too (a worker that
	// joined since the tick's read may have claimed a shard since, and
	// lost its record to a deletion).
	ws := s.clearanceSet(ctx, at)
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
	if !mutAbsentAged {
		var gone []string
		for _, w := range ws {
			if _, read := sent[w]; read && s.peers[w].sight.ETag == "" {
				gone = append(gone, w)
				delete(sent, w) // not a sighting: looked at again once buried
			}
		}
		s.bury(ctx, gone)
	}
	now = p.now()
	for i := range at {
		a := &at[i]
		if !a.cand {
			continue
		}
		sv := s.shard(a.shard)
		ok, retry := s.cleared(a, ws, sent, now)
		switch {
		case !ok:
			sv.notBefore = retry
		case s.listedTerm(a.shard, ws) >= a.term:
			// A session lists the shard at this term or above (its
			// record deleted or restored): a term must never repeat.
			sv.highest = max(sv.highest, s.listedTerm(a.shard, ws))
			sv.notBefore = now
		default:
			a.ready = true
		}
	}
	// Write the claims, the first limit of those ready.
	for i := range at {
		if a := &at[i]; a.ready {
			if limit > 0 {
				limit--
			} else {
				a.ready = false
			}
		}
	}
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
		if s.won(ctx, a, id) {
			won++
		}
	}
	for i := range at {
		if a := &at[i]; a.ready && a.result != nil {
			p.log.Debug("claim failed", "shard", a.shard, "err", a.result)
			switch {
			case errors.Is(a.result, store.ErrPreconditionFailed):
				s.shard(a.shard).notBefore = p.now().Add(p.fi) // someone else took it: their session will list it
			case a.sent:
				s.stray(a.shard, id, a.term) // it may have landed
			}
		}
	}
	return won
}

// clearanceSet reads the member list afresh and returns the workers whose
// sessions a claim of the attempts must clear: every member of that list,
// of the tick's, every worker this one has read, and every owner a record
// names, this worker only where a record names an earlier session of
// its own.
func (s *loopState) clearanceSet(ctx context.Context, at []attempt) []string {
	p := s.p
	set := map[string]bool{}
	if mutStaleMembers {
		for _, w := range s.members {
			set[w] = true
		}
	} else {
		data, tag, err := p.get(ctx, p.keyMembers)
		if err == nil && tag != "" {
			if m, err := parseMembers(data); err == nil {
				for _, w := range m.Workers {
					set[w] = true
				}
				s.noteMemberTTL(m)
			}
		}
		for _, w := range s.members {
			set[w] = true
		}
		// And every worker this one has read that may still lead (a
		// member list deleted forgets workers): one whose last sighting
		// is a released session, or whose session was over, and that no
		// list names any more, leads nothing, and must add itself to the
		// list again before it claims.
		now := p.now()
		for w, pv := range s.peers {
			if set[w] || !pv.tried {
				continue // a worker only listed, never read, is not one this worker has read
			}
			over := pv.ok && pv.rec.Released ||
				!pv.seenAt.IsZero() && !now.Before(pv.seenAt.Add(wait(p.lt, max(pv.ttl, pv.rec.TTL, s.memberTTL[w]))))
			if !over {
				set[w] = true
			}
		}
	}
	delete(set, p.cfg.ID)
	for i := range at {
		if a := &at[i]; a.cand && a.etag != "" && a.rec.Owner != "" {
			set[a.rec.Owner] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// cleared reports whether the session reads sent at sent show that no
// session of the workers ws, nor an earlier session of this worker's that
// the record names, can lead the attempt's shard; if not, it returns when
// to look again. A failed read is not clear.
func (s *loopState) cleared(a *attempt, ws []string, sent map[string]time.Time, now time.Time) (bool, time.Time) {
	p := s.p
	ok, retry := true, now
	for _, w := range ws {
		if mutNoClearance && w != a.rec.Owner {
			continue
		}
		readAt, read := sent[w]
		if !read || s.peers[w] == nil {
			return false, later(retry, now.Add(p.fi))
		}
		t, busy := s.clearance(w, a.shard, a.rec, a.etag != "")
		if mutAbsentAged && w == a.rec.Owner && s.peers[w].sight.ETag == "" {
			sv := s.shard(a.shard)
			if sv.ownerGone.IsZero() {
				sv.ownerGone = readAt
			}
			t = sv.ownerGone.Add(p.lt)
		}
		switch {
		case !readAt.Before(t):
		case busy:
			// A live worker is claiming it too: the lowest ID looks again
			// first, after the others have dropped their claims.
			backoff := p.fi / 4
			if p.cfg.ID > w {
				backoff = p.fi
			}
			ok, retry = false, later(retry, now.Add(backoff))
		default:
			ok, retry = false, later(retry, t)
		}
	}
	return ok, retry
}

// clearance returns the time from which a read of worker w's session
// object, sent then or later, shows that no session of w can lead shard,
// by what this worker has read of that object (zero: clear now). rec is
// the shard's record as read (present false: absent). The rules
// (docs/protocol.md, section 10):
//
//   - a released session record leads nothing, now or later;
//   - a session that lists the shard (leading it, or about to claim it),
//     or that the record names, is over once that exact sighting has
//     stayed unchanged for L: its lease has run out, and a renewal
//     would have changed the object;
//   - an earlier session the record names, or any session at all when
//     the object holds no session record (a tombstone, something not the
//     pool's), is over once the run of sightings that do not name it has
//     lasted L: a session's writes are contiguous, so it wrote last
//     before that run began;
//   - a session that releases the shard (the record released by it, at
//     the term it lists or above) leads it no more.
//
// L is the longest of this worker's LeaderTimeout, the ttl the record
// states when it names w, and the longest ttl w's records have stated:
// a short lease never cuts a long one short.
func (s *loopState) clearance(w, shard string, rec shardRecord, present bool) (over time.Time, busy bool) {
	p := s.p
	pv := s.peers[w]
	lt := wait(p.lt, max(pv.ttl, pv.rec.TTL, s.memberTTL[w]))
	if present && rec.Owner == w {
		lt = wait(lt, rec.TTL)
	}
	if mutNoTTL {
		lt = p.lt
	}
	if !pv.ok {
		return pv.runStart.Add(lt), false
	}
	if !pv.advanced && w != p.cfg.ID {
		// Not seen to follow an earlier write of its session: it may be an
		// older one restored, so what it says proves nothing until it has
		// stood unchanged for a lease (the session, whatever it leads, is
		// then over).
		over = pv.seenAt.Add(lt)
	}
	if pv.rec.Released {
		return over, false
	}
	named := present && rec.Owner == w
	if named && rec.Session != pv.session {
		over = later(over, pv.runStart.Add(lt))
	}
	if w == p.cfg.ID {
		return over, false // this worker's own intents are its own
	}
	heldTerm, held := pv.rec.Shards[shard]
	_, claiming := pv.rec.Claiming[shard]
	claiming = claiming && !mutNoIntent
	releasedByIt := present && rec.Owner == "" && rec.Session == pv.session && heldTerm <= rec.Term
	leads := named && rec.Session == pv.session || held && !releasedByIt
	if claiming || leads {
		over = later(over, pv.seenAt.Add(lt))
	}
	return over, claiming && !leads && pv.live(s.p.now(), p.lt, s.memberTTL[w])
}

// supersede forgets the ended terms (sessionRecord.Ended) of shards that
// a live session lists at a higher term: that session now holds the
// shard's terms.
func (s *loopState) supersede(v view) {
	for shard, term := range s.p.sess.endedTerms() {
		if w := v.listed[shard]; w != "" && s.peers[w].rec.Shards[shard] > term {
			s.p.sess.noteEnded(shard, 0)
		}
	}
}

// listedTerm returns the highest term the sessions of ws other than this
// worker's, as last read, list for shard (leading or claiming it).
func (s *loopState) listedTerm(shard string, ws []string) uint64 {
	var t uint64
	for _, w := range ws {
		if pv := s.peers[w]; pv != nil && w != s.p.cfg.ID {
			t = max(t, pv.raw.Shards[shard], pv.raw.Claiming[shard], pv.raw.Ended[shard])
		}
	}
	return t
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

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// won turns a successful claim into a leadership, if the session it names
// is still this worker's live session now that the reply has come.
func (s *loopState) won(ctx context.Context, a *attempt, id string) bool {
	p := s.p
	p.sess.mu.Lock()
	if p.sess.id != id || !p.now().Before(p.sess.deadline) {
		p.sess.mu.Unlock()
		p.log.Info("claimed a shard for a session that has ended; releasing it", "shard", a.shard)
		s.stray(a.shard, id, a.term)
		return false
	}
	l, c := p.leads(ctx, a.term, p.sess.deadline)
	ld := &lead{shard: a.shard, term: a.term, session: id, l: l, c: c, sum: sha256.Sum256(a.out), etag: a.tag}
	p.sess.leads[a.shard] = ld
	p.sess.mu.Unlock()
	s.mine[a.shard] = ld
	delete(s.strays, a.shard)
	p.sess.noteEnded(a.shard, 0) // the new leadership's listing holds the shard's terms now
	sv := s.shard(a.shard)
	sv.highest = max(sv.highest, a.term)
	p.stats.claims.Add(1)
	p.log.Debug("won a shard", "shard", a.shard, "term", a.term)
	p.sess.renewSoon()
	context.AfterFunc(ld.l.Context(), func() { p.queue.post(event{ended: ld}) })
	p.works.Add(1)
	go func() {
		defer p.works.Done()
		p.cfg.Work(ld.l.Context(), ld.shard, ld.l)
		p.queue.post(event{workDone: ld})
	}()
	return true
}

// stray notes a claim of shard for session at term whose record may
// stand although this worker does not lead it.
func (s *loopState) stray(shard, session string, term uint64) {
	if mutKeepStrays {
		return
	}
	if s.strays == nil {
		s.strays = map[string]stray{}
	}
	s.strays[shard] = stray{session, term}
}

// settleStrays releases the records of claims this worker made but does
// not lead (strays), at the tick after the claim: a record that names a
// live session of this worker is one no other worker can clear while the
// session lives (the session lists nothing there, yet the record names
// it: see clearance), and this worker, once at its share, never looks at
// the shard again, so the shard would stay unled for as long as the
// session lives. The release goes over the record as read, If-Match, and
// only while it still names the stray claim exactly (the session and the
// term): any other record means the claim never landed or was overwritten,
// and there is nothing to release. A read or write that fails is tried at
// the next tick.
func (s *loopState) settleStrays(ctx context.Context) {
	p := s.p
	if len(s.strays) == 0 {
		return
	}
	for shard := range s.strays {
		if s.mine[shard] != nil {
			delete(s.strays, shard) // claimed again since, and won: its record is a leadership's
		}
	}
	shards := slices.Sorted(maps.Keys(s.strays))
	done := make([]bool, len(shards))
	parallel(len(shards), func(i int) {
		st := s.strays[shards[i]]
		key := p.shardKey(shards[i])
		data, etag, err := p.get(ctx, key)
		if err != nil {
			return
		}
		rec, perr := parseShard(data)
		if etag == "" || perr != nil || rec.Owner != p.cfg.ID || rec.Session != st.session || rec.Term != st.term {
			done[i] = true // not the stray claim: it never landed, or was overwritten
			return
		}
		out := encode(shardRecord{Pool: formatVersion, Shard: shards[i], Session: st.session, Term: st.term, TTL: ttlMillis(p.lt), LastUpdated: time.Now()})
		if _, err := p.put(ctx, key, out, etag, sha256.Sum256(data), time.Time{}); err == nil {
			p.log.Info("released a shard claimed without learning the outcome", "shard", shards[i], "term", st.term)
			done[i] = true
		}
	})
	for i, shard := range shards {
		if done[i] {
			// Released, or never ours: the worker whose share it is takes
			// it at its next look; this one's orphan wait starts again.
			sv := s.shard(shard)
			sv.candSince, sv.highest = time.Time{}, max(sv.highest, s.strays[shard].term)
			delete(s.strays, shard)
		}
	}
}
