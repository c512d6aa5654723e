package s3lect

import (
	"time"

	"github.com/s3lect/s3lect/internal/retry"
	"github.com/s3lect/s3lect/store"
)

// The follower's role (docs/protocol.md, sections 3 and 4, the follower
// states): how it watches the lockfile, what it makes of a read and of a
// peer's hint, and the arithmetic of when it reads. A campaign takes over
// from a follower's reads (campaign.go).

// mode is how a follower watches the lockfile.
type mode int

const (
	frequent   mode = iota // leadership is changing or unknown: read every FrequentInterval
	infrequent             // a leader has renewed steadily for LeaderTimeout: read every InfrequentInterval
	peerWatch              // the leader is asked over HTTPS instead (PeerMode)
)

var modeNames = [...]string{frequent: "frequent", infrequent: "infrequent", peerWatch: "peer"}

func (m mode) String() string { return modeNames[m] }

// follower is the state of an elector that does not hold a leadership. A
// new one is made when a leadership ends; none exists while one is held.
type follower struct {
	v          view          // its knowledge of the lockfile
	mode       mode          // how it watches
	nextRead   time.Time     // the next storage read is due then (zero: now)
	readErr    error         // the last read's failure, nil after a success
	stale      bool          // the view is known to be out of date: no takeover before the next read
	aligned    bool          // the next read is an infrequent one timed just after one of the leader's renewals is due
	timedFor   time.Time     // the time alignedRead gave the next read (zero: none); a read sent for it was timed
	lag        time.Duration // how much later than the slack timed reads go, learned from renewals they came too early for
	offset     time.Duration // how much later than its renewal's slack and lag the timed read goes: 0 or a half slot (alignedRead)
	stable     leaseKey      // the leadership seen renewing since stableAt
	stableAt   time.Time     //
	peerNoETag bool          // the leader's peer answers carry no ETag (the original s3lect)
	peerOn     peerKey       // the poller's target while it has one
	hold       leaseKey      // a leadership this elector released: the others take its record first (handover.go)
	holdUntil  time.Time     // in storage mode, until when its release is left to the others (zero: handoverHold)
	ann        announced     // the last leadership seen announcing its release, and when (announce.go)
}

// peerKey names the poller's target: a leadership at an address.
type peerKey struct {
	lease leaseKey
	addr  string
}

// follow is the follower's step (section 4, the follower states): it
// announces the leader it knows of, lets a waiting campaign take over when
// the rules allow (pursue), and reads when a read is due.
func (c *core) follow(f *follower, now time.Time, readNow bool, emit func(effect)) time.Time {
	if f.v.kind != kindUnknown || f.readErr != nil {
		c.sh.announce(Change{Leader: f.watched(now, c.sh.lease(f.v)), Err: c.sh.readErr(f.readErr)}, emit) // never a made-up "no leader" before the first read
	}

	var wake time.Time
	soonest := func(t time.Time) {
		// What is due by now is done by now, or waits for an event.
		if t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	at, ok := f.v.takeoverAt(c.sh.lease(f.v))
	if ok && f.v.kind == kindHeld && f.mode == frequent {
		soonest(at) // for a watcher, the observed lease's end
	}
	if c.sh.call != nil {
		return wake
	}
	if c.camp.id != 0 && c.pursue(f, now, readNow, soonest, emit) {
		return wake
	}

	if f.mode == peerWatch {
		switch {
		case ok && f.v.kind == kindHeld && !now.Before(at) && !mutPeerNoCheck:
			// Section 5: no newer write was heard by the takeover time:
			// stop believing the peer and read the store.
			f.mode, f.nextRead, f.peerOn = frequent, now, peerKey{}
			emit(doPeer{})
		case f.peerNoETag:
			// The leader answers without ETags: reads go on at the
			// infrequent pace.
		default:
			if ok && f.v.kind == kindHeld && !mutPeerNoCheck {
				soonest(at)
			}
			return wake // the poller speaks for the leader
		}
	}
	if !now.Before(f.nextRead) {
		c.sh.send(doRead{c.sh.nextGen()}, now, emit)
		return wake
	}
	soonest(f.nextRead)
	return wake
}

func (doRead) done(c *core, ev evStore, sent, now time.Time, emit func(effect)) bool {
	c.readDone(c.fol(), ev, sent, now, emit)
	return ev.err == nil
}

// readDone takes in a follower's read.
func (c *core) readDone(f *follower, ev evStore, sent, now time.Time, emit func(effect)) {
	if ev.err != nil {
		if c.sh.closing {
			return // Close cut the read short
		}
		permanent := store.IsPermanent(ev.err)
		if permanent && c.camp.id != 0 {
			emit(doAnswer{c.camp.id, ev.err})
			c.camp = campaign{}
		}
		f.readFailed(c.sh.p, ev.err, permanent, sent)
		emit(doLog{"reading the lockfile failed", []any{"err", ev.err}})
		return
	}
	c.sh.lastRead = now
	if c.adoptClaim(ev, now, emit) {
		return
	}
	f.readReturned(&c.sh, ev.data, ev.etag, ev.token, sent, now, emit)
}

// readFailed takes in a read that failed, permanently or not.
func (f *follower) readFailed(p params, err error, permanent bool, sent time.Time) {
	f.readErr, f.mode = err, frequent
	if permanent {
		f.mode = infrequent // keep watching, without hammering a store that refuses us
	}
	f.nextRead = sent.Add(f.interval(p))
}

// readReturned takes in a read, sent at sent, that returned data and etag
// ("" for an absent lockfile) at now.
func (f *follower) readReturned(sh *shared, data []byte, etag, token string, sent, now time.Time, emit func(effect)) {
	p := sh.p
	f.readErr, f.stale = nil, false
	before := f.v
	f.v = f.v.observeToken(data, etag, token, now)
	fresh := !before.same(f.v)
	if fresh {
		f.v.claimed = max(sh.maxTerm, f.v.term)
	}
	sh.maxTerm = max(sh.maxTerm, f.v.term)
	sh.maxTTL = max(sh.maxTTL, f.v.ttl)
	if (f.v.kind == kindHeld || f.v.kind == kindVacant) && f.v.rec.Lease != "" && f.v.ttl == 0 {
		sh.v2Term = max(sh.v2Term, f.v.term) // a version 2 writer's term: claimed by nobody (section 1.2)
	}
	if f.v.kind == kindCorrupt && fresh {
		emit(doLog{"lockfile is unreadable; it will be taken over after the lease assumed for records without ttl", []any{"etag", etag}})
	}
	if (f.v.kind == kindHeld || f.v.kind == kindVacant) && fresh && f.v.rec.Term == 0 && f.v.rec.Lease == "" {
		// The original s3lect wrote it (section 1.2).
		if sh.foreign++; sh.foreign == 1 {
			emit(doLog{"the lockfile holds a record of the original s3lect (no term, no lease): this is a mixed group, " +
				"safe only as docs/protocol.md, section 1.2, says; Stats.ForeignRecords counts such records", []any{"leader", f.v.rec.LeaderID}})
		}
	}

	key := f.v.key()
	if f.v.kind != kindHeld || key != f.stable {
		f.stable, f.stableAt = key, now
	}
	// Section 3.3: lastUpdated is the writer's wall clock, a hint that may
	// change when the follower reads, never let it take over sooner. A
	// timed read judges the record by the renewal it was timed for: its
	// age less the half slot it may have waited (off). Only reads in the
	// first slot teach the lag: one half a FrequentInterval later finds its
	// renewal whatever the lag.
	timed := !f.timedFor.IsZero() && f.timedFor.Equal(f.nextRead)
	var off time.Duration
	if timed {
		off = f.offset
	}
	age := now.Sub(f.v.rec.LastUpdated)
	late := age-off > lateAge(p.fi, f.aligned)
	if f.v.kind == kindHeld && fresh && timed && off == 0 {
		f.lag = nextLag(f.lag, age, p.fi)
	}
	if f.v.kind == kindHeld && fresh && !late && now.Sub(f.stableAt) >= p.lt {
		f.mode = infrequent
	} else {
		f.mode = frequent
	}
	f.nextRead, f.aligned, f.timedFor, f.offset = sent.Add(f.interval(p)), false, time.Time{}, 0
	if w := max(p.ii, p.lt); f.v.kind == kindHeld && age > -w && age < w {
		// Section 3.3: frequent and infrequent reads alike land just after
		// one of the leader's renewals (the slack and the lag after the
		// stamp's phase), infrequent ones spread by slot. Stamps more
		// than a lease or an InfrequentInterval off the follower's clock
		// time nothing. Only an infrequent read judges lateness by the
		// renewal it was timed for: a frequent follower whose reads come
		// too early for the renewals still settles.
		f.nextRead, f.offset = alignedRead(f.nextRead.Add(-off), now.Add(-age).Add(f.lag), f.v.rec.Held, p.slot, f.v.rec.Lease, p.fi, f.interval(p), p.ii <= p.fi)
		f.aligned, f.timedFor = f.mode == infrequent, f.nextRead
	}
	f.watchRelease(sh, sent, now) // section 11.4: an announced release
	if p.peerMode && f.mode == infrequent && f.v.rec.LeaderAddr != "" && (p.pin == "" || f.v.rec.PeerPin != "") {
		was := f.peerOn
		f.mode, f.peerOn = peerWatch, peerKey{f.v.key(), f.v.rec.LeaderAddr}
		if was != f.peerOn || !f.peerNoETag {
			sh.peerGen++
			f.peerNoETag = false
			emit(doPeer{peerTarget{gen: sh.peerGen, id: f.v.rec.LeaderID, term: f.v.rec.Term,
				lease: f.v.rec.Lease, addr: f.v.rec.LeaderAddr, etag: f.v.etag, pin: f.v.rec.PeerPin}})
		}
	} else {
		f.peerOn = peerKey{}
	}
}

// lateAge is how old (by the follower's wall clock) a record may be before
// it counts as late (section 3.3): one and a half FrequentIntervals, or,
// for an infrequent read timed just after a renewal was due, half a
// FrequentInterval and the renewal's slack.
func lateAge(fi time.Duration, aligned bool) time.Duration {
	if aligned {
		return fi/2 + renewalSlack(fi)
	}
	return fi + fi/2
}

// renewalSlack is how long after a renewal is due a follower reads to see
// it: the renewal's latency and scheduling delay (section 3.3). With the
// lag (nextLag), it is all a follower's first sight of the last write
// adds to a crash failover beyond the physical limit, so it is small:
// 312 ms at the default FrequentInterval, 12.5 ms at the report's scale
// of 1/25; a slower store teaches the follower a lag.
func renewalSlack(fi time.Duration) time.Duration { return fi / 16 }

// nextLag returns a follower's lag after one of its timed reads returned
// a new record of age age (section 3.3). A record older than an infrequent
// timed read's lateness bound is the renewal before the one the read was
// timed for, which had not landed yet (a slow write, or a clock ahead of
// the leader's): the read came too early, so reads go later, by the slack
// and twice the lag so far, up to a quarter of FrequentInterval. A read
// that found its renewal shrinks the lag by a thirty-second, so that a
// slow spell is not paid for ever (and the lag is found again, at the
// cost of one read too early in about twenty). Only new records
// count: after a crash the same record is read again and again, and that
// teaches nothing.
func nextLag(lag, age, fi time.Duration) time.Duration {
	if age > lateAge(fi, true) {
		return min(2*lag+renewalSlack(fi), fi/4)
	}
	return lag - lag/32
}

// alignedRead returns when a follower reads next (section 3.3): just
// after one of the leader's renewals is due, by the phase its stamps give
// (renewals go out every FrequentInterval), in the follower's slot. due
// is when the read would otherwise be due (interval after the last);
// stamped is the local time the record's lastUpdated names; held is the
// record's held; slot is drawn from the ServerID; interval is the
// follower's: FrequentInterval (every renewal, no slots) or
// InfrequentInterval.
//
// The follower thus first sees each write a slack after it was sent, and
// its wait from first sight (section 3.1) starts as early as it can: a
// crash failover comes a slack after the lease of the last write ends.
// For a stable follower, a renewal missing shows as a late record, so
// after a crash it moves to the frequent pace at once and takes over at
// the exact time the lease allows, instead of a whole InfrequentInterval
// later. Followers spread their infrequent reads over the k renewals of
// one InfrequentInterval by their slot, so that a group's followers do
// not all read at once and a release is seen by the first of them.
//
// The renewal is chosen by rounding, not by rounding up, so that a renewal
// a little earlier than its due time does not push the read a whole cycle
// later; then the renewal of the follower's slot among the k that end
// with it: in the steady state reads are k renewals apart, and a follower
// that has just gone infrequent reads within k renewals of its last read.
//
// With InfrequentInterval = FrequentInterval (halves) every follower
// reads every renewal, stable or not, and without more all would read at
// the same moment after each one: a release would wait for that moment,
// half a FrequentInterval on average however many followers there are.
// Instead each read goes either a slack after its renewal or half a
// FrequentInterval later than that, by a hash of the follower's slot and
// the renewal's number (halfSlot); off says which (0 or
// FrequentInterval/2). Two followers split the interval between them at
// half the renewals, so a release is found sooner; after a crash, a
// follower that read the last write half a FrequentInterval late counts
// from its timed sighting of an earlier renewal instead (section 3.2:
// an eighth of a FrequentInterval later per renewal back).
func alignedRead(due, stamped time.Time, held int64, slot uint32, lease string, fi, interval time.Duration, halves bool) (at time.Time, off time.Duration) {
	wrote := stamped.Add(renewalSlack(fi))
	n := (due.Sub(wrote) + fi/2) / fi
	idx := (held + fi.Milliseconds()/2) / max(fi.Milliseconds(), 1) // this record's renewal number
	j := idx + int64(n)
	if k := int64((interval + fi - 1) / fi); k > 1 {
		// The renewal of its slot among the k that end with the one due:
		// in the steady state that is the one due, and a follower that
		// has just gone infrequent reads within k renewals of its last
		// read, as the resigner's hold-off and an announced release
		// count on (section 11), never up to 2k - 1.
		n -= time.Duration(k - 1 - ((int64(slot)-j+k-1)%k+k)%k)
		if n < 1 {
			n += time.Duration(k) // a renewal after the record read
		}
	} else if halves && halfSlot(slot, lease, j) {
		off = fi / 2
	}
	return wrote.Add(n*fi + off), off
}

// halfSlot reports whether the follower of slot reads half a
// FrequentInterval late after renewal j of the leadership of lease
// (alignedRead): a bit of a hash of the three, so that followers differ
// from each other, from one renewal to the next, and from one leadership
// to the next (a group whose leaders resign after the same number of
// renewals would otherwise meet the same bits every time).
func halfSlot(slot uint32, lease string, j int64) bool {
	x := uint64(14695981039346656037) // FNV-1a of the lease, then mixed with the rest
	for i := 0; i < len(lease); i++ {
		x = (x ^ uint64(lease[i])) * 1099511628211
	}
	x ^= uint64(slot)<<32 ^ uint64(j)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x&1 == 1
}

func (f *follower) interval(p params) time.Duration {
	if f.mode == frequent {
		return p.fi
	}
	return p.ii
}

// watched returns the live leader the follower knows of at now. A leader
// seen renewing steadily is trusted until the next read or peer answer
// says otherwise; while leadership is changing, its lease ends when a
// takeover would be allowed.
func (f *follower) watched(now time.Time, lt time.Duration) Record {
	if f.mode != frequent && f.v.kind == kindHeld {
		return f.v.rec
	}
	return f.v.leader(now, lt)
}

// trustedUntil returns until when the leader the follower shows can be
// trusted (zero: it shows none): while leadership is changing, or while a
// peer that answers with ETags speaks for the leader, until a takeover
// would be allowed; for a stable follower reading the store, also until
// its next read is overdue (InfrequentInterval after the last, plus that
// read's retry budget), since a leader seen renewing steadily is trusted
// until the next read says otherwise.
func (f *follower) trustedUntil(sh *shared) time.Time {
	if f.v.kind != kindHeld {
		return time.Time{}
	}
	at, _ := f.v.takeoverAt(sh.lease(f.v))
	if f.mode == frequent || f.mode == peerWatch && !f.peerNoETag {
		return at
	}
	due := f.nextRead.Add(3*sh.p.fi + retry.Waits) // three attempts of at most FrequentInterval (section 6)
	if due.After(at) {
		return due
	}
	return at
}

func (f *follower) show(sh *shared, st *status) {
	st.mode = f.mode.String()
	st.until = f.trustedUntil(sh)
}

// heardPeer takes in a report of the peer poller (section 5). An answer
// with an ETag the follower has not seen, from the leadership it expects
// and with more held time, is a sighting at the time the answer arrived:
// the leader wrote it before answering. An answer without an ETag (the
// original s3lect) only says the leader is there: it moves no first-sight
// time, and the follower keeps reading the store every InfrequentInterval.
// A failure sends the follower back to the store at once.
func (f *follower) heardPeer(sh *shared, r peerReport, now time.Time, emit func(effect)) {
	if f.mode != peerWatch || r.gen != sh.peerGen {
		return // about a target the loop has since dropped
	}
	switch {
	case r.err != nil:
		emit(doLog{"peer check failed; reading the lockfile", []any{"err", r.err}})
		f.mode, f.nextRead, f.peerOn = frequent, now, peerKey{}
	case r.etag == "":
		f.peerNoETag = true // a hint only: reads go on at the infrequent pace
	case r.etag != f.v.etag && f.v.kind == kindHeld && r.rec.LeaderID == f.v.rec.LeaderID && r.rec.Term == f.v.rec.Term &&
		r.rec.Lease == f.v.rec.Lease && (r.rec.Held > f.v.rec.Held || r.rec.Lease == ""):
		f.v = f.v.observe(r.rec.encode(), r.etag, r.at)
		f.v.peer, f.v.claimed = true, max(sh.maxTerm, f.v.term)
		f.nextRead = now.Add(sh.p.ii)
	}
}
