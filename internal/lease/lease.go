// Package lease holds the rules that the elector (package s3lect) and the
// worker pool (package pool) share for holding and watching leases on the
// objects of a store with conditional writes (docs/protocol.md, sections 2,
// 3 and 6; docs/pool-protocol.md follows the same rules):
//
//   - the store calls, Get, Put and List, under the fixed retry schedule
//     (package retry), with a write that landed after a lost reply adopted
//     and a retry refused over a store that handed an ETag out again (calls.go);
//   - sightings: an object as a read found it, its ETag with the SHA-256
//     of its bytes;
//   - the lease arithmetic: the holder's safety margin, a LeaderTimeout
//     as a record's ttl states it, and how long a reader waits a record
//     out;
//   - the local clock, which tests run fast or slow, and the wall clock
//     that a leadership's Err cross-checks (clock.go);
//   - random IDs: leases, sessions, nonces.
//
// It holds no election state and decides nothing: the callers keep their
// own decisions, and call these for the rules they both follow.
package lease

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Sighting is one object as a read found it: its ETag together with the
// SHA-256 of its bytes, so that a store that hands one ETag out again for
// other content (a rewound store) is seen to have changed
// (docs/protocol.md, section 2). The zero Sighting is an absence.
type Sighting struct {
	ETag string   // "" when absent
	Sum  [32]byte // zero when absent
}

// Sight returns the sighting of a read that returned data and etag (an
// absence when etag is "").
func Sight(data []byte, etag string) Sighting {
	if etag == "" {
		return Sighting{}
	}
	return Sighting{ETag: etag, Sum: sha256.Sum256(data)}
}

// TTLMillis is a LeaderTimeout as a record's ttl states it: in whole
// milliseconds, rounded up so that no reader waits less than the writer's
// lease.
func TTLMillis(lt time.Duration) int64 {
	return int64((lt + time.Millisecond - 1) / time.Millisecond)
}

// Margin is the safety margin a lease holder keeps: its lease ends
// LeaderTimeout less the margin after the send of its last successful
// write (docs/protocol.md, 3.1). A tenth of LeaderTimeout keeps a holder
// whose clock runs up to 5 % slow from outliving a reader's wait on a
// clock up to 5 % fast.
func Margin(lt time.Duration) time.Duration { return lt / 10 }

// MaxTiming is the longest timing (LeaderTimeout, FrequentInterval,
// InfrequentInterval, PeerTimeout) a holder or a reader may be configured
// with: ten years. The lease arithmetic adds a few of them (and their
// eighths and halves) to a local time, and a LeaderTimeout becomes a
// record's ttl in whole milliseconds; with every timing at most ten years
// no such sum comes near time.Duration's 292 years. A longer value is
// refused by New, not wrapped: time.Duration(math.MaxInt64), Go's usual
// "no timeout", would otherwise end every lease at once.
const MaxTiming = 10 * 365 * 24 * time.Hour

// TTL returns a record's ttl (milliseconds) as a duration. A ttl beyond
// MaxTiming, which no configuration writes, counts as MaxTiming: it is
// trusted as "very long", never wrapped into a short or negative wait.
func TTL(ms int64) time.Duration {
	if ms > MaxTiming.Milliseconds() {
		return MaxTiming
	}
	return time.Duration(ms) * time.Millisecond
}

// Wait returns how long a reader whose LeaderTimeout is own must see a
// record that states ttl milliseconds unchanged before it counts the
// writer's lease as over: the longer of the two (docs/protocol.md, 3.1).
func Wait(own time.Duration, ttl int64) time.Duration {
	return max(own, TTL(ttl))
}

// NewID draws a random identity: 16 hex digits (64 bits), for a
// leadership's lease value, a pool session or a tombstone's nonce. Two
// draws never meet in practice, so a record that carries one has bytes no
// other writer produces.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
