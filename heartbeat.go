package s3lect

import (
	"crypto/sha256"
	"errors"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The leader's side of the core: its lease, its renewals and how a
// renewal's result ends it (docs/protocol.md, sections 3.1 and 4, Leader).
// Self-fencing does not wait for any of it: a timer cancels the
// Leadership's context at the lease deadline (leadership.go), a renewal is
// sent under that context, and no attempt is sent once the deadline has
// passed (retry.go).

// leader is the state of a leadership this elector holds or is ending. It
// is made when a takeover wins and dropped when the leadership is over.
type leader struct {
	campID   uint64    // the campaign that won it
	handed   bool      // a Leadership was returned to Campaign
	rec      Record    // the record last written
	etag     string    // its ETag
	sum      [32]byte  // the SHA-256 of its bytes
	first    time.Time // when the leadership's first write was sent
	sentAt   time.Time // when the first attempt of the last successful write was sent
	deadline time.Time // the lease's end: leaseEnd(sentAt)
	ending   error     // the cause, once the leadership has ended
	unsure   []byte    // a renewal cut off with its outcome unknown
	handAt   time.Time // a recreated lockfile: handed out only from then on (zero: at once)
}

// newLeader starts the leadership won for campaign campID by a takeover
// that wrote data (rec) and got etag; its first attempt was sent at sent.
func newLeader(p params, campID uint64, rec Record, etag string, data []byte, sent time.Time) *leader {
	return &leader{campID: campID, rec: rec, etag: etag, sum: sha256.Sum256(data), first: sent, sentAt: sent,
		deadline: leaseEnd(sent, p)}
}

// leaseEnd is the end of the lease a write sent at sent gives (section
// 3.1): LeaderTimeout less the margin, from the send of the write's first
// attempt.
func leaseEnd(sent time.Time, p params) time.Time { return sent.Add(p.lt - p.margin) }

// renew sends the renewal when it is due: one If-Match PUT over the ETag
// the last write returned, every FrequentInterval from the send of that
// write, carrying the leader's held time (section 3.2). It returns when it
// must be called again.
func (l *leader) renew(sh *shared, now time.Time, emit func(effect)) time.Time {
	if sh.call.kind != opNone {
		return l.deadline
	}
	renewAt := l.sentAt.Add(sh.p.fi)
	if now.Before(renewAt) {
		return renewAt
	}
	rec := l.rec
	rec.LastUpdated = sh.nextStamp(now)
	rec.Held = now.Sub(l.first).Milliseconds()
	sh.write(opRenew, rec.encode(), l.etag, l.sum, nil, l.deadline, now, emit)
	return l.deadline
}

// renewDone takes in the result of a renewal. It returns the cause to end
// the leadership with, or nil.
func (l *leader) renewDone(sh *shared, ev evStore, data []byte, sentAt time.Time, emit func(effect)) error {
	switch {
	case ev.err == nil:
		rec, _ := ParseRecord(data)
		l.rec, l.etag, l.sum, l.unsure = rec, ev.etag, sha256.Sum256(data), nil
		l.sentAt, l.deadline = sentAt, leaseEnd(sentAt, sh.p)
		if l.ending == nil && l.handed { // a recreated lockfile's leadership may not be handed out yet
			sh.lastWrite = sentAt
			emit(doRenewed{deadline: l.deadline})
			sh.announce(Change{Leader: rec, IsLeader: true}, emit) // recorded for Leader(), not announced again
		}
	case l.ending != nil:
		if ev.unsure {
			l.unsure = data // the release goes over it if it landed
		}
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		emit(doLog{"renewal found another writer", []any{"term", l.rec.Term, "err", ev.err}})
		return ErrLeadershipLost
	default:
		emit(doLog{"renewal failed", []any{"term", l.rec.Term, "err", ev.err}})
		return ErrLeaseExpired
	}
	return nil
}

// ours is the follower's view of the record this leadership left in the
// lockfile, seen at now: its last acknowledged write, ETag and bytes. A
// read that finds exactly it is the same sighting, which this elector may
// take over at once (section 4, Ex-leader); any other content is a new
// sighting, waited out in full.
func (l *leader) ours(now time.Time) view {
	return view{kind: kindOurs, etag: l.etag, sum: l.sum, rec: l.rec, term: l.rec.Term, seenAt: now,
		ttl: time.Duration(l.rec.TTL) * time.Millisecond}
}
