package pool

import (
	"crypto/sha256"
	"log/slog"
	"slices"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// The core's one entry point (docs/pool-protocol.md, "How the code is
// organised"): next takes in one input (a tick that is due, the result
// of the store call it asked for last, or an event from outside the
// loop) with the local time, and returns the effects: log lines, the
// leaderships to end, the figures to count, when to tick next, and at
// most one call, last, whose result is the next input. A tick is a
// machine: each step that asks for a call sets the step that takes its
// result in (tick.step), so that the protocol's order (strays, the hub,
// the listing, the member list, the look, the claims) reads top to
// bottom below. The loop (loop.go) performs the effects in order and
// feeds each call's result back; it takes no other input while a tick
// runs.
//
// Before each input the loop brings in what it observes outside the
// core (observe): which of this worker's leaderships have ended, the
// store's recent round trip, whether Run's context has ended.

// input is what next takes in.
type input interface{ input() }

// The inputs: a tick due, and the results of the calls (each the answer
// to the call of the same name, tick.step knows which).
type (
	inTick struct { // the live session ("" none) and the terms it lists as ended
		id    string
		ended map[string]uint64
	}
	inRecords struct { // getRecords: the reads in the order asked, and the wall clock at their return
		reads []recordRead
		wall  time.Time
	}
	inPuts   struct{ errs []error } // putRecords
	inDigest struct {               // askHub
		d    digest
		err  error
		take bool // the hub heard another member list reported (hub.takeMembers)
	}
	inListing struct { // list
		entries  []store.Entry
		err      error
		took     time.Duration
		timedOut bool // cut off at its wait
	}
	inMembers  struct{ read recordRead }  // getMembers
	inPut      struct{ err error }        // putMembers
	inSessions struct{ reads []sessRead } // getSessions, in the order asked
	inSession  struct {                   // getSession
		id    string
		ended map[string]uint64
	}
	inAnnounce struct{ err error }       // announce
	inSlept    struct{ ok bool }         // sleepUntil: false when Run's context ended first
	inDone     struct{}                  // bury
	inClaims   struct{ puts []claimPut } // putClaims, in the order asked
	inLed      struct{ leads []*lead }   // lead, in the order asked; nil: the session had ended

	// From outside the loop, taken in between ticks.
	inEnded struct {
		ld    *lead
		cause error
	}
	inWorkDone struct{ ld *lead }
	inReleased struct {
		ld  *lead
		err error
	}
	inChanged struct{} // the session changed: tick now
)

func (inTick) input()     {}
func (inRecords) input()  {}
func (inPuts) input()     {}
func (inDigest) input()   {}
func (inListing) input()  {}
func (inMembers) input()  {}
func (inPut) input()      {}
func (inSessions) input() {}
func (inSession) input()  {}
func (inAnnounce) input() {}
func (inSlept) input()    {}
func (inDone) input()     {}
func (inClaims) input()   {}
func (inLed) input()      {}
func (inEnded) input()    {}
func (inWorkDone) input() {}
func (inReleased) input() {}
func (inChanged) input()  {}

// recordRead is one read of an object: its bytes and ETag ("" absent), or
// the error.
type recordRead struct {
	data []byte
	etag string
	err  error
}

// sessRead is one read of a worker's session object: sent and returned
// at, on the local clock.
type sessRead struct {
	recordRead
	sent, at time.Time
}

// claimPut is one claim's write: the bytes, the new ETag, the error, and
// whether it was sent (a failure leaves its outcome unknown).
type claimPut struct {
	out  []byte
	tag  string
	err  error
	sent bool
}

// effect is what next asks of the loop.
type effect interface{ effect() }

// The effects that are not calls.
type (
	doNote     note
	doNext     struct{ at nextAt } // set when to tick next
	doJoinLost struct{}            // a write adding this worker to the member list lost: tick again after a random wait (joinRetry)
	doJoined   struct{}
	doCount    struct{ c counter }
	doView     struct {
		v          view
		balanced   bool
		rebalanced time.Duration // > 0: just became balanced, after that long
	}
	doNoteEnded struct { // the session lists shard's term as ended (0: no longer)
		shard string
		term  uint64
	}
	doDrop         struct{ ld *lead } // untie ld from the session
	doRenewSoon    struct{}
	doClaimingNone struct{} // the session lists no claims from now on
	doExit         struct { // ld is over for its holder: Resign returns err
		ld  *lead
		err error
	}
	doRelease struct{ ld *lead } // write ld's release (off the loop)
	doEnd     struct {           // end ld's context with cause
		ld    *lead
		cause error
	}
	doExpectLive struct {
		live, members []string
		tag           string
		at            time.Time
	}
)

// The calls: the next input is the result.
type (
	getRecords struct{ shards []string }
	putRecords struct{ writes []recordWrite }
	askHub     struct {
		self     bool // this worker is the hub
		id, addr string
		members  string // the member list's ETag as this worker knows it
		wait     time.Duration
	}
	list        struct{ wait time.Duration }
	getMembers  struct{}
	putMembers  struct{ write recordWrite }
	getSessions struct{ workers []string }
	getSession  struct{}
	announce    struct {
		id       string
		claiming map[string]uint64 // nil: none (the claims are over)
	}
	sleepUntil struct{ t time.Time }
	bury       struct{ workers []string }
	putClaims  struct {
		id     string
		claims []claimWrite
	}
	leadClaims struct {
		id     string
		claims []claimWon
	}
)

// recordWrite is a write over an object as read (etag "": create).
type recordWrite struct {
	key  string // a shard's name for putRecords
	data []byte
	etag string
	over [32]byte
}

// claimWrite is one claim to write, over the record as read.
type claimWrite struct {
	shard string
	term  uint64
	etag  string
	over  [32]byte
}

// claimWon is one claim that landed: the leadership to make of it.
type claimWon struct {
	shard string
	term  uint64
	out   []byte
	tag   string
}

func (doNote) effect()         {}
func (doNext) effect()         {}
func (doJoinLost) effect()     {}
func (doJoined) effect()       {}
func (doCount) effect()        {}
func (doView) effect()         {}
func (doNoteEnded) effect()    {}
func (doDrop) effect()         {}
func (doRenewSoon) effect()    {}
func (doClaimingNone) effect() {}
func (doExit) effect()         {}
func (doRelease) effect()      {}
func (doEnd) effect()          {}
func (doExpectLive) effect()   {}
func (getRecords) effect()     {}
func (putRecords) effect()     {}
func (askHub) effect()         {}
func (list) effect()           {}
func (getMembers) effect()     {}
func (putMembers) effect()     {}
func (getSessions) effect()    {}
func (getSession) effect()     {}
func (announce) effect()       {}
func (sleepUntil) effect()     {}
func (bury) effect()           {}
func (putClaims) effect()      {}
func (leadClaims) effect()     {}

// counter names a figure of Stats.
type counter int

const (
	countLook counter = iota
	countHandover
	countClaim
	countReleased
	countExpired
)

// nextAt is when to tick next.
type nextAt struct {
	kind nextKind
	t    time.Time
}

type nextKind int

const (
	nextSlot       nextKind = iota // the first renewal slot (watchOffset) at or after t
	nextSlotBy                     // that slot, if earlier than what is set
	nextInfrequent                 // the first renewal slot at or after the InfrequentInterval slot after t (infrequentSlot)
	nextBy                         // t, if earlier than what is set
	nextAtOnce                     // t, whatever is set
)

// observed is what the loop brings in before each input (observe).
type observed struct {
	rtt      time.Duration // the store's recent round trip (Pool.noteRTT)
	stopping bool          // Run's context has ended
}

// tick is the state of the tick in progress: the step that takes the
// next input, and what the tick has learnt so far.
type tick struct {
	step func(c *core, in input, now time.Time) []effect

	id              string    // the session the tick began with
	start           time.Time // when it began (notePreLook; zero once a claim took it in)
	asked           time.Time // when it asked the hub
	hub             string    // which worker it asked
	listed, members bool      // the listing (or hub) stood for the watch; the member list is to be read in the watch
	membersRead     bool      // the member list was read this tick (data, tag)
	look            bool
	data            []byte // the member list as read this tick
	tag             string
	asOf            time.Time
	v               view
	need, budget    int
	round           int
	strays          []string
	strayOut        []recordWrite // the releases of strays to write
	then            func(c *core, now time.Time) []effect

	// The claim in progress (claimStart).
	at       []attempt
	limit    int
	won      int
	ws       []string
	sent     map[string]time.Time
	announce bool // the intent was listed: the claim ends by taking it out
	done     func(c *core, won int, now time.Time) []effect
}

// next takes in one input at local time now and returns the effects.
func (c *core) next(in input, now time.Time) []effect {
	var effs []effect
	switch in := in.(type) {
	case inTick:
		c.endedTerms = in.ended
		effs = c.tickStart(in.id, now)
	case inEnded:
		effs = c.ended(in.ld, in.cause, now)
	case inWorkDone:
		effs = c.frequent(now)
		effs = append(effs, c.act(in.ld, c.workReturned(in.ld))...)
		c.forget(in.ld)
	case inReleased:
		effs = c.released(in.ld, in.err, now)
	case inChanged:
		effs = []effect{doNext{nextAt{nextAtOnce, now}}}
	default:
		step := c.tk.step
		c.tk.step = nil
		if step == nil {
			panic("pool: a call's result with no tick step to take it")
		}
		effs = step(c, in, now)
	}
	if len(c.notes) == 0 {
		return effs
	}
	out := make([]effect, 0, len(c.notes)+len(effs))
	for _, n := range c.notes {
		out = append(out, doNote(n))
	}
	c.notes = nil // not kept for reuse: the lines' arguments hold views
	return append(out, effs...)
}

// call sets the step that takes e's result and returns the effects with
// e last.
func (c *core) call(effs []effect, e effect, step func(c *core, in input, now time.Time) []effect) []effect {
	c.tk.step = step
	return append(effs, e)
}

// ended takes in the end of one of this worker's leaderships (leadEnded).
func (c *core) ended(ld *lead, cause error, now time.Time) []effect {
	effs := c.frequent(now)
	term, act, ok := c.leadEnded(ld, cause)
	if !ok {
		return effs // taken in before
	}
	effs = append(effs, c.noteEnded(ld.shard, term), doDrop{ld}, doRenewSoon{})
	if act == actSettle {
		effs = append(effs, doCount{countExpired})
	}
	return append(effs, c.act(ld, act)...)
}

// act does what leadEnded or workReturned decided for a leadership.
func (c *core) act(ld *lead, act leadAct) []effect {
	switch act {
	case actSettle, actExit:
		return c.exit(ld, nil)
	case actRelease:
		return []effect{doRelease{ld}}
	case actResign:
		return []effect{doEnd{ld, s3lect.ErrResigned}}
	}
	return nil
}

// exit marks a leadership over for its holder (Resign returns err from
// now on); its record may still wait for its release.
func (c *core) exit(ld *lead, err error) []effect {
	var effs []effect
	if !ld.exited {
		ld.exited = true
		effs = append(effs, doExit{ld, err})
	}
	c.forget(ld)
	return effs
}

// released takes in the outcome of a release.
func (c *core) released(ld *lead, err error, now time.Time) []effect {
	var effs []effect
	if err != nil {
		c.note(slog.LevelInfo, "shard not released; the other workers wait for the lease to run out", "shard", ld.shard, "err", err)
		// Its record names this worker's session, which no other worker
		// can clear while it lives: this one looks at its next tick, and
		// takes the shard back by the orphan rule if nobody else does, at
		// the orphan wait whatever its rank (orphanRank).
		c.lookAt = now
		c.shard(ld.shard).unreleased = true
	} else {
		effs = append(effs, doCount{countReleased}, c.noteEnded(ld.shard, 0)) // the released record holds the term
	}
	ld.settled = true
	return append(effs, c.exit(ld, err)...)
}

// noteEnded notes a term the session lists as ended (0: no longer), in
// the core's copy (ended) and the session's.
func (c *core) noteEnded(shard string, term uint64) effect {
	if term == 0 {
		delete(c.endedTerms, shard)
	} else {
		if c.endedTerms == nil {
			c.endedTerms = map[string]uint64{}
		}
		c.endedTerms[shard] = max(c.endedTerms[shard], term)
	}
	return doNoteEnded{shard, term}
}

// frequent brings a watch slowed to InfrequentInterval back to the next
// FrequentInterval slot: one of this worker's leaderships ended, or its
// Work returned (a shard of its own may be unled).
func (c *core) frequent(now time.Time) []effect {
	if !c.slow {
		return nil
	}
	c.slow = false
	return []effect{doNext{nextAt{nextSlotBy, now}}}
}

// The tick (docs/pool-protocol.md, "Spreading the shards"): it watches
// the pool and, when something is to be done, looks at it and acts:
// hands shards over when this worker holds more than its share while
// another holds less, and claims shards nobody live owns while it holds
// less (or any shard left unowned for the orphan wait).
//
// On a store that lists (store.Lister), the watch is one listing of the
// session objects and one read of the member list; the session objects
// themselves are read only when a look is due (lookDue). Otherwise every
// tick is a look, reading every member's session object.

// tickStart begins a tick: the next one just after the renewals
// (waitRenewal), then the strays.
func (c *core) tickStart(id string, now time.Time) []effect {
	c.tk = tick{id: id, start: now}
	if id != c.listedSession && !mutNoSessionMark {
		// A new session: listed only once a read of the list names it
		// (membersRead), even when this tick's read of the list fails.
		c.listedAt = time.Time{}
	}
	effs := []effect{doNext{nextAt{nextSlot, now.Add(c.cp.fi / 2)}}}
	if id == "" {
		return effs
	}
	return c.settleStrays(effs, now)
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
func (c *core) settleStrays(effs []effect, now time.Time) []effect {
	c.tk.strays = c.strayList()
	if len(c.tk.strays) == 0 {
		return c.watchHub(effs, now)
	}
	return c.call(effs, getRecords{c.tk.strays}, (*core).straysRead)
}

func (c *core) straysRead(in input, now time.Time) []effect {
	r := in.(inRecords)
	c.tk.strayOut = nil
	var put []string
	for i, shard := range c.tk.strays {
		rr := r.reads[i]
		out, done := c.strayRead(shard, rr.data, rr.etag, rr.err, r.wall)
		switch {
		case out != nil:
			c.tk.strayOut = append(c.tk.strayOut, recordWrite{key: shard, data: out, etag: rr.etag, over: sha256.Sum256(rr.data)})
			put = append(put, shard)
		case done:
			c.straySettled(shard)
		}
	}
	if len(put) == 0 {
		return c.watchHub(nil, now)
	}
	return c.call(nil, putRecords{c.tk.strayOut}, (*core).straysPut)
}

func (c *core) straysPut(in input, now time.Time) []effect {
	r := in.(inPuts)
	for i, w := range c.tk.strayOut {
		if r.errs[i] == nil {
			c.note(slog.LevelInfo, "released a shard claimed without learning the outcome", "shard", w.key, "strays", c.strays[w.key])
			c.straySettled(w.key)
		}
	}
	c.tk.strayOut = nil
	return c.watchHub(nil, now)
}

// watchHub is peer mode's watch (docs/pool-protocol.md, "Peer mode"; the
// wire is in peer.go): this worker reports its session to the hub and
// asks it for the session ETags reported this round; when its digest
// names every worker this worker counts live, it takes it in as a listing
// (listed). The store is listed instead when the hub doubted, no hub is
// known, the hub's answer failed or left a live worker out (a death, a
// join, a hub with another view). The member list is read always, but
// when the hub's digest shows the one this worker knows and nobody
// reported another. (The tick lists the store every InfrequentInterval
// all the same: storeDue.)
func (c *core) watchHub(effs []effect, now time.Time) []effect {
	c.tk.listed, c.tk.members = false, true
	if !c.cp.peer {
		return c.watchStore(effs, now)
	}
	v := c.view(now, true)
	hubID, addr := c.hubOf(v)
	if hubID == "" {
		return c.watchStore(effs, now)
	}
	c.tk.asked, c.tk.hub = now, hubID
	return c.call(effs, askHub{self: hubID == c.cp.id, id: hubID, addr: addr, members: c.membersTag, wait: c.cp.fi / 8}, (*core).hubAnswered)
}

func (c *core) hubAnswered(in input, at time.Time) []effect {
	r := in.(inDigest)
	asked := c.tk.asked
	if r.err != nil {
		if c.obs.stopping {
			return c.watchStore(nil, at)
		}
		if !c.peerWarned {
			c.peerWarned = true
			c.note(slog.LevelInfo, "cannot ask the hub of peer mode; listing the store instead", "hub", c.tk.hub, "err", r.err)
		}
		if asked.Before(c.hubReadAt) {
			return c.watchStore(nil, at)
		}
		// Its address may have changed (a restart): read its session
		// object, once a lease at most.
		c.hubReadAt = asked.Add(c.cp.lt)
		if c.tk.hub == c.cp.id {
			return c.watchStore(nil, at)
		}
		return c.readSessions(nil, []string{c.tk.hub}, at, func(c *core, _ map[string]time.Time, now time.Time) []effect {
			return c.watchStore(nil, now)
		})
	}
	c.peerWarned = false
	if at.After(c.doubtUntil) && c.covers(r.d, c.view(asked, true)) {
		c.applyDigest(r.d, at)
		// The member list is read all the same while this worker is not
		// listed in its session (a join, a session opened again): the
		// hub's digest may name the list as this worker last read it,
		// from before its own write, and waiting for the store's turn
		// (storeDue) left a reopened session's shards unled for two
		// InfrequentIntervals (a reviewer's case).
		c.tk.listed, c.tk.members = true, !mutPeerMembers && (r.d.Members != c.membersTag || r.take || c.listedAt.IsZero() && !mutPeerUnlisted)
	}
	return c.watchStore(nil, at)
}

// watchStore lists the store, without the hub or every
// InfrequentInterval in peer mode (storeDue): a listing of the session
// objects, or on a store that does not list, a look at every session.
func (c *core) watchStore(effs []effect, now time.Time) []effect {
	if c.tk.listed && !c.storeDue(now) {
		return c.readMembers(effs, c.tk.members, now, (*core).decide)
	}
	c.tk.listed, c.tk.members = false, true
	if !c.cp.lists || mutNoList {
		return c.readMembers(effs, true, now, (*core).decide)
	}
	// One listing within listWait: a listing that hangs must not hold the
	// watch up for the whole retry schedule.
	wait := c.listWait()
	return c.call(effs, list{wait}, func(c *core, in input, at time.Time) []effect {
		return c.listedSessions(in.(inListing), wait, at)
	})
}

// listedSessions takes in a listing of the session objects returned at
// at (applyListing), or its failure (listFailed): the tick then goes by
// the last listing (missedListing), or, from the second failure in a row,
// looks, as on a store that does not list.
func (c *core) listedSessions(r inListing, wait time.Duration, at time.Time) []effect {
	c.noteListTook(r.took, r.timedOut, wait)
	if r.err != nil {
		c.reread = c.listFailed()
		switch {
		case c.obs.stopping:
		case c.missedListing():
			c.note(slog.LevelDebug, "a listing of the session objects failed; going by the last one until the next", "err", r.err)
		case !c.listWarned:
			c.listWarned = true
			c.note(slog.LevelWarn, "cannot list the session objects; reading each member's instead", "err", r.err)
		}
		return c.readMembers(nil, true, at, (*core).decide)
	}
	c.listWarned = false
	c.listFails = 0
	c.applyListing(r.entries, at)
	c.storeAt = at.Add(c.cp.ii - c.cp.fi/2)
	c.tk.listed = true
	return c.readMembers(nil, true, at, (*core).decide)
}

// readMembers reads the member list and adds this worker to it if
// missing (read false: the member list as last read stands), then
// goes on with then.
func (c *core) readMembers(effs []effect, read bool, now time.Time, then func(c *core, now time.Time) []effect) []effect {
	if !read {
		return append(effs, then(c, now)...)
	}
	c.tk.then = then
	return c.call(effs, getMembers{}, (*core).membersAnswered)
}

func (c *core) membersAnswered(in input, now time.Time) []effect {
	r := in.(inMembers).read
	c.tk.membersRead = true // a look need not read it again
	then := c.tk.then
	c.tk.then = nil
	if r.err != nil {
		c.note(slog.LevelWarn, "cannot read the member list", "err", r.err)
		c.tk.data, c.tk.tag = nil, ""
		return then(c, now)
	}
	var m membersRecord
	if r.etag != "" {
		var err error
		if m, err = parseMembers(r.data); err != nil {
			c.note(slog.LevelError, "the member list is not a pool record; is Prefix shared with something else?", "key", c.cp.membersKey, "err", err)
			c.tk.data, c.tk.tag = nil, ""
			return then(c, now)
		}
	}
	c.tk.data, c.tk.tag = r.data, r.etag
	join := c.membersRead(m, r.etag, c.tk.id, now)
	if join == nil {
		return then(c, now)
	}
	return c.call(nil, putMembers{recordWrite{data: encode(*join), etag: r.etag, over: sha256.Sum256(r.data)}}, func(c *core, in input, now time.Time) []effect {
		if err := in.(inPut).err; err != nil {
			c.note(slog.LevelInfo, "cannot add this worker to the member list; trying again", "err", err)
			return append([]effect{doJoinLost{}}, then(c, now)...)
		}
		return append([]effect{doJoined{}}, then(c, now)...)
	})
}

// decide decides whether the tick looks. A session that runs out within
// lookAhead: this tick looks as of then, and its claims wait for that
// moment before they read the sessions that must clear them (watch.go,
// lookAhead).
func (c *core) decide(now time.Time) []effect {
	t := &c.tk
	t.asOf = c.expiring(now, now.Add(c.lookAhead()))
	t.look = !t.listed && !c.missedListing() || c.lookDue(t.asOf)
	reread := c.reread
	c.reread = nil
	if !t.look && len(reread) > 0 {
		return c.readSessions(nil, reread, now, func(c *core, _ map[string]time.Time, now time.Time) []effect {
			return c.assemble(now)
		})
	}
	return c.assemble(now)
}

// assemble: while the pool assembles, there is nothing to hand over and
// nothing to claim yet: a look reads only the members never read
// (assembling).
func (c *core) assemble(now time.Time) []effect {
	t := &c.tk
	if !t.look || !c.assembling(now) {
		return c.lookAround(now)
	}
	t.look = false
	return c.readMembers(nil, !t.membersRead, now, func(c *core, now time.Time) []effect {
		return c.readSessions(nil, c.unread(), now, func(c *core, _ map[string]time.Time, now time.Time) []effect {
			return c.settle(now)
		})
	})
}

// lookAround is a look's reads: the member list (unless read this tick),
// the session objects a look reads (lookSessions); then it takes members
// whose sessions are over off the list.
func (c *core) lookAround(now time.Time) []effect {
	t := &c.tk
	if !t.look {
		return c.settle(now)
	}
	effs := []effect{doCount{countLook}}
	return c.readMembers(effs, !t.membersRead, now, func(c *core, now time.Time) []effect {
		return c.readSessions(nil, c.lookSessions(), now, func(c *core, sent map[string]time.Time, now time.Time) []effect {
			if !c.cp.lists {
				// Without a listing, a look's reads are the store's word
				// (watchHub).
				c.storeAt = now.Add(c.cp.ii - c.cp.fi/2)
			}
			return c.pruneMembers(sent, now)
		})
	})
}

// pruneMembers writes the member list (as this tick read it) without the
// members the core finds over (prune).
func (c *core) pruneMembers(sent map[string]time.Time, now time.Time) []effect {
	t := &c.tk
	done := func(c *core, now time.Time) []effect {
		c.tk.asOf = later(c.expiring(now, now.Add(c.lookAhead())), c.tk.asOf)
		return c.settle(now)
	}
	if t.tag == "" {
		return done(c, now)
	}
	gone := c.prune(sent, now)
	if len(gone) == 0 {
		return done(c, now)
	}
	m, err := parseMembers(t.data)
	if err != nil {
		return done(c, now)
	}
	m = withoutMembers(m, gone)
	return c.call(nil, putMembers{recordWrite{data: encode(m), etag: t.tag, over: sha256.Sum256(t.data)}}, func(c *core, in input, now time.Time) []effect {
		if err := in.(inPut).err; err != nil {
			c.note(slog.LevelInfo, "cannot take members whose sessions are over off the member list", "members", gone, "err", err)
		} else {
			c.note(slog.LevelInfo, "took members whose sessions are over off the member list", "members", gone)
			c.members = m.Workers
		}
		return done(c, now)
	})
}

// readSessions reads the session objects of workers (all at once, eight
// at a time) and takes them in (sessionRead), then goes on with then,
// given the local time each read that succeeded was sent.
func (c *core) readSessions(effs []effect, workers []string, now time.Time, then func(c *core, sent map[string]time.Time, now time.Time) []effect) []effect {
	if len(workers) == 0 {
		return append(effs, then(c, map[string]time.Time{}, now)...)
	}
	return c.call(effs, getSessions{workers}, func(c *core, in input, now time.Time) []effect {
		r := in.(inSessions)
		sent := map[string]time.Time{}
		for i, w := range workers {
			rr := r.reads[i]
			ok, first := c.sessionRead(w, rr.data, rr.etag, rr.err, rr.at)
			if first && !c.obs.stopping {
				c.note(slog.LevelWarn, "cannot read a worker's session object; no shard can be claimed while it cannot be read", "of", w, "err", rr.err)
			}
			if ok {
				sent[w] = rr.sent
				if c.cp.peer {
					c.doubt(c.peers[w], rr.etag, rr.at)
				}
			}
		}
		return then(c, sent, now)
	})
}

// settle takes in what the tick saw: the view (as of asOf when a session
// runs out ahead), the figures, the terms superseded; then, when it
// looked and this worker knows its share, hands over or claims.
func (c *core) settle(real time.Time) []effect {
	t := &c.tk
	now := later(real, t.asOf)
	c.asOf = t.asOf
	v := c.view(now, true)
	balanced, rebalanced := c.account(v, now)
	effs := []effect{doView{v, balanced, rebalanced}}
	for _, shard := range c.superseded(v, c.endedTerms) {
		effs = append(effs, c.noteEnded(shard, 0))
	}
	if t.look {
		c.looked(v, now)
	}
	need, ok, hold := c.share(v, now)
	if !ok {
		if t.look && !mutForgetLook {
			// This look could take nothing in hand (its lookAt is spent):
			// the first tick that may act looks again. (A worker whose
			// release failed found itself off a member list put back
			// just then, looked at nothing more while its view stayed
			// stuck, and never took the shard back: the simulation's seed
			// 1192.)
			c.lookAt = later(hold, now)
		}
		if !hold.IsZero() {
			effs = append(effs, doNext{nextAt{nextBy, hold}})
		}
		c.asOf = time.Time{}
		return effs // not yet seen the others long enough to know its share
	}
	t.v, t.need = v, need
	if !t.look {
		return append(effs, c.finish(real)...)
	}
	if need < 0 {
		for _, ld := range c.handOver(v, -need) {
			effs = append(effs, doCount{countHandover}, doEnd{ld, errHandedOver})
		}
	}
	// Shards found taken, or not yet free, are set aside (notBefore), so
	// every round tries others. A look claims up to the worker's whole
	// deficit (8 store calls at a time), so that a joiner takes every
	// shard handed over to it at its first look, before the orphan rule
	// can give one to another worker.
	//
	// The rounds stop when the session the look began with has ended or
	// changed: its claims could only fail at the intent, and the loop
	// takes no event in during a look (Work's return, a lost session's
	// leaderships).
	//
	// Each round after the first looks at a view of its own: the claims
	// before it read every member's session object, and what they showed
	// is newer than the look's first view. (Every round took the first
	// view, and on a slow store, where a round lasts seconds, a worker
	// below its share spent up to 16 rounds on shards that view showed
	// unowned and others had claimed since, each set aside for a lease,
	// while the shards still unowned waited for the orphan rule:
	// TestSpreadOnASlowStore.) An orphan is taken in the first round
	// only: one per look.
	t.budget, t.round = max(need, 1), 0
	return append(effs, c.round(real)...)
}

// round begins a round of claims, while the session lives.
func (c *core) round(now time.Time) []effect {
	t := &c.tk
	if t.round >= 16 || t.budget <= 0 || c.obs.stopping {
		return c.roundsOver(now)
	}
	return c.call(nil, getSession{}, func(c *core, in input, now time.Time) []effect {
		t := &c.tk
		cur := in.(inSession)
		if cur.id != t.id {
			return c.roundsOver(now)
		}
		c.endedTerms = cur.ended
		if t.round > 0 && !mutStaleRounds {
			at := later(now, c.asOf) // as of the lease's end the look was timed to, if still ahead
			t.v = c.view(at, true)
			if t.need, _, _ = c.share(t.v, at); t.need <= 0 {
				return c.roundsOver(now)
			}
		}
		want, limit := c.wanted(t.v, min(t.need, t.budget), now)
		if len(want) == 0 {
			return c.roundsOver(now)
		}
		return c.claimStart(want, limit, t.id, now, func(c *core, won int, now time.Time) []effect {
			t := &c.tk
			t.need, t.budget = t.need-won, t.budget-won
			if t.need <= 0 {
				return c.roundsOver(now)
			}
			t.round++
			return c.round(now)
		})
	})
}

func (c *core) roundsOver(now time.Time) []effect {
	c.compact()
	return c.finish(now)
}

// finish sets when to wake: when a worker live in this view could next
// be found dead, or a shard waited on may be taken. A session that ran
// out while this look went on (its reads and claims take time) is looked
// at again at once, not at the next interval.
func (c *core) finish(now time.Time) []effect {
	t := &c.tk
	defer func() { c.asOf = time.Time{} }()
	var effs []effect
	if t.look {
		c.lookAt = c.pending(t.v, now)
	}
	if c.cp.peer {
		effs = append(effs, doExpectLive{t.v.live, c.members, c.membersTag, now})
	}
	if c.cp.ii > c.cp.fi && !c.cp.peer && c.deferLive == nil && c.stable(t.v, t.listed, t.look) {
		// Settled, and no look put off to the next tick (deferLook): the
		// next tick on the next multiple of InfrequentInterval on the
		// wall clock. A worker that dies now is found at that tick's
		// listing (its session unchanged) by every survivor at once, and
		// watched every FrequentInterval from then on.
		c.slow = true
		return append(effs, doNext{nextAt{nextInfrequent, now}})
	}
	c.slow = false
	if at := c.wake(t.v, now, c.lookAhead()); !at.IsZero() {
		effs = append(effs, doNext{nextAt{nextBy, at}})
	}
	return effs
}

// claimStart tries to take the shards in want, as the protocol allows
// (docs/pool-protocol.md, "Claims and takeovers"): read each shard record;
// list the claims in this worker's session object (its intent); read the
// member list and every other worker's session object; write a claim only
// where every session read shows that it cannot lead the shard
// (clearance), with If-Match on the record read (If-None-Match where
// absent) and a term above every term read. It writes at most limit
// claims, in the order of want, and goes on with done, given how many it
// won.
func (c *core) claimStart(want []string, limit int, id string, now time.Time, done func(c *core, won int, now time.Time) []effect) []effect {
	t := &c.tk
	t.at, t.limit, t.won, t.ws, t.sent, t.announce, t.done = make([]attempt, len(want)), limit, 0, nil, nil, false, done
	for i := range t.at {
		t.at[i].shard = want[i]
	}
	t.id = id
	return c.call(nil, getRecords{want}, (*core).claimRecords)
}

func (c *core) claimRecords(in input, now time.Time) []effect {
	t := &c.tk
	for i, r := range in.(inRecords).reads {
		t.at[i].data, t.at[i].etag, t.at[i].result = r.data, r.etag, r.err
	}
	claiming := c.recordsRead(t.at, c.endedTerms, t.limit, now)
	if len(claiming) == 0 {
		return c.claimOver(now)
	}
	if mutNoIntent {
		return c.claimMembers(now)
	}
	return c.call(nil, announce{t.id, claiming}, func(c *core, in input, now time.Time) []effect {
		if err := in.(inAnnounce).err; err != nil {
			c.note(slog.LevelDebug, "cannot list the claims in the session", "err", err)
			c.intentFailed(claiming, now)
			// The claims are not made: no renewal lists them from now on.
			return append([]effect{doClaimingNone{}}, c.claimOver(now)...)
		}
		// The claims' outcomes are known once the claim ends: a renewal
		// drops the intent at once, so that it holds no other worker off
		// any longer than the claims took.
		c.tk.announce = true
		return c.claimMembers(now)
	})
}

// claimMembers: clearance reads every other worker's session, after the
// records and the intent, by a member list read after them too.
func (c *core) claimMembers(now time.Time) []effect {
	if mutStaleMembers {
		return c.claimClear(nil, now)
	}
	return c.call(nil, getMembers{}, func(c *core, in input, now time.Time) []effect {
		var fresh *membersRecord
		r := in.(inMembers).read
		if r.err == nil && r.etag != "" {
			if m, err := parseMembers(r.data); err == nil {
				fresh = &m
			}
		}
		gone := r.err == nil && r.etag == "" || fresh != nil && (!slices.Contains(fresh.Workers, c.cp.id) || fresh.Sessions[c.cp.id] != c.tk.id)
		if gone && !mutNoSessionMark {
			// The list no longer names this session (a prune, a list put
			// back, deleted or written by a process of this ID): it
			// claims nothing until it is listed again. (A list that is
			// not a pool record, or a failed read, leaves the claim to
			// the list as last read.)
			c.note(slog.LevelInfo, "the member list no longer names this worker's session; claiming nothing until it is listed again")
			c.listedAt = time.Time{}
			c.tk.budget = 0
			return c.claimOver(now)
		}
		return c.claimClear(fresh, now)
	})
}

func (c *core) claimClear(fresh *membersRecord, now time.Time) []effect {
	t := &c.tk
	t.ws = c.clearanceSet(t.at, fresh, now)
	if !c.asOf.IsZero() && !t.start.IsZero() {
		c.notePreLook(now.Sub(t.start))
		t.start = time.Time{} // the tick's first claim only
	}
	// A look begun ahead of a session's end waits for it (lookAhead)
	// before the session reads, which are what may clear a takeover: they
	// are sent at or after the lease's end, and after the member list
	// read that named them, as every clearing read is.
	if c.asOf.After(now) {
		return c.call(nil, sleepUntil{c.asOf}, func(c *core, in input, now time.Time) []effect {
			if !in.(inSlept).ok {
				return c.claimOver(now)
			}
			return c.claimRead(now)
		})
	}
	return c.claimRead(now)
}

func (c *core) claimRead(now time.Time) []effect {
	t := &c.tk
	if mutNoReread {
		sent := map[string]time.Time{}
		for _, w := range t.ws {
			if c.peers[w] != nil {
				sent[w] = now
			}
		}
		return c.claimBury(sent, now)
	}
	return c.readSessions(nil, t.ws, now, func(c *core, sent map[string]time.Time, now time.Time) []effect {
		return c.claimBury(sent, now)
	})
}

// claimBury writes a tombstone into the session objects a read found
// absent (absent; see bury in loop.go), then decides the claims.
func (c *core) claimBury(sent map[string]time.Time, now time.Time) []effect {
	t := &c.tk
	t.sent = sent
	gone := c.absent(t.ws, sent)
	if len(gone) == 0 {
		return c.claimWrite(now)
	}
	return c.call(nil, bury{gone}, func(c *core, _ input, now time.Time) []effect { return c.claimWrite(now) })
}

func (c *core) claimWrite(now time.Time) []effect {
	t := &c.tk
	c.cleared(t.at, t.ws, t.sent, t.limit, now)
	var ws []claimWrite
	for i := range t.at {
		if a := &t.at[i]; a.ready {
			w := claimWrite{shard: a.shard, term: a.term, etag: a.etag}
			if a.etag != "" {
				w.over = sha256.Sum256(a.data)
			}
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return c.claimOver(now)
	}
	return c.call(nil, putClaims{t.id, ws}, (*core).claimsPut)
}

func (c *core) claimsPut(in input, now time.Time) []effect {
	t := &c.tk
	puts := in.(inClaims).puts
	var won []claimWon
	k := 0
	for i := range t.at {
		a := &t.at[i]
		if !a.ready {
			continue
		}
		p := puts[k]
		k++
		a.out, a.tag, a.result, a.sent = p.out, p.tag, p.err, p.sent
		if a.result == nil {
			won = append(won, claimWon{shard: a.shard, term: a.term, out: a.out, tag: a.tag})
		}
	}
	if len(won) == 0 {
		return c.claimRefusals(now)
	}
	return c.call(nil, leadClaims{t.id, won}, func(c *core, in input, now time.Time) []effect {
		var effs []effect
		for i, ld := range in.(inLed).leads {
			if ld == nil {
				c.note(slog.LevelInfo, "claimed a shard for a session that has ended; releasing it", "shard", won[i].shard)
				c.stray(won[i].shard, c.tk.id, won[i].term)
				continue
			}
			c.won(ld)
			c.tk.won++
			// The new leadership's listing holds the shard's terms now.
			effs = append(effs, c.noteEnded(ld.shard, 0), doCount{countClaim}, doRenewSoon{})
		}
		return append(effs, c.claimRefusals(now)...)
	})
}

func (c *core) claimRefusals(now time.Time) []effect {
	t := &c.tk
	for i := range t.at {
		if a := &t.at[i]; a.ready && a.result != nil {
			c.claimRefused(a, t.id, now)
		}
	}
	return c.claimOver(now)
}

// claimOver ends a claim: the intent is taken out of the session (when it
// was listed), then done.
func (c *core) claimOver(now time.Time) []effect {
	t := &c.tk
	done, won := t.done, t.won
	t.at, t.ws, t.sent, t.done = nil, nil, nil, nil
	if !t.announce {
		return done(c, won, now)
	}
	t.announce = false
	return c.call(nil, announce{t.id, nil}, func(c *core, _ input, now time.Time) []effect { return done(c, won, now) })
}

// hubOf returns the hub by v: the live worker with the lowest ID whose
// session record names where it serves PeerHandler (this worker's own
// address for itself).
func (c *core) hubOf(v view) (id, addr string) {
	for _, w := range v.live {
		if w == c.cp.id {
			return w, c.cp.serverAddr
		}
		if pv := c.peers[w]; pv != nil && pv.ok && pv.rec.Addr != "" {
			return w, pv.rec.Addr
		}
	}
	return "", ""
}

// lookAhead is how long before a watched session's lease runs out (by
// this worker's first sight of its last write) the look that may take its
// shards over begins: the look reads the member list, the sessions and the
// shard records, and writes its intent first, then waits for that instant
// to read the sessions it must clear (claimClear, asOf). So the claims are
// written a few round trips after the lease's end instead of a whole look
// later. It is the longest recent time from the start of a tick that
// looked so to its intent written (preLook, a decaying maximum), or eight
// of the store's recent round trips (the listing, the member list, the
// sessions, the records in a few rounds, the intent) if longer, plus a
// thirty-second of FrequentInterval, and at most half an interval. The
// takeover rule is the same: the reads that clear a claim are sent at or
// after the end.
func (c *core) lookAhead() time.Duration {
	return min(c.cp.fi/2, c.cp.fi/32+max(8*c.obs.rtt, c.preLook))
}
