package s3lect

import "time"

// The core holds the election's decisions: a pure function of the
// elector's state, one event and the local time, returning the effects to
// perform (store calls, answers, announcements). It does no I/O, starts no
// goroutine and reads no clock; the run loop (loop.go) owns the state,
// feeds it events and performs the effects. docs/protocol.md gives the
// rules it follows; comments name its sections.
//
// This file is the dispatcher: the state, the events, the effects, and
// which role takes each event in. The roles are the protocol's, one file
// each: the follower's reads and hints (follower.go), the campaign's
// takeover (campaign.go), the leader's renewals, self-fencing and ending
// (heartbeat.go); the lease arithmetic is lease.go's.

// params are the fixed inputs of the decisions.
type params struct {
	id, addr string
	fi       time.Duration // FrequentInterval
	ii       time.Duration // InfrequentInterval
	lt       time.Duration // LeaderTimeout
	margin   time.Duration // the leader's safety margin, LeaderTimeout/10
	peerMode bool
	slot     uint32 // spreads followers' infrequent reads over the leader's renewals
	pin      string // pinned peer mode: the pin of this elector's peer certificate (peerpin.go)
}

// core is everything the election knows. Only the run loop holds one.
type core struct {
	sh   shared
	camp campaign // the Campaign call waiting for leadership, if camp.id != 0
	role role     // the follower, or the leadership held or ending
}

func newCore(p params) core { return core{sh: shared{p: p}, role: &follower{}} }

// role is the elector's part in the election (docs/protocol.md, section
// 4): a *follower or a *leader, never both, never neither. The follower's
// view of the lockfile is dropped when a leadership is won and built
// afresh when it ends: a transition replaces the role whole.
type role interface {
	// show fills in the role's part of what the core shows outside.
	show(sh *shared, st *status)
	// heardPeer takes in a report of the peer poller (section 5).
	heardPeer(sh *shared, r peerReport, now time.Time, emit func(effect))
}

// fol returns the follower, or nil while a leadership is held or ending.
func (c *core) fol() *follower { f, _ := c.role.(*follower); return f }

// lead returns the leadership held or ending, or nil while following.
func (c *core) lead() *leader { l, _ := c.role.(*leader); return l }

// leading reports whether a leadership is held and has not ended: the run
// loop feeds a leadership's end to the core only then.
func (c *core) leading() bool { l := c.lead(); return l != nil && l.ending == nil }

// shared is what the election knows whatever its role.
type shared struct {
	p params

	gen     uint64    // numbers store calls; a result is for the call in flight only if its gen matches
	call    storeCall // the store call in flight; nil if none
	sent    time.Time // when call was sent; a lease counts from it
	peerGen uint64    // numbers peer targets, to recognise stale reports

	maxTerm uint64        // the highest term seen or written (section 1, term)
	maxTTL  time.Duration // the longest lease a record, the term object or a claim of this lockfile has stated (section 3.1)
	v2Term  uint64        // the highest term seen in a record without ttl but with a lease: a version 2 writer's, which it did not claim (section 1.2)
	claimTo uint64        // the highest claim a search found: every term up to it is claimed (claims are contiguous, section 1.1), so no version 2 term below needs a claim made for it (section 1.2)

	termSeen string    // the term object as last read: ETag and SHA-256 of its bytes (section 4)
	foreign  uint64    // records read without the version 2 fields (section 1.2); the first is logged
	stamp    time.Time // the last lastUpdated written; stamps only rise (section 9, 4)

	pub       Change    // what was announced last
	known     bool      // pub reflects at least one read or write
	lastWrite time.Time // when the last successful write of a handed leadership was sent
	lastRead  time.Time // when the last successful read returned

	closing  bool  // Close was called
	closed   bool  // Close is done
	closeErr error // why a release Close had to write could not be written: Close returns it

	answered bool // the store has answered a call since the elector started (noanswer.go)
	warned   bool // the first failure before any answer was logged at WARN
}

// next applies ev at local time now. It returns the effects to perform in
// order, and when the loop must call it again (zero: only on an event). It
// changes nothing but c: no I/O, no clock, no goroutine. (It works on c in
// place rather than on a copy, to keep the run loop's stack small: a
// thousand electors in one process each have one.)
func (c *core) next(ev event, now time.Time) ([]effect, time.Time) {
	// A Change reaches the subscribers once the snapshot that shows it is
	// published: each doPublish waits for the doStatus that follows it
	// (next ends with one), so that whoever receives a Change finds Stats
	// and Leader saying as much.
	var fx, held []effect
	emit := func(f effect) {
		switch f.(type) {
		case doPublish:
			held = append(held, f)
		case doStatus:
			fx = append(append(fx, f), held...)
			held = held[:0]
		default:
			fx = append(fx, f)
		}
	}
	readNow := ev.on(c, now, emit)
	wake := c.act(now, readNow, emit)
	emit(doStatus{c.status()})
	return fx, wake
}

// status is what the core shows outside, for the run loop's snapshot.
func (c *core) status() status {
	st := status{change: c.sh.pub, known: c.sh.known, lastWrite: c.sh.lastWrite, lastRead: c.sh.lastRead, foreign: c.sh.foreign}
	c.role.show(&c.sh, &st)
	return st
}

func (c *core) onClose(emit func(effect)) {
	c.sh.closing = true
	if c.leading() {
		c.endLead(c.lead(), errCloseResign, emit)
	}
	if c.camp.id != 0 && !c.sh.claiming() {
		emit(doAnswer{c.camp.id, ErrClosed})
		c.camp = campaign{}
	}
}

// onStore takes in a store result and reports whether it is a read that
// has just returned.
func (c *core) onStore(ev evStore, now time.Time, emit func(effect)) bool {
	call := c.sh.call
	if ev.gen != c.sh.gen || call == nil {
		return false // a call the loop no longer waits for
	}
	c.sh.heard(ev.err, emit) // noanswer.go
	c.sh.call = nil
	return call.done(c, ev, c.sh.sent, now, emit)
}

// act does what is due at now and returns when something next falls due.
// readNow says a read has just returned, so that an infrequent follower may
// take over on what it read.
func (c *core) act(now time.Time, readNow bool, emit func(effect)) time.Time {
	if c.sh.closed {
		return time.Time{}
	}
	if l := c.lead(); l != nil {
		wake, over := c.leaderAct(l, now, emit)
		if !over {
			return wake
		}
		readNow = false // a new follower, on no read of its own yet
	}
	if c.sh.closing {
		if c.sh.call == nil {
			c.sh.closed = true
			emit(doPeer{})
			emit(doClosed{c.sh.closeErr})
		}
		return time.Time{}
	}
	return c.follow(c.fol(), now, readNow, emit)
}

// send sends call, at now, as the store call in flight. call's gen must
// come from nextGen.
func (sh *shared) send(call storeCall, now time.Time, emit func(effect)) {
	sh.call, sh.sent = call, now
	emit(call)
}

// claiming reports whether the call in flight is a takeover's write of
// the lockfile, whose outcome decides a Campaign that gave up (section 4).
func (sh *shared) claiming() bool {
	_, ok := sh.call.(doClaim)
	return ok
}

// nextGen numbers a new store call.
func (sh *shared) nextGen() uint64 {
	sh.gen++
	return sh.gen
}

// write returns a new write of data over ifMatch ("" creates), whose
// content has the SHA-256 over.
func (sh *shared) write(data []byte, ifMatch string, over [32]byte) write {
	return write{gen: sh.nextGen(), data: data, ifMatch: ifMatch, over: over}
}

// nextStamp returns a lastUpdated for a new write: the wall clock, but
// always after every stamp written before, so that no two writes of this
// elector have the same bytes even if the wall clock steps back (section
// 9, 4).
func (sh *shared) nextStamp(now time.Time) time.Time {
	t := now.UTC().Round(0)
	if !t.After(sh.stamp) {
		t = sh.stamp.Add(time.Nanosecond)
	}
	sh.stamp = t
	return t
}

// announce publishes c if it differs from what was announced last in
// leader, term, IsLeader or error.
func (sh *shared) announce(c Change, emit func(effect)) {
	p := sh.pub
	if sh.known && p.IsLeader == c.IsLeader && p.Leader.LeaderID == c.Leader.LeaderID &&
		p.Leader.Term == c.Leader.Term && sameErr(p.Err, c.Err) {
		sh.pub = c // same announcement; keep the newest record for Leader()
		return
	}
	sh.pub, sh.known = c, true
	emit(doPublish{c})
}

func sameErr(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}

// Events: what the run loop feeds the core. Each kind names the core's
// handler for it, so that a new kind that has none does not compile.
type event interface {
	// on applies the event to c at now and reports whether it is a read
	// that has just returned.
	on(c *core, now time.Time, emit func(effect)) bool
}

type (
	evTimer    struct{} // a timer fired: do what is due
	evCampaign struct { // Campaign was called
		id    uint64
		lease string
	}
	evWithdraw struct { // Campaign gave up
		id    uint64
		cause error
	}
	evLeadDone struct{ cause error } // the leadership's context ended
	evClose    struct{}              // Close was called
	evPeer     peerReport            // the peer poller heard something
	evNoteTerm struct{ term uint64 } // NoteTerm: a term seen outside the election's objects
	evStore    struct {              // a store call finished
		gen    uint64
		data   []byte // what a read returned
		etag   string // "" with a nil err: absent
		err    error
		unsure bool   // a write attempt's outcome is unknown
		token  string // a read's sighting token (store.Sighter), "" if none
		term   uint64 // doFindTerm's answer: the highest term claimed
	}
)

func (evTimer) on(*core, time.Time, func(effect)) bool { return false } // act does what is due

func (ev evCampaign) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onCampaign(ev, emit)
	return false
}

func (ev evWithdraw) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onWithdraw(ev, emit)
	return false
}

func (ev evLeadDone) on(c *core, _ time.Time, _ func(effect)) bool {
	if l := c.lead(); l != nil && l.ending == nil {
		l.ending = ev.cause
	}
	return false
}

func (evClose) on(c *core, _ time.Time, emit func(effect)) bool {
	c.onClose(emit)
	return false
}

func (ev evPeer) on(c *core, now time.Time, emit func(effect)) bool {
	c.role.heardPeer(&c.sh, peerReport(ev), now, emit)
	return false
}

func (ev evNoteTerm) on(c *core, _ time.Time, _ func(effect)) bool {
	c.sh.maxTerm = max(c.sh.maxTerm, ev.term) // the next takeover writes above it
	return false
}

func (ev evStore) on(c *core, now time.Time, emit func(effect)) bool {
	return c.onStore(ev, now, emit)
}

// Effects: what the core asks the run loop to do. Each kind names the
// executor's method for it, so that the loop cannot leave one unhandled.
type effect interface{ do(x executor) }

// executor performs effects; the run loop is one.
type executor interface {
	read(doRead)
	readTerm(doReadTerm)
	claimTerm(doClaimTerm)
	findTerm(doFindTerm)
	raiseTerm(doRaiseTerm)
	claim(doClaim)
	renew(doRenew)
	release(doRelease)
	startLead(doLead)
	renewed(doRenewed)
	endLead(doEnd)
	exited(doExited)
	answer(doAnswer)
	setPeer(doPeer)
	publish(doPublish)
	show(doStatus)
	log(doLog)
	closed(doClosed)
}

// storeCall is a store call: an effect the run loop performs, and, while
// it is in flight, the call whose result the core takes in next. Each
// kind names the core's handler for its result, so that a kind without
// one does not compile.
type storeCall interface {
	effect
	// done takes in the call's result at now; sent is when the call was
	// sent. It reports whether a read has just returned.
	done(c *core, ev evStore, sent, now time.Time, emit func(effect)) bool
}

// write is what every store write sends.
type write struct {
	gen     uint64
	data    []byte
	ifMatch string   // "" creates
	over    [32]byte // the SHA-256 of the content ifMatch names
}

// The store calls, one kind per purpose; each one's done is in the file
// of the role that sends it.
type (
	doRead      struct{ gen uint64 } // a follower's read of the lockfile
	doReadTerm  struct{ gen uint64 } // a takeover's read of the term object (section 1.1)
	doClaimTerm struct {             // a takeover's create of its term's claim (section 1.1)
		write
		term uint64
		gap  bool // the claim of a term a version 2 writer used, made for it before the takeover's own (section 1.2)
	}
	doFindTerm struct { // a search for the highest term claimed, from one known claimed (section 1.1)
		gen  uint64
		from uint64
	}
	doRaiseTerm struct{ write } // a takeover's raise of the term object, before its write
	doClaim     struct{ write } // a takeover's write of the lockfile
	doRenew     struct {        // a leader's renewal
		write
		notAfter time.Time // no attempt is sent from then on: the lease's end
	}
	doRelease struct { // a leader's release of the lockfile
		write
		orOver []byte // if ifMatch is refused and the lockfile holds these bytes, write over them
	}
)

// The other effects.
type (
	doLead struct { // hand a Leadership to the Campaign that won it
		campID   uint64
		term     uint64
		deadline time.Time
	}
	doRenewed struct{ deadline time.Time } // the lease now ends at deadline
	doEnd     struct{ cause error }        // cancel the live leadership's context
	doExited  struct{ err error }          // the leadership is over; err: its release failed
	doAnswer  struct {                     // answer a Campaign that did not win
		campID uint64
		err    error
	}
	doPeer    struct{ t peerTarget } // addr "" stops the poller
	doPublish struct{ c Change }     // tell the subscribers
	doStatus  struct{ st status }    // what Leader(), Stats, health and the peer handler show
	doLog     struct {
		msg  string
		args []any // slog's key-value pairs
	}
	doClosed struct{ err error } // Close is done: the loop may return, and Close returns err
)

func (f doRead) do(x executor)      { x.read(f) }
func (f doReadTerm) do(x executor)  { x.readTerm(f) }
func (f doClaimTerm) do(x executor) { x.claimTerm(f) }
func (f doFindTerm) do(x executor)  { x.findTerm(f) }
func (f doRaiseTerm) do(x executor) { x.raiseTerm(f) }
func (f doClaim) do(x executor)     { x.claim(f) }
func (f doRenew) do(x executor)     { x.renew(f) }
func (f doRelease) do(x executor)   { x.release(f) }
func (f doLead) do(x executor)      { x.startLead(f) }
func (f doRenewed) do(x executor)   { x.renewed(f) }
func (f doEnd) do(x executor)       { x.endLead(f) }
func (f doExited) do(x executor)    { x.exited(f) }
func (f doAnswer) do(x executor)    { x.answer(f) }
func (f doPeer) do(x executor)      { x.setPeer(f) }
func (f doPublish) do(x executor)   { x.publish(f) }
func (f doStatus) do(x executor)    { x.show(f) }
func (f doLog) do(x executor)       { x.log(f) }
func (f doClosed) do(x executor)    { x.closed(f) }

// status is what the election shows outside the run loop: the loop
// publishes it, with the live Leadership, as the one snapshot that
// Leader(), Stats, the health check and the peer handler read.
type status struct {
	change    Change    // the last announcement, with the newest record
	known     bool      // change reflects at least one read or write
	mode      string    // Stats.Mode: "leader", "frequent", "infrequent" or "peer"
	holding   bool      // a Leadership was handed out and is not over yet
	rec       Record    // while holding: the leader's last write
	etag      string    // and its ETag
	lastWrite time.Time // Stats.LastRenewal
	lastRead  time.Time // Stats.LastRead
	foreign   uint64    // Stats.ForeignRecords
	// until is when the follower's knowledge of change.Leader runs out
	// (local time; zero: no leader shown): Leader() reports none from
	// then on, even if the run loop has not stepped since (section 4).
	until time.Time
}
