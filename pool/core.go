package pool

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// The core holds the pool's decisions (docs/pool-protocol.md, "How the
// code is organised"): what a worker knows of the pool (the other
// workers' sessions as read and listed, the shard records it has looked
// at, the member list, its own leaderships, when to look again), and one
// method per rule of the protocol. Its one entry point is next
// (tick.go): an input (a tick due, a store call's result, a leadership's
// end) and the local time in, the effects out (the calls to make, the
// leaderships to end, the figures, when to wake). It does no I/O, reads
// no clock and starts no goroutine; the loop (loop.go) performs the
// effects and feeds the results back. core_test.go and tick_test.go
// table-test its rules one row each, named after the protocol's
// sections.

// params are the fixed inputs of the decisions.
type params struct {
	id     string        // this worker's ID
	fi, lt time.Duration // FrequentInterval, LeaderTimeout
	ii     time.Duration // InfrequentInterval
	n      int           // the number of shards

	sessions   string // the key prefix of the session objects, for listings
	membersKey string // the member list's key, for the log
	lists      bool   // the store lists (store.Lister, and Config.ReadEachSession unset)
	peer       bool   // peer mode
	serverAddr string // where this worker serves PeerHandler (peer mode)
	debug      bool   // the worker's logger takes Debug lines: the decisions note them (note)
}

// core is what a worker knows of the pool; only the goroutine running Run
// touches it (the loop embeds it).
type core struct {
	cp      params
	ord     *shardOrder           // names, order and byName, shared with the other Pools of this process that name the same shards
	names   []string              // the shards, as Config named them at New
	byName  []uint32              // indexes into names, sorted by name (index)
	order   []uint32              // indexes into names, in an order every worker shares (shardHash)
	mine    map[string]*lead      // this worker's leaderships not yet over (Work running or release pending)
	peers   map[string]*peerView  // by worker: what its session object showed
	shards  map[string]*shardView // by shard, for the shards this worker has looked at (see shard)
	peak    int                   // the most entries shards has had since it was last rebuilt
	members []string

	unbalancedAt time.Time // when this worker last saw the pool become unbalanced; zero while balanced

	// memberTTL is the ttl the member list states for each member: the
	// longest lease it has run with (membersRecord.TTL).
	memberTTL map[string]int64

	// What the last look saw (watch.go): its view's live workers, the
	// member list it read, and when a shard it set aside is due again.
	// pruneAt and pruneWait pace the looks that only prune.
	lookLive, lookMembers []string
	deferLive             []string // the live set whose look waited a tick (deferLook)
	membersTag            string   // the member list's ETag as last read
	// membersSum and lookSum are what the member list says of who is a
	// member (workers, ttl, left: membershipSum) as last read, and as the
	// last look read it. A list that only names a new session of a member
	// (a restart) is no reason to look: every worker would read every
	// session object at each restart.
	membersSum, lookSum   string
	lookAt                time.Time
	pruneAt, settleAt     time.Time
	pruneWait, settleWait time.Duration
	settleStuck           bool           // the last two looks found the same counts, not settled
	lookCounts            map[string]int // the last look's counts

	// Who goes first when two live workers claim one shard (clear): the
	// live workers below their share in this look's view (behind), and
	// whether this look takes up an orphan (need at most zero).
	behind     map[string]bool
	orphanLook bool

	// The watch's timing (watch.go, "When a takeover is due"): asOf is the
	// moment a look begun ahead of a session's end is taken as of (its
	// claims read the sessions that clear them from then on; zero:
	// now); preLook how long such looks took to write their intent, a
	// decaying maximum (lookAhead); listAt the return of the last listing
	// that succeeded, listTook how long listings took (a decaying maximum,
	// listWait); slow, that the last tick found the pool stable and set
	// the next an InfrequentInterval on.
	asOf     time.Time
	preLook  time.Duration
	listAt   time.Time
	listTook time.Duration
	// listFails counts the listings that failed in a row (missedListing);
	// reread, the workers the tick after one reads (listFailed).
	listFails int
	reread    []string
	slow      bool

	// Peer mode (watch.go, watchPeers): storeAt is when the store is to
	// be listed again whatever the hub says (InfrequentInterval after the
	// last listing); doubtUntil, until when the hub's answers are not used
	// (a listing contradicted them).
	storeAt, doubtUntil time.Time

	// strays are this worker's claims whose outcome it never learnt (every
	// attempt failed after one may have landed), or that landed for a
	// session already over: records that may name a session of its own at a
	// term it does not lead. See stray.
	strays map[string][]stray

	// listedAt is when a read of the member list first found this worker
	// in it. It claims nothing before a FrequentInterval after that, so
	// that workers that start together see each other first; grewAt, when
	// a read of the list last found a member the read before did not (see
	// share: a worker that leads nothing waits for the pool to assemble).
	listedAt, grewAt time.Time
	// listedSession is the session listedAt was found with: a tick of
	// another session (one lost and opened again) counts this worker
	// unlisted until a read of the list names the new one (tickStart).
	listedSession string

	// endedTerms is the terms of leaderships that ended unreleased that
	// this worker's session lists (sessionRecord.Ended), as the session
	// gave them at the tick's start (inTick) or its claims' round
	// (inSession), with the core's own notes since (noteEnded). (The
	// heartbeat adds the terms an earlier session listed when it opens a
	// new one.)
	endedTerms map[string]uint64

	// tk is the tick in progress (tick.go), obs what the loop observed
	// before the input (observe).
	tk  tick
	obs observed

	// listWarned: a failed listing was logged at Warn (until one
	// succeeds); peerWarned: a failed request to the hub was logged (until
	// one succeeds); hubReadAt: peer mode, when the hub's session object
	// may be read again after a failed request.
	listWarned, peerWarned bool
	hubReadAt              time.Time

	// notes are the log lines the decisions asked for, until next returns
	// them as effects.
	notes []note
}

// note is one log line a decision asks the loop to write.
type note struct {
	level slog.Level
	msg   string
	args  []any
}

// note asks the loop to log a line. Debug lines are not even built
// unless the logger takes them: some come from every look.
func (c *core) note(level slog.Level, msg string, args ...any) {
	if level < slog.LevelInfo && !c.cp.debug {
		return
	}
	c.notes = append(c.notes, note{level, msg, args})
}

func newCore(cp params, shards []string) core {
	c := core{cp: cp, mine: map[string]*lead{}, peers: map[string]*peerView{}, shards: map[string]*shardView{},
		memberTTL: map[string]int64{}, endedTerms: map[string]uint64{}}
	c.ord = orderOf(shards)
	c.names, c.order, c.byName = c.ord.names, c.ord.order, c.ord.byName
	return c
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
	rec      seenRecord // of the session record: what the decisions read beside session and terms
	ok       bool       // rec is a valid session record of this worker, its session's latest write as far as this worker knows
	ttl      int64      // the longest ttl its session records have stated
	// gap is set when a read of the object failed: the next sighting,
	// even the same as before, counts from its own read (an object can
	// change and be restored to the same bytes while a worker cannot see).
	gap bool
	// maxSession and maxSeq are the highest write of a session seen: a
	// record of that session with a lower seq is an older write restored.
	maxSession string
	maxSeq     uint64
	warned     bool // a failed read was logged at Warn (until one succeeds)
	// terms are the terms the session record the object holds lists,
	// restored or not: they count (listedTerm, prune) even when it says
	// nothing of what its session leads now (then only ok says it leads
	// them: leading).
	terms recordTerms
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
	// lhint is the ETag listings last showed before one failed, first
	// listed at lhintAt, while no successful listing has shown another
	// (or none) and no read has returned another or failed: it keeps the
	// worker's liveness across a failed listing (liveUntil). Unlike
	// lsight, a read is never aged from it: the object may have changed
	// while no listing saw it.
	lhint   string
	lhintAt time.Time

	// In peer mode (watch.go, doubt): stag is the ETag the last listing of
	// the store showed, and peerNew that a hub's digest has named another
	// since. lsum is the content the digest that first named lsight gave
	// for it ("" when a listing of the store did): update ages a read from
	// lseenAt only when it returns that content.
	stag    string
	peerNew bool
	lsum    string
	// distrusted: the store showed a digest wrong about this worker
	// (doubt); digests are not taken in for it until the store shows its
	// object changed (not gone).
	distrusted bool
}

func (v *peerView) update(worker string, data []byte, etag string, now time.Time, index func(string) (uint32, bool)) {
	s := sight(data, etag)
	// A listing that showed this very ETag, with no failed read or listing
	// since, and no read since that returned another ETag, saw that write
	// landed by its return (no ETag names two contents): a session record
	// that counts may be aged from then (below). A listing that showed
	// another ETag proves nothing: it may lag.
	// A hub's digest (peer mode) names the write's content too (lsum): it
	// counts only for those very bytes, so that an ETag a hub names before
	// it is written (revision numbers can be guessed; another pool's can
	// coincide) never ages the write that later gets it.
	listedAt := now
	if etag != "" && !v.lseenAt.IsZero() && v.lseenAt.Before(now) && (etag == v.lsight || mutStaleList && v.lsight != "") &&
		(v.lsum == "" || v.lsum == peerSum(s.Sum) || mutPeerNoSum) {
		listedAt = v.lseenAt
	}
	if etag != v.lsight && !mutStaleList {
		// This read saw the object hold another write than the listings
		// showed: their sighting ends here. (A listing that lagged showed
		// an older write; put back later, that write must not count from
		// the listing that showed it before this read.)
		v.lsight, v.lseenAt, v.lsum = "", time.Time{}, ""
	}
	if etag != v.lhint {
		v.lhint, v.lhintAt = "", time.Time{}
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
	v.rec, v.ok, v.terms = seenRecord{}, false, recordTerms{}
	sess := ""
	if etag != "" {
		if rec, err := parseSession(data); err == nil && rec.Worker == worker {
			v.terms = compactTerms(&rec, index)
			v.ttl = max(v.ttl, rec.TTL)
			restored := rec.Session == v.maxSession && rec.Seq < v.maxSeq && !mutNoRestoreCheck
			v.advanced = rec.Session == v.maxSession && rec.Seq > v.maxSeq && v.read || mutNoRestoreCheck
			if rec.Session != v.maxSession || rec.Seq > v.maxSeq {
				v.maxSession, v.maxSeq = rec.Session, rec.Seq
			}
			if !restored {
				// A restored older write says nothing of what its session
				// leads now: it counts as no session record at all.
				v.rec, v.ok, sess = seenRecord{TTL: rec.TTL, Released: rec.Released, Addr: rec.Addr}, true, rec.Session
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

// seenRecord is what a worker keeps of another's session record beside
// its session (peerView.session) and its terms (recordTerms): a worker
// keeps one for every other worker, so no more than the decisions read.
type seenRecord struct {
	TTL      int64
	Released bool
	Addr     string // where it serves PeerHandler ("" unless in peer mode)
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
// may lag). A listing that failed does not break this: the write the
// listings showed before it counts from the first listing that showed it
// (lhint) until a listing shows another write or none, or a read returns
// another or fails. Liveness only shapes
// the spread and when to look; claims rest on the fresh reads of
// clearance.
func (v *peerView) liveUntil(lt time.Duration, memberTTL int64) time.Time {
	var until time.Time
	if v.ok && !v.rec.Released {
		until = v.seenAt.Add(wait(lt, v.rec.TTL))
	}
	tag, at := v.lsight, v.lseenAt
	if v.lhint != "" && (tag == "" || tag == v.lhint) {
		tag, at = v.lhint, v.lhintAt
	}
	if tag != "" && tag != v.sight.ETag {
		until = later(until, at.Add(wait(lt, max(v.ttl, memberTTL))))
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
	unreleased  bool      // this worker's release of it failed: its record names this worker's live session, which only this worker can free

	// What proves a record older than another write of the shard (stale):
	// the highest term of a claim known to have landed (a record read
	// with it, or a leadership of this worker's), and the last release
	// read (its session and term).
	landed     uint64
	relSession string
	relTerm    uint64
	// The first read of a stale record (stale): its ETag, the session it
	// names, and when this worker found it stale (after reading that
	// session's object).
	staleTag     string
	staleSession string
	staleAt      time.Time
}

// shard returns what this worker knows of a shard, made when it first
// looks at it: a worker that never needs a shard keeps nothing for it.
func (c *core) shard(name string) *shardView {
	sv := c.shards[name]
	if sv == nil {
		sv = &shardView{}
		c.shards[name] = sv
		c.peak = max(c.peak, len(c.shards))
	}
	return sv
}

// compact rebuilds shards when it has shrunk to a quarter of its peak
// (after a common start, every shard was looked at): a Go map keeps its
// largest size.
func (c *core) compact() {
	if len(c.shards) >= c.peak/4 {
		return
	}
	m := make(map[string]*shardView, len(c.shards))
	for k, v := range c.shards {
		m[k] = v
	}
	c.shards, c.peak = m, len(m)
}

// view is one tick's picture of the pool.
type view struct {
	live    []string          // live workers, sorted, this one included while its session lives
	counts  map[string]int    // shards each live worker owns
	listed  map[string]string // shard -> the live worker whose session lists it
	targets map[string]int
}

func (c *core) view(now time.Time, me bool) view {
	v := view{counts: map[string]int{}, listed: map[string]string{}, targets: map[string]int{}}
	if me {
		v.live = append(v.live, c.cp.id)
		v.counts[c.cp.id] = c.liveMine()
	}
	for id, pv := range c.peers {
		// A worker counts when its session lives, and it is a member, or
		// this worker has read its object (a listing shows every session
		// object ever written: a worker that left long ago and was never
		// read does not count).
		if id == c.cp.id || !pv.live(now, c.cp.lt, c.memberTTL[id]) || !pv.read && !slices.Contains(c.members, id) {
			continue
		}
		v.live = append(v.live, id)
		v.counts[id] = pv.leading().n
		for i := range pv.leading().shards.all() {
			v.listed[c.names[i]] = id
		}
	}
	slices.Sort(v.live)
	n, w := c.cp.n, len(v.live)
	for i, id := range v.live {
		v.targets[id] = n / w
		if i < n%w {
			v.targets[id]++
		}
	}
	return v
}

// liveMine counts this worker's leaderships that have not ended, as the
// loop last saw them (lead.over).
func (c *core) liveMine() int {
	n := 0
	for _, ld := range c.mine {
		if !ld.over {
			n++
		}
	}
	return n
}

// account updates the rebalancing figures from a view: the pool is
// balanced when every shard is owned and every live worker owns ⌊N/W⌋ or
// ⌈N/W⌉ of them. It reports whether it is, and, when it has just become
// so, how long it was not (rebalanced > 0).
func (c *core) account(v view, now time.Time) (balanced bool, rebalanced time.Duration) {
	n, w := c.cp.n, len(v.live)
	balanced = w > 0
	sum := 0
	for _, id := range v.live {
		cnt := v.counts[id]
		sum += cnt
		if cnt < n/w || cnt > (n+w-1)/w {
			balanced = false
		}
	}
	if sum != n {
		balanced = false
	}
	switch {
	case balanced && !c.unbalancedAt.IsZero():
		rebalanced = max(now.Sub(c.unbalancedAt), time.Nanosecond)
		c.unbalancedAt = time.Time{}
	case !balanced && c.unbalancedAt.IsZero():
		c.unbalancedAt = now
	}
	return balanced, rebalanced
}

// handOver picks up to n of this worker's live leaderships to end, when
// some other live worker holds less than its share (docs/pool-protocol.md,
// "Spreading the shards"): the last ones in the shared order. Their
// shards are released once their Work has returned. The loop ends them.
func (c *core) handOver(v view, n int) []*lead {
	deficit := 0
	for _, id := range v.live {
		if id != c.cp.id {
			deficit += max(v.targets[id]-v.counts[id], 0)
		}
	}
	n = min(n, deficit)
	var out []*lead
	for i := len(c.order) - 1; i >= 0 && n > 0; i-- {
		if ld := c.mine[c.names[c.order[i]]]; ld != nil && !ld.over {
			ld.over = true
			out = append(out, ld)
			c.note(slog.LevelDebug, "handing a shard over", "shard", ld.shard, "live", v.live, "counts", v.counts, "targets", v.targets)
			n--
		}
	}
	return out
}

// share returns how many shards this worker lacks by v (negative: how
// many it holds above its share), and whether it may act on that at now
// (hold: when it may; zero while it is not on the member list).
func (c *core) share(v view, now time.Time) (need int, ok bool, hold time.Time) {
	need = v.targets[c.cp.id] - v.counts[c.cp.id]
	hold = c.hold()
	return need, !hold.IsZero() && !now.Before(hold), hold
}

// hold is when this worker may first act on its share (zero while it is
// not on the member list): a FrequentInterval after it found itself on
// the list, and, while it leads nothing, a FrequentInterval after the
// list last grew, up to a LeaderTimeout after it was listed. Workers
// that start together join the list one write at a time. A worker that
// claimed while the others still joined found in every round a member
// whose session object it had read at one write only (which holds every
// claim off: clearance, advanced), and every join set off a look at
// every member's session object by every worker: on a store serving
// 2,000 calls a second, 100 workers took 6.6 leases to join and led
// their first shard after 7.7 (TestColdStartOnABusyStore).
func (c *core) hold() time.Time {
	if c.listedAt.IsZero() {
		return time.Time{}
	}
	hold := c.listedAt.Add(c.cp.fi)
	if len(c.mine) == 0 && !mutJoinRush {
		hold = later(hold, earliest(c.grewAt.Add(c.cp.fi), c.listedAt.Add(c.cp.lt)))
	}
	return hold
}

// assembling reports whether this worker leads nothing and may not act
// yet (hold): its ticks read only the session objects of members it has
// never read (unread), not every member's, for it has nothing to hand
// over and may claim nothing. Each member is so read once while the pool
// assembles, and again at the first look, a renewal or more later: a
// second write of its session seen proves it current (clearance,
// advanced), so the first claims are not held off by it.
func (c *core) assembling(now time.Time) bool {
	if len(c.mine) > 0 || mutJoinRush {
		return false
	}
	hold := c.hold()
	return hold.IsZero() || now.Before(hold)
}

// unread returns the members whose session objects this worker has never
// sent a read of.
func (c *core) unread() []string {
	var out []string
	for _, id := range c.members {
		if pv := c.peers[id]; id != c.cp.id && (pv == nil || !pv.tried) {
			out = append(out, id)
		}
	}
	return out
}

// wanted returns the shards to look at now and how many of them to claim
// at most: unowned ones, as many as it needs and as many again (others may
// have claimed some already, unknown to its view), or else at most one
// that has stayed unowned for the orphan wait (see orphanWait). (A
// handful more, not twice as many: at a common start every worker needs
// many, and a burst of reads would slow the store for every session.)
//
// The workers that see the same pool share the unowned shards out without
// racing: each lists them in the order every worker shares (c.order), and
// starts at the sum of the deficits of the live workers ranked before it,
// so that each takes its own run of the list. After a death every
// survivor sees the same dead worker's shards unowned at about the same
// moment, and each claims its deficit in one look; a race lost (views
// that differ) costs one precondition failure and a look further on.
func (c *core) wanted(v view, need int, now time.Time) ([]string, int) {
	var free []string // unowned in this worker's view, in the shared order
	var orphan string
	orphanWait := c.orphanWait(v)
	for _, i := range c.order {
		name := c.names[i]
		if c.mine[name] != nil {
			sv := c.shard(name)
			sv.candSince, sv.unreleased = time.Time{}, false
			continue
		}
		if v.listed[name] != "" {
			// Another live worker owns it: forget it, so that a worker
			// keeps state only for its own shards and those it looks at.
			// What is lost cannot matter: any term this worker led there
			// was overwritten by the claim of the one that lists it.
			delete(c.shards, name)
			continue
		}
		sv := c.shard(name)
		if sv.foreign {
			continue
		}
		if sv.candSince.IsZero() {
			sv.candSince = now
		}
		free = append(free, name)
		if need <= 0 && orphan == "" && !now.Before(sv.notBefore) && !now.Before(sv.candSince.Add(orphanWait)) &&
			!now.Before(sv.candSince.Add(orphanWait+c.orphanRank(v, name, orphanWait))) {
			orphan = name
		}
	}
	c.behind, c.orphanLook = map[string]bool{}, need <= 0
	for _, id := range v.live {
		if v.counts[id] < v.targets[id] {
			c.behind[id] = true
		}
	}
	if need <= 0 {
		if c.cp.debug && len(free) > 0 {
			c.note(slog.LevelDebug, "looking for an orphan", "unowned", len(free), "taking", orphan, "due", c.pending(v, now))
		}
		if orphan == "" {
			return nil, 0
		}
		return []string{orphan}, 1
	}
	start := 0
	for _, id := range v.live {
		if id == c.cp.id {
			break
		}
		start += max(v.targets[id]-v.counts[id], 0)
	}
	look := need + min(need, 8) + 2
	want := make([]string, 0, look)
	for i := range free {
		name := free[(start+i)%len(free)]
		if now.Before(c.shards[name].notBefore) {
			continue
		}
		if want = append(want, name); len(want) == look {
			break
		}
	}
	if c.cp.debug {
		c.note(slog.LevelDebug, "looking for shards", "need", need, "unowned", len(free), "trying", want)
	}
	return want, need
}

// orphanRank is how much longer than the orphan wait (w) this worker
// lets shard stay unowned before it takes it up (docs/pool-protocol.md,
// "Spreading the shards"): w for each live worker at or above its share
// in v (those that may take orphans) that goes before this one for that
// shard (rendezvous), and 3 × w more while some other live worker in v
// holds less than its share: the shard is that worker's to claim, and a
// worker taking it up as an orphan would hold its claims off (clear,
// "busy"). Without these, every worker at its share took up the first
// orphan of the shared order at the same look; with one interval between
// ranks, a new one took each orphan up every interval, and with 100
// workers on MinIO the two workers below their share found one of them
// claiming each shard they tried, for minutes.
func (c *core) orphanRank(v view, shard string, w time.Duration) time.Duration {
	if mutOrphanHerd || c.shards[shard] != nil && c.shards[shard].unreleased && !mutUnreleasedWaits {
		// A shard whose release failed: no other worker can take it while
		// this one lives, so this one takes it back at the orphan wait.
		return 0
	}
	rank, behind, mine := 0, false, rendezvous(shard, c.cp.id)
	for _, id := range v.live {
		if id == c.cp.id {
			continue
		}
		if v.counts[id] < v.targets[id] {
			behind = true
			continue
		}
		if h := rendezvous(shard, id); h < mine || h == mine && id < c.cp.id {
			rank++
		}
	}
	if behind {
		rank += 3
	}
	return time.Duration(rank) * w
}

// rendezvous ranks worker id for shard: the worker with the lowest value
// goes first. The order differs from shard to shard, so that no worker
// is always first.
func rendezvous(shard, id string) uint64 { return shardHash(shard + "\x00" + id) }

// orphanWait is how long a shard must stay unowned in this worker's view
// before it claims the shard whatever its share: the longest lease among
// the live workers, its own included. A worker with a longer
// FrequentInterval (a rolling change of configuration) then has had at
// least two looks at a shard another worker released for it, before that
// worker may take it back. With an InfrequentInterval above that, an
// InfrequentInterval and a FrequentInterval: the other survivors of a
// death may find it up to an InfrequentInterval after this worker, and
// take their own deficits then, instead of this worker taking their
// shards as orphans that must move again.
func (c *core) orphanWait(v view) time.Duration {
	d := c.cp.lt
	if c.cp.ii > c.cp.fi {
		d = max(d, c.cp.ii+c.cp.fi)
	}
	for _, id := range v.live {
		if pv := c.peers[id]; id != c.cp.id && pv != nil && pv.ok {
			d = wait(d, pv.rec.TTL)
		}
	}
	return d
}

// wake returns when a tick that saw v must run again at the latest,
// besides its interval: ahead (lookAhead) before a worker live in v could
// next be found dead, or when a look is due for a shard set aside
// (lookAt).
func (c *core) wake(v view, now time.Time, ahead time.Duration) time.Time {
	var at time.Time
	for _, wid := range v.live {
		if pv := c.peers[wid]; wid != c.cp.id && pv != nil {
			at = earliestSet(at, pv.liveUntil(c.cp.lt, c.memberTTL[wid]).Add(-ahead))
		}
	}
	if c.lookAt.After(now) {
		at = earliestSet(at, c.lookAt)
	}
	return at
}

// earliestSet is the earlier of a and b, zero meaning unset.
func earliestSet(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return earliest(a, b)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// membersRead takes in the member list as read at now (tag "": absent;
// bad: not a pool record). It returns the list to write over it when this
// worker does not find itself there with its own lease (nil: nothing to
// write), and the members as they will stand.
func (c *core) membersRead(m membersRecord, tag, session string, now time.Time) (join *membersRecord) {
	// Listed means named, with a ttl as long as this worker's lease, and
	// with the session this tick began with: a worker whose session is new
	// to the list writes it there before it claims anything, so that a
	// prune decided on a read of its object from before that session (a
	// restart, a session lost and opened again) cannot land after its
	// claims and forget the terms its session lists (the shard
	// simulation's seed 904209: a repeated term, once the worker had died
	// and a record it led was deleted).
	id := c.cp.id
	listed := slices.Contains(m.Workers, id) && (m.TTL[id] >= ttlMillis(c.cp.lt) || mutNoMemberTTL) && m.Left[id] == "" &&
		(m.Sessions[id] == session || mutNoSessionMark)
	c.membersTag, c.membersSum = tag, membershipSum(m)
	if mutRestartLooks {
		c.membersSum = tag
	}
	for _, w := range m.Workers {
		if !slices.Contains(c.members, w) {
			c.grewAt = now
			break
		}
	}
	if listed && c.listedAt.IsZero() {
		c.listedAt, c.listedSession = now, session
	}
	c.noteMemberTTL(m)
	if !listed {
		c.listedAt = time.Time{}
		m.Pool = formatVersion
		if !slices.Contains(m.Workers, id) {
			m.Workers = append(slices.Clone(m.Workers), id)
			slices.Sort(m.Workers)
		}
		m.TTL = maps.Clone(m.TTL)
		if m.TTL == nil {
			m.TTL = map[string]int64{}
		}
		m.TTL[id] = max(m.TTL[id], ttlMillis(c.cp.lt))
		if m.Left[id] != "" {
			m.Left = maps.Clone(m.Left)
			delete(m.Left, id)
		}
		m.Sessions = maps.Clone(m.Sessions)
		if m.Sessions == nil {
			m.Sessions = map[string]string{}
		}
		m.Sessions[id] = session
		join = &m
	}
	c.members = m.Workers
	return join
}

// membershipSum is what m says of who is a member: its workers, their
// ttls and who left, without the sessions they wrote it with or the
// write's random value.
func membershipSum(m membersRecord) string {
	sum := sha256.Sum256(encode(membersRecord{Workers: m.Workers, TTL: m.TTL, Left: m.Left}))
	return string(sum[:])
}

// noteMemberTTL takes in the ttls a member list states. They only grow:
// a member's lease as the list once stated it is waited out even after the
// list was deleted.
func (c *core) noteMemberTTL(m membersRecord) {
	if mutNoMemberTTL {
		return
	}
	for w, ttl := range m.TTL {
		c.memberTTL[w] = max(c.memberTTL[w], ttl)
	}
}

// lookSessions returns the workers whose session objects a look reads:
// every other member, and every worker that has left the member list
// since the last look (so that a worker that took itself off when it
// stopped is seen released).
func (c *core) lookSessions() []string {
	var others []string
	for _, id := range c.members {
		if id != c.cp.id {
			others = append(others, id)
		}
	}
	for _, id := range c.lookMembers {
		if id != c.cp.id && !slices.Contains(c.members, id) {
			others = append(others, id)
		}
	}
	return others
}

// sessionRead takes in a read of worker w's session object, sent at sent
// and returned at at (err: failed). It reports whether the read counts as
// a sighting, and whether its failure is the first since one succeeded
// (the loop logs it).
func (c *core) sessionRead(w string, data []byte, etag string, err error, at time.Time) (ok, firstFailure bool) {
	pv := c.peers[w]
	if pv == nil {
		pv = &peerView{}
		c.peers[w] = pv
	}
	pv.tried = true
	if err != nil {
		pv.gap = !mutNoRestoreCheck
		// The listings' sighting breaks too: the next one counts from
		// its own listing.
		pv.lsight, pv.lseenAt, pv.lsum, pv.lhint, pv.lhintAt = "", time.Time{}, "", "", time.Time{}
		firstFailure = !pv.warned
		pv.warned = true
		return false, firstFailure
	}
	pv.warned = false
	pv.update(w, data, etag, at, c.index)
	return true, false
}

// prune returns the members to take off the member list, whose sessions
// are over and whose objects list no term that a live session has not
// superseded, so that the workers stop reading them (sent: when each read
// of this look was sent, for those that succeeded). Only the live worker
// with the lowest ID does it, so that the others do not race it for the
// list. A member goes when its session object holds a released session
// record, or the same session record (or tombstone, or anything not a
// session record) has stayed unchanged for a lease: whatever session it
// had has ended, and a new one adds the worker again (and claims nothing
// before a FrequentInterval after that). An absent object is not enough:
// an absence is not a sighting (see bury).
func (c *core) prune(sent map[string]time.Time, now time.Time) []string {
	if mutKeepMembers {
		return nil
	}
	lt := c.cp.lt
	// The terms the live sessions hold, this worker's included: a member
	// whose object lists a term not superseded here stays, since a claim
	// after a deleted record needs that term (sessionRecord.Ended).
	held := map[string]uint64{}
	for _, ld := range c.mine {
		held[ld.shard] = max(held[ld.shard], ld.term)
	}
	for w, pv := range c.peers {
		if pv.live(now, lt, c.memberTTL[w]) {
			for i, term := range pv.leading().shards.all() {
				shard := c.names[i]
				held[shard] = max(held[shard], term)
			}
		}
	}
	superseded := func(t recordTerms) bool {
		if t.unknown {
			return false // a shard this worker does not know: nothing here supersedes it
		}
		for _, l := range []termList{t.shards, t.ended} {
			for i, term := range l.all() {
				if held[c.names[i]] <= term {
					return false
				}
			}
		}
		return true
	}
	var gone []string
	for _, w := range c.members {
		pv := c.peers[w]
		readAt, read := sent[w]
		switch {
		case w == c.cp.id || !read || pv == nil:
		case pv.live(now, lt, c.memberTTL[w]) && w < c.cp.id:
			return nil // a live worker with a lower ID prunes
		case pv.sight.ETag == "" || !superseded(pv.terms):
		case pv.ok && pv.rec.Released:
			gone = append(gone, w)
		case !readAt.Before(pv.seenAt.Add(wait(lt, max(pv.ttl, pv.rec.TTL, c.memberTTL[w])))):
			gone = append(gone, w)
		}
	}
	return gone
}

// withoutMembers returns the member list m without the workers gone.
func withoutMembers(m membersRecord, gone []string) membersRecord {
	m.Workers = slices.DeleteFunc(slices.Clone(m.Workers), func(w string) bool { return slices.Contains(gone, w) })
	m.TTL, m.Left, m.Sessions = maps.Clone(m.TTL), maps.Clone(m.Left), maps.Clone(m.Sessions)
	for _, w := range gone {
		delete(m.TTL, w)
		delete(m.Left, w)
		delete(m.Sessions, w)
	}
	return m
}

// attempt is one shard a look tries to take.
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

// recordsRead takes in the shard records a claim read (at[i].data, etag,
// result) at now, with the terms this worker's session lists as ended
// (sessionRecord.Ended), and marks the candidates, with the term each
// claim would write (docs/pool-protocol.md, "Claims and takeovers"). It
// returns the intent: the first limit candidates, with their terms, which
// the session lists before the others' sessions are read.
func (c *core) recordsRead(at []attempt, ended map[string]uint64, limit int, now time.Time) map[string]uint64 {
	for i := range at {
		a := &at[i]
		sv := c.shard(a.shard)
		sv.highest = max(sv.highest, ended[a.shard])
		sv.landed = max(sv.landed, ended[a.shard])
		if a.result != nil {
			sv.notBefore = now.Add(c.cp.fi)
			continue
		}
		if a.etag == "" {
			if sv.seenRecord {
				// Deleted: watched for LeaderTimeout, as an elector
				// watches a deleted lockfile.
				if sv.absentSince.IsZero() {
					sv.absentSince = now
				}
				if now.Before(sv.absentSince.Add(c.cp.lt)) {
					sv.notBefore = sv.absentSince.Add(c.cp.lt)
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
				c.note(slog.LevelError, "shard record is not the pool's; the shard is left alone until it is", "shard", a.shard, "err", err)
			}
			sv.foreign = true
			continue
		}
		sv.seenRecord, sv.absentSince = true, time.Time{}
		sv.highest = max(sv.highest, rec.Term)
		sv.landed = max(sv.landed, rec.Term)
		if rec.Owner == "" && rec.Session != "" && rec.Term >= sv.relTerm {
			sv.relSession, sv.relTerm = rec.Session, rec.Term
		}
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
	return claiming
}

// intentFailed takes in an intent the session could not list: its shards
// are tried again a quarter interval later.
func (c *core) intentFailed(claiming map[string]uint64, now time.Time) {
	for shard := range claiming {
		c.shard(shard).notBefore = now.Add(c.cp.fi / 4)
	}
}

// clearanceSet returns the workers whose sessions a claim of the attempts
// must clear: every member of the member list read afresh after the
// intent (fresh; nil when that read failed or found none), of the tick's,
// every worker this one has read that may still lead, and every owner a
// record names; this worker only where a record names an earlier session
// of its own. (A worker that joined since the tick's read may have
// claimed a shard since, and lost its record to a deletion.)
func (c *core) clearanceSet(at []attempt, fresh *membersRecord, now time.Time) []string {
	set := map[string]bool{}
	if mutStaleMembers {
		for _, w := range c.members {
			set[w] = true
		}
	} else {
		if fresh != nil {
			for _, w := range fresh.Workers {
				set[w] = true
			}
			c.noteMemberTTL(*fresh)
		}
		for _, w := range c.members {
			set[w] = true
		}
		// And every worker this one has read that may still lead (a
		// member list deleted forgets workers): one whose last sighting
		// is a released session, or whose session was over, and that no
		// list names any more, leads nothing, and must add itself to the
		// list again before it claims.
		for w, pv := range c.peers {
			if set[w] || !pv.tried {
				continue // a worker only listed, never read, is not one this worker has read
			}
			over := pv.ok && pv.rec.Released ||
				!pv.seenAt.IsZero() && !now.Before(pv.seenAt.Add(wait(c.cp.lt, max(pv.ttl, pv.rec.TTL, c.memberTTL[w]))))
			if !over {
				set[w] = true
			}
		}
	}
	delete(set, c.cp.id)
	for i := range at {
		if a := &at[i]; a.cand && a.etag != "" && a.rec.Owner != "" {
			set[a.rec.Owner] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// absent returns the workers of ws whose session objects the reads sent
// found absent, and takes them out of sent: an absence is not a sighting
// that can be aged; the loop buries them (bury), and they are looked at
// again once buried.
func (c *core) absent(ws []string, sent map[string]time.Time) []string {
	if mutAbsentAged {
		return nil
	}
	var gone []string
	for _, w := range ws {
		if _, read := sent[w]; read && c.peers[w].sight.ETag == "" {
			gone = append(gone, w)
			delete(sent, w)
		}
	}
	return gone
}

// cleared decides, once the sessions of ws have been read (sent: when each
// read that succeeded was sent), which candidates may be claimed: it marks
// at most limit of them ready, in order, and sets the others aside until
// they may be tried again.
func (c *core) cleared(at []attempt, ws []string, sent map[string]time.Time, limit int, now time.Time) {
	for i := range at {
		a := &at[i]
		if !a.cand {
			continue
		}
		sv := c.shard(a.shard)
		ok, retry, yield := c.clear(a, ws, sent, now)
		switch {
		case !ok:
			sv.notBefore = retry
			if yield {
				sv.candSince = now // the orphan wait runs again
			}
		case c.listedTerm(a.shard, ws) >= a.term:
			// A session lists the shard at this term or above (its
			// record deleted or restored): a term must never repeat.
			sv.highest = max(sv.highest, c.listedTerm(a.shard, ws))
			sv.notBefore = now
		default:
			a.ready = true
		}
	}
	for i := range at {
		if a := &at[i]; a.ready {
			if limit > 0 {
				limit--
			} else {
				a.ready = false
			}
		}
	}
}

// clear reports whether the session reads sent at sent show that no
// session of the workers ws, nor an earlier session of this worker's that
// the record names, can lead the attempt's shard; if not, it returns when
// to look again. A failed read is not clear.
func (c *core) clear(a *attempt, ws []string, sent map[string]time.Time, now time.Time) (ok bool, retry time.Time, yield bool) {
	ok, retry = true, now
	var by, why string
	for _, w := range ws {
		if mutNoClearance && w != a.rec.Owner {
			continue
		}
		readAt, read := sent[w]
		if !read || c.peers[w] == nil {
			c.note(slog.LevelDebug, "a claim waits: a session object was not read", "shard", a.shard, "of", w)
			return false, later(retry, now.Add(c.cp.fi)), false
		}
		t, busy, unlisted := c.clearance(w, a.shard, a.rec, a.etag, now)
		if mutAbsentAged && w == a.rec.Owner && c.peers[w].sight.ETag == "" {
			sv := c.shard(a.shard)
			if sv.ownerGone.IsZero() {
				sv.ownerGone = readAt
			}
			t = sv.ownerGone.Add(c.cp.lt)
		}
		switch {
		case !readAt.Before(t):
		case busy:
			// A live worker is claiming it too: one of the two looks again
			// a quarter interval later, the other an interval later, or,
			// when it was taking up an orphan, once the orphan wait has
			// run again (yield: its next claim would find the first one's
			// intent or its record). A worker below its share goes first,
			// for it is the one whose share the shard is; else the lower
			// ID. Without yielding, dozens of workers took up one orphan
			// at once on MinIO and kept finding each other's intents, the
			// worker below its share's included, for minutes.
			ok, retry = false, later(retry, now.Add(c.cp.fi/4))
			if !c.goesFirstBusy(w) {
				if c.orphanLook && !mutOrphanHerd {
					yield = true
				}
				retry = later(retry, now.Add(c.cp.fi))
			}
		case unlisted && !mutUnlistedWaits:
			// The record names a live session that lists nothing there: a
			// claim just won, which its next renewal lists, or a stray,
			// which its worker releases at its next tick. Workers tick at
			// the same instants of the wall clock, so this read may have
			// come just before that release: look again half an interval
			// on, not when the session could be over.
			ok, retry = false, later(retry, earliest(t, now.Add(c.cp.fi/2)))
		default:
			ok, retry = false, later(retry, t)
		}
		if !readAt.Before(t) || by != "" {
			continue
		}
		// The first session that holds the claim off, for the Debug log
		// (how a shard that stays unled was traced).
		by, why = w, "may lead it"
		switch {
		case busy:
			why = "claiming it too"
		case unlisted:
			why = "named by the record, lists nothing there"
		}
	}
	if !ok && c.cp.debug {
		c.note(slog.LevelDebug, "a claim waits", "shard", a.shard, "until", retry, "for", by, "which", why, "yield", yield)
	}
	return ok, retry, yield
}

// goesFirstBusy reports whether this worker looks again first when it
// and worker w both claim a shard (clear): the one below its share in
// this look's view, or else the lower ID.
func (c *core) goesFirstBusy(w string) bool {
	if me, them := c.behind[c.cp.id], c.behind[w]; me != them && !mutOrphanHerd {
		return me
	}
	return c.cp.id < w
}

// clearance returns the time from which a read of worker w's session
// object, sent then or later, shows that no session of w can lead shard,
// by what this worker has read of that object (zero: clear now). rec is
// the shard's record as read (present false: absent). The rules
// (docs/pool-protocol.md, "Claims and takeovers"):
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
// a short lease never cuts a long one short. busy reports that w, live
// at now, is claiming the shard too; unlisted, that the record names w's
// session, live at now, which lists neither the shard, nor a claim of it,
// nor a term of it as ended (a claim just won, or a stray).
func (c *core) clearance(w, shard string, rec shardRecord, etag string, now time.Time) (over time.Time, busy, unlisted bool) {
	pv := c.peers[w]
	present := etag != ""
	lt := wait(c.cp.lt, max(pv.ttl, pv.rec.TTL, c.memberTTL[w]))
	if present && rec.Owner == w {
		lt = wait(lt, rec.TTL)
	}
	if mutNoTTL {
		lt = c.cp.lt
	}
	if !pv.ok {
		return pv.runStart.Add(lt), false, false
	}
	if !pv.advanced && w != c.cp.id {
		// Not seen to follow an earlier write of its session: it may be an
		// older one restored, so what it says proves nothing until it has
		// stood unchanged for a lease (the session, whatever it leads, is
		// then over).
		over = pv.seenAt.Add(lt)
	}
	named := present && rec.Owner == w
	if named && (rec.Session == pv.session || mutStaleAnySession) && c.stale(shard, rec, etag, pv, lt, now) {
		// An older record put back, naming the session w's object shows:
		// that session's own listing says whether it leads the shard.
		named = false
	}
	// A record naming an earlier session of w: that session's process
	// may outlive the one that wrote w's object since (paused, cut off),
	// and lead by its own lease: the run of sightings not naming it must
	// stand for L, whatever w's object shows now, released included, and
	// whatever terms are known to have landed (the regression of terms a
	// restore can cause is no proof then: a review's core rows).
	earlier := named && rec.Session != pv.session
	if earlier && !mutReleasedFirst {
		over = later(over, pv.runStart.Add(lt))
	}
	if pv.rec.Released {
		return over, false, false
	}
	if earlier && mutReleasedFirst {
		over = later(over, pv.runStart.Add(lt))
	}
	if w == c.cp.id {
		return over, false, false // this worker's own intents are its own
	}
	i, _ := c.index(shard)
	heldTerm, held := pv.leading().shards.get(i)
	_, claiming := pv.leading().claiming.get(i)
	claiming = claiming && !mutNoIntent
	releasedByIt := present && rec.Owner == "" && rec.Session == pv.session && heldTerm <= rec.Term
	leads := named && rec.Session == pv.session || held && !releasedByIt
	if claiming || leads {
		over = later(over, pv.seenAt.Add(lt))
	}
	live := pv.live(now, c.cp.lt, c.memberTTL[w])
	_, ended := pv.leading().ended.get(i)
	unlisted = named && rec.Session == pv.session && !held && !claiming && !ended && live
	return over, claiming && !leads && live, unlisted
}

// stale reports whether rec, the record of shard as read (etag), is
// older than another write of the shard this worker knows of, and a lease
// (lt) has run since this worker first found it so, after reading the
// object of the session it names (pv), by now.
//
// Older: its term is below that of a claim known to have landed (a
// record read, a leadership of this worker's, a term a session lists as
// led or ended), or it names, at its term or below, the session of a
// release read since. It is then an older version put back (a restore):
// the leadership it began has ended, for a claim is written only once
// every session read shows that no other can lead the shard
// (clearance), and a leadership begins once, at its claim's reply; no
// leadership begins from it again.
//
// A lease since: the session's object as read after the record is either
// its latest write, which lists its intent from before its claim was
// sent and a leadership from its start, so says whether it claims or
// leads the shard (clearance goes by it as for any session); or an older
// write put back, over which the session can write no renewal (each is
// If-Match on its last write), so that whatever it leads ends within a
// lease of the read. No sequence of reads tells the two apart (older
// writes can be put back in order: a review's rows), time does. (Unless
// the session's latest write is put back exactly in between, so that it
// renews on: restores of a live session's object are not covered,
// docs/pool-protocol.md, "What is not covered".)
//
// Such a record's naming of the session then holds no claim off. (A
// record put back over the release of its own claim, named by a live
// session that lists nothing there, held every claim off for as long as
// that session lived, and the worker that released it never looked at it
// again: the simulation's seed 701773.)
func (c *core) stale(shard string, rec shardRecord, etag string, pv *peerView, lt time.Duration, now time.Time) bool {
	sv := c.shards[shard]
	if mutStaleNamed || sv == nil || !pv.ok || pv.maxSession != rec.Session && !mutStaleAnySession {
		return false
	}
	older := rec.Session == sv.relSession && rec.Term <= sv.relTerm
	if !older {
		landed := max(sv.landed, c.endedTerms[shard])
		if i, ok := c.index(shard); ok {
			for _, v := range c.peers {
				t := v.leading()
				landed = max(landed, t.shards.term(i), t.ended.term(i))
			}
		}
		older = rec.Term < landed
	}
	if !older {
		return false
	}
	if sv.staleTag != etag || sv.staleSession != rec.Session {
		sv.staleTag, sv.staleSession, sv.staleAt = etag, rec.Session, now
	}
	return !now.Before(sv.staleAt.Add(lt)) || mutStaleUnproven || mutStaleAnySession
}

// claimRefused takes in a claim of session id that failed (a.result): a
// record that changed since it was read was taken by someone else, whose
// session will list it; a write sent that failed otherwise may have
// landed (a stray).
func (c *core) claimRefused(a *attempt, id string, now time.Time) {
	c.note(slog.LevelDebug, "claim failed", "shard", a.shard, "err", a.result)
	switch {
	case isPrecondition(a.result):
		c.shard(a.shard).notBefore = now.Add(c.cp.fi)
	case a.sent:
		c.stray(a.shard, id, a.term)
	}
}

// stray is a claim of this worker's that it does not lead: the session
// and term its record would name.
type stray struct {
	session string
	term    uint64
}

// stray notes a claim of shard for session at term whose record may
// stand although this worker does not lead it (docs/pool-protocol.md,
// "Claims and takeovers": a claim whose outcome stayed unknown, or that
// landed for a session already over). The loop releases it at its next
// tick (strayList, strayRead, straySettled).
func (c *core) stray(shard, session string, term uint64) {
	if mutKeepStrays {
		return
	}
	if c.strays == nil {
		c.strays = map[string][]stray{}
	}
	// Every stray of the shard is kept: the record may name any of them
	// (a later claim that never landed does not undo an earlier that did).
	c.strays[shard] = append(c.strays[shard], stray{session, term})
}

// strayList returns the strays to settle, sorted, forgetting those this
// worker has claimed again since, and won: their records are a
// leadership's.
func (c *core) strayList() []string {
	for shard := range c.strays {
		if c.mine[shard] != nil {
			delete(c.strays, shard)
		}
	}
	return slices.Sorted(maps.Keys(c.strays))
}

// strayRead takes in a stray's record as read (err: the read failed) and
// returns the release to write over it, If-Match, when it names this
// worker as owner with the session of one of the shard's strays (at
// whatever term: this worker does not lead the shard, strayList, so no
// claim of that session there is a leadership), stamped with the wall
// clock wall; or done when there is nothing to release (none landed, or
// it was overwritten). Neither: try again at the next tick.
func (c *core) strayRead(shard string, data []byte, etag string, err error, wall time.Time) (release []byte, done bool) {
	sts, ok := c.strays[shard]
	if !ok || err != nil {
		return nil, false
	}
	rec, perr := parseShard(data)
	if etag == "" || perr != nil || rec.Owner != c.cp.id ||
		!slices.ContainsFunc(sts, func(st stray) bool { return st.session == rec.Session }) {
		return nil, true
	}
	return encode(shardRecord{Pool: formatVersion, Shard: shard, Session: rec.Session, Term: rec.Term, TTL: ttlMillis(c.cp.lt), LastUpdated: wall}), false
}

// straySettled forgets a stray released, or never this worker's: the
// worker whose share it is takes it at its next look; this one's orphan
// wait starts again.
func (c *core) straySettled(shard string) {
	sv := c.shard(shard)
	sv.candSince = time.Time{}
	for _, st := range c.strays[shard] {
		sv.highest = max(sv.highest, st.term)
	}
	delete(c.strays, shard)
}

// won takes in a claim that landed and became a leadership.
func (c *core) won(ld *lead) {
	c.mine[ld.shard] = ld
	delete(c.strays, ld.shard)
	sv := c.shard(ld.shard)
	sv.highest = max(sv.highest, ld.term)
	sv.landed = max(sv.landed, ld.term)
	c.note(slog.LevelDebug, "won a shard", "shard", ld.shard, "term", ld.term)
}

// superseded returns the shards among ended (this session's terms of
// leaderships that ended unreleased, sessionRecord.Ended) that a live
// session of v lists at a higher term: that session now holds the
// shard's terms, and the ended term may be forgotten.
func (c *core) superseded(v view, ended map[string]uint64) []string {
	var out []string
	for shard, term := range ended {
		i, _ := c.index(shard)
		if w := v.listed[shard]; w != "" && c.peers[w].leading().shards.term(i) > term {
			out = append(out, shard)
		}
	}
	return out
}

// listedTerm returns the highest term the sessions of ws other than this
// worker's, as last read, list for shard (leading or claiming it).
func (c *core) listedTerm(shard string, ws []string) uint64 {
	var t uint64
	i, ok := c.index(shard)
	if !ok {
		return 0
	}
	for _, w := range ws {
		if pv := c.peers[w]; pv != nil && w != c.cp.id {
			t = max(t, pv.terms.shards.term(i), pv.terms.claiming.term(i), pv.terms.ended.term(i))
		}
	}
	return t
}

// isPrecondition reports whether err is a write refused because the
// object no longer held what it went over.
func isPrecondition(err error) bool { return errors.Is(err, store.ErrPreconditionFailed) }

// index returns the index in names of the shard named name.
func (c *core) index(name string) (uint32, bool) {
	k, ok := slices.BinarySearchFunc(c.byName, name, func(i uint32, name string) int { return strings.Compare(c.names[i], name) })
	if !ok {
		return 0, false
	}
	return c.byName[k], true
}

// recordTerms are a session record's lists of shards with terms, kept in
// a worker's view of another's session: every worker keeps every other's,
// so that is about W entries per shard of the pool. An entry is an index
// into the worker's shard names and a term, 8 bytes, where a decoded map
// costs about 56.
type recordTerms struct {
	shards, claiming, ended termList
	n                       int  // the number of shards the record lists, known to this worker or not
	unknown                 bool // it lists a shard this worker does not know (Config.Shards differ)
}

// termList is a list of shard indexes with terms, sorted by index. A
// term rises by one per change of owner, so it fits 32 bits for ever in
// practice; one that does not is kept in wide, its entry marked.
type termList struct {
	e    []shardTerm
	wide map[uint32]uint64
}

type shardTerm struct{ i, term uint32 }

const wideTerm = math.MaxUint32 // a shardTerm's term that is in termList.wide

// get returns the term the list holds for shard index i.
func (l termList) get(i uint32) (uint64, bool) {
	k, ok := slices.BinarySearchFunc(l.e, i, func(e shardTerm, i uint32) int { return cmp.Compare(e.i, i) })
	if !ok {
		return 0, false
	}
	return l.at(k), true
}

// at returns the term of the list's k-th entry.
func (l termList) at(k int) uint64 {
	if t := l.e[k].term; t != wideTerm {
		return uint64(t)
	}
	return l.wide[l.e[k].i]
}

// term returns the term the list holds for shard index i, 0 if none.
func (l termList) term(i uint32) uint64 { t, _ := l.get(i); return t }

// all yields the list's shard indexes with their terms, in index order.
func (l termList) all() iter.Seq2[uint32, uint64] {
	return func(yield func(uint32, uint64) bool) {
		for k := range l.e {
			if !yield(l.e[k].i, l.at(k)) {
				return
			}
		}
	}
}

// compactTerms moves rec's maps into recordTerms (rec keeps none).
func compactTerms(rec *sessionRecord, index func(string) (uint32, bool)) recordTerms {
	t := recordTerms{n: len(rec.Shards)}
	conv := func(m map[string]uint64) termList {
		var l termList
		if len(m) == 0 {
			return l
		}
		l.e = make([]shardTerm, 0, len(m))
		for name, term := range m {
			i, ok := index(name)
			if !ok {
				t.unknown = true
				continue
			}
			if term >= wideTerm {
				if l.wide == nil {
					l.wide = map[uint32]uint64{}
				}
				l.wide[i] = term
				l.e = append(l.e, shardTerm{i, wideTerm})
				continue
			}
			l.e = append(l.e, shardTerm{i, uint32(term)})
		}
		slices.SortFunc(l.e, func(a, b shardTerm) int { return cmp.Compare(a.i, b.i) })
		return l
	}
	t.shards, t.claiming, t.ended = conv(rec.Shards), conv(rec.Claiming), conv(rec.Ended)
	rec.Shards, rec.Claiming, rec.Ended = nil, nil, nil
	return t
}

// leading returns the terms of the session record that counts (ok): what
// its session leads and claims as far as this worker knows; none when the
// object holds no session record that counts.
func (v *peerView) leading() *recordTerms {
	if !v.ok {
		return &noTerms
	}
	return &v.terms
}

var noTerms recordTerms // read only

// leadAct is what the loop does with one of this worker's leaderships
// whose context ended or whose Work returned.
type leadAct int

const (
	actNone    leadAct = iota
	actSettle          // its lease ran out or was lost: the record stays for the others to take over; over for its holder now
	actRelease         // write the release now (and over for its holder then)
	actExit            // over for its holder now (Resign returns); the release waits for Work
	actResign          // Work returned while leading: end the leadership, as a Resign
)

// leadEnded takes in the end of ld's context with cause
// (docs/pool-protocol.md, "Claims and takeovers": how a leadership ends).
// It returns the term the session lists as ended until a release puts it
// in the record (the record may have been deleted), and what the loop
// does (ok false: the end was taken in before, nothing to do): by the session (its lease
// ran out or was lost), nothing is released; by Resign, or after Work
// returned, the release is written at once; by a handover or Run's end,
// the leadership is over for its holder at once, so that a Resign inside
// Work (defer lead.Resign(ctx)) returns instead of waiting for a release
// that waits for Work, and the release follows Work.
func (c *core) leadEnded(ld *lead, cause error) (term uint64, act leadAct, ok bool) {
	if ld.ended {
		return 0, actNone, false
	}
	ld.ended, ld.over = true, true
	term = max(ld.term, c.shard(ld.shard).highest)
	switch {
	case endedBySession(cause):
		ld.settled = true
		return term, actSettle, true
	case cause == s3lect.ErrResigned || ld.workDone:
		return term, actRelease, true
	case !mutResignWaits:
		return term, actExit, true
	}
	return term, actNone, true
}

// endedBySession reports whether a leadership whose context ended with
// cause was ended by its session (lost, or its lease run out). Nothing is
// released then, so it is over for its holder at once: the loop's
// leaderships say so as their context ends (exitOnce), not when the loop
// takes the end in, after the tick in progress (a look whose store calls
// hang may last many leases).
func endedBySession(cause error) bool {
	return errors.Is(cause, s3lect.ErrLeaseExpired) || errors.Is(cause, s3lect.ErrLeadershipLost)
}

// workReturned takes in the return of ld's Work.
func (c *core) workReturned(ld *lead) leadAct {
	ld.workDone = true
	switch {
	case !ld.ended:
		return actResign
	case !ld.settled:
		return actRelease
	}
	return actNone
}

// forget drops a leadership whose Work has returned and whose record is
// settled.
func (c *core) forget(ld *lead) {
	if ld.workDone && ld.settled && c.mine[ld.shard] == ld {
		delete(c.mine, ld.shard)
	}
}
