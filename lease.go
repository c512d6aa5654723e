package s3lect

import (
	"time"

	"github.com/s3lect/s3lect/internal/lease"
)

// The lease arithmetic: how long a lease is, what a follower knows of the
// lockfile (its current sighting), and when the rules of
// docs/protocol.md, sections 3.1 and 3.2, let it take over. record.go
// holds the wire format.

// noTTLLease is the shortest lease a follower assumes for a record that
// states none: one written before protocol version 3 (the original
// s3lect, a version 2 writer during a rolling upgrade), or unreadable
// content. Both the original s3lect and version 2 default to it
// (docs/protocol.md, 3.1).
const noTTLLease = DefaultLeaderTimeout

// maxAnchoredHeld is the largest held time (milliseconds) that section
// 3.2's bound uses: a hundred years, so that the held time stretched by
// an eighth, plus a lease of at most lease.MaxTiming, stays far inside
// time.Duration. A record claiming more is waited out by section 3.1 alone.
const maxAnchoredHeld = 100 * 365 * 24 * int64(time.Hour/time.Millisecond)

// lease returns how long a follower must watch v unchanged before it may
// take it over (section 3.1): the longer of its own LeaderTimeout and the
// lease the record states; for a record that states none, the longest
// lease this elector can assume: its own, noTTLLease, and every lease a
// record, the term object or a claim of this lockfile has stated to it.
// A record below a term known to be claimed is waited out for the
// longest lease known too, whatever its own ttl (section 2.1): it may be
// a restore, and the leadership it hides may hold a longer lease.
func (sh *shared) lease(v view) time.Duration {
	switch {
	case mutIgnoreTTL:
		return sh.p.lt
	case v.ttl > 0 && v.belowClaim() && !mutClaimOwnTTL:
		return max(lease.Wait(sh.p.lt, v.ttl.Milliseconds()), sh.maxTTL)
	case v.ttl > 0:
		return lease.Wait(sh.p.lt, v.ttl.Milliseconds())
	}
	return max(sh.p.lt, noTTLLease, sh.maxTTL)
}

// kind classifies what a read of the lockfile found.
type kind int

const (
	kindUnknown kind = iota // not read yet, or the last read failed before any success
	kindAbsent              // no object
	kindVacant              // a released record: lastUpdated is zero
	kindHeld                // a valid record with a live-looking lease
	kindCorrupt             // unreadable content: a holder that never renews
	kindOurs                // our own record, left by a leadership of this elector that has ended, not read since
)

// view is what the elector knows of the lockfile: its current sighting.
// A sighting is an ETag together with a hash of the bytes read, so that a
// store that reuses an ETag for other content (a rewound store) is seen
// as having changed.
type view struct {
	kind kind
	etag string   // "" when absent
	sum  [32]byte // SHA-256 of the content; zero when absent
	rec  Record   // valid for kindVacant, kindHeld and kindOurs
	term uint64   // the term a takeover must exceed

	// token is the store's sighting token the content was read with
	// (store.Sighter): "" when none was (a peer answer, a store without
	// tokens, the elector's own write).
	token string
	// peer says the view was heard from the leader's peer endpoint, not
	// read from the store: a store read of the same bytes with a token
	// is a sighting of its own (docs/protocol.md, 2.1).
	peer bool

	// claimed is the highest term this elector knew to be claimed when it
	// first saw this sighting, or learned since (docs/protocol.md, 1.1).
	// A release whose term is below it does not end the last leadership
	// known: it is waited out like a held record.
	claimed uint64

	// seenAt is the local monotonic time at which this sighting was first
	// seen. Expiry is measured from it, never from rec.LastUpdated.
	seenAt time.Time

	// heldBefore is set on an absence that followed a held or unreadable
	// record: the object was deleted under a leader that may still be
	// live, so the absence must be watched for LeaderTimeout like a lease.
	heldBefore bool

	// ttl is the lease the record states (its ttl field), or for an
	// absence after a held record, that record's; zero when unknown (a
	// record of a writer before version 3, unreadable content). The
	// wait is shared.lease's.
	ttl time.Duration

	// For the elapsed-time rule (docs/protocol.md, 3.2), on held records
	// that carry a lease: anchor is the earliest, over the sightings i of
	// this leadership, of seenAt_i - stretch(held_i - 1ms), and maxHeld the
	// largest held seen. anchored is false when the rule may not be used.
	anchor   time.Time
	maxHeld  int64
	anchored bool
}

// belowClaim reports whether v is a record (held, released or this
// elector's own) whose term is below a term this elector knows to be
// claimed (docs/protocol.md, 2.1): a leadership after it may have begun,
// and a restore may have put this record back over it.
func (v view) belowClaim() bool {
	return v.kind != kindAbsent && v.kind != kindUnknown && v.claimed > v.term
}

// leaseKey names one leadership: its leader, term and lease value.
type leaseKey struct {
	id    string
	term  uint64
	lease string
}

func (v view) key() leaseKey { return leaseKey{v.rec.LeaderID, v.rec.Term, v.rec.Lease} }

// same reports whether w is the same sighting as v.
func (v view) same(w view) bool {
	return v.kind == w.kind && v.etag == w.etag && (v.sum == w.sum || mutETagOnly) &&
		sameTokens(v, w)
}

// sameTokens reports whether v and w were read with the same sighting
// token, as far as can be told (docs/protocol.md, 2.1): equal tokens, or
// one side read with none. A view heard from the peer has none but takes
// none either: its bytes may be in the store as a restore of what a stale
// peer served, so only a store that gives no token matches it.
func sameTokens(v, w view) bool {
	switch {
	case v.token == w.token || mutSightNoToken:
		return true
	case v.token == "":
		return !v.peer || mutPeerAdoptToken
	case w.token == "":
		return !w.peer || mutPeerAdoptToken
	}
	return false
}

// stretch returns d lengthened by δ = 1/8 (docs/protocol.md, 3.2).
func stretch(d time.Duration) time.Duration {
	if mutDeltaZero {
		return d
	}
	return d + d/8
}

// observe returns the view after a read at local time now that returned
// data and etag (absent when etag == ""), without a sighting token.
func (v view) observe(data []byte, etag string, now time.Time) view {
	return v.observeToken(data, etag, "", now)
}

// observeToken is observe for a read that came with the store's sighting
// token (store.Sighter; "" if none). A token other than the one the view
// was read with is a new sighting, though ETag and bytes be the same: a
// restore of earlier bytes (docs/protocol.md, 2.1). A view without a
// token (heard from the peer, or from a store without tokens) takes the
// first token read for the same ETag and bytes as its own.
func (v view) observeToken(data []byte, etag, token string, now time.Time) view {
	s := lease.Sight(data, etag)
	n := view{etag: s.ETag, sum: s.Sum, seenAt: now, token: token}
	if etag == "" {
		n.kind = kindAbsent
	}
	sameToken := sameTokens(v, view{token: token})
	if v.kind != kindUnknown && (v.kind != kindOurs || mutExLeaderShortcut) && etag == v.etag && (n.sum == v.sum || mutETagOnly) && sameToken {
		if v.token == "" {
			v.token, v.peer = token, false
		}
		// Unchanged: keep the time we first saw it. Not a record this
		// elector wrote and has not read since (kindOurs): the same bytes
		// under the same ETag may be a restore of it, made while this
		// elector could not read, so its first read starts the wait
		// (docs/protocol.md, 4.3, T8).
		return v
	}
	if etag == "" {
		n.heldBefore = v.heldBefore || v.kind == kindHeld || v.kind == kindCorrupt || v.kind == kindOurs
		if v.kind == kindHeld || v.kind == kindOurs || v.kind == kindAbsent {
			n.ttl = v.ttl // the deleted record's lease
		}
		return n
	}
	rec, err := ParseRecord(data)
	switch {
	case err != nil:
		n.kind = kindCorrupt
		n.term = salvageTerm(data)
		return n
	case rec.LastUpdated.IsZero():
		n.kind, n.rec, n.term = kindVacant, rec, rec.Term
		n.ttl = lease.TTL(rec.TTL)
		return n
	}
	n.kind, n.rec, n.term = kindHeld, rec, rec.Term
	n.ttl = lease.TTL(rec.TTL)
	if rec.Lease == "" || rec.Held > maxAnchoredHeld {
		// An older writer, or a held time beyond any the arithmetic below
		// can stretch without overflow: observed silence only.
		return n
	}
	a := now.Add(-stretch(time.Duration(rec.Held)*time.Millisecond - time.Millisecond))
	switch {
	case v.kind != kindHeld || v.key() != n.key():
		n.anchor, n.maxHeld, n.anchored = a, rec.Held, true
	case rec.Held > v.maxHeld || rec.Held == v.maxHeld && mutSightNoToken:
		// A later send of the same leadership. A new sighting with the
		// held time already seen is not one: an operator's restore of
		// what this follower read (new token, same bytes), or a
		// step-down request (the record as it was, plus stepDown). Only
		// its own sighting counts then (default, below).
		n.anchor, n.maxHeld, n.anchored = a, rec.Held, true
		if v.anchored && v.anchor.Before(a) {
			n.anchor = v.anchor
		}
	default:
		// The leader's time did not go forward: a restore, a rewound
		// store or a liar. Only this sighting's own time is trusted from
		// here on.
		n.anchor, n.maxHeld, n.anchored = a, rec.Held, true
	}
	return n
}

// takeoverAt returns the earliest local time at which a takeover of this
// view may be attempted, and false when none may be (nothing read yet).
func (v view) takeoverAt(timeout time.Duration) (time.Time, bool) {
	switch v.kind {
	case kindUnknown:
		return time.Time{}, false
	case kindOurs:
		if mutExLeaderShortcut {
			return v.seenAt, true
		}
	case kindVacant:
		// A release by a version 3 leader is its own, written over its
		// own record: nobody holds the lease. One that states no lease
		// may follow a takeover that did not wait out the lease it
		// replaced (the original s3lect's by wall clock, a version 2
		// writer's with a shorter LeaderTimeout): it is waited out like a
		// held record (docs/protocol.md, 3.1).
		// A release of a term below one claimed since (a restore of an
		// earlier release, section 2.1) may not end the leadership that
		// holds the lease now: it is waited out too.
		if (v.ttl > 0 || mutIgnoreTTL) && (v.claimed <= v.term || mutReleaseAtOnce) {
			return v.seenAt, true
		}
	case kindAbsent:
		if !v.heldBefore {
			return v.seenAt, true
		}
	}
	at := v.seenAt.Add(timeout)
	if v.kind == kindHeld && v.anchored {
		// The leader's lease ran from no later than its send of this
		// record, which its held time places relative to earlier ones.
		if t := v.anchor.Add(stretch(time.Duration(v.rec.Held) * time.Millisecond)).Add(timeout); t.Before(at) {
			at = t
		}
	}
	return at, true
}

// leader returns the live leader the view shows at local time now, or the
// zero Record.
func (v view) leader(now time.Time, timeout time.Duration) Record {
	if v.kind != kindHeld {
		return Record{}
	}
	if at, _ := v.takeoverAt(timeout); !now.Before(at) {
		return Record{}
	}
	return v.rec
}
