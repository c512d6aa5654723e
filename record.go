package s3lect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The lockfile's wire format (docs/protocol.md, section 1): the Record,
// its encoding and decoding, wire-compatible with the original s3lect.
// lease.go holds what the election makes of a record.

// Record is the content of the lockfile, and what the leader's peer
// endpoint serves. Its JSON form is compatible with the original s3lect.
type Record struct {
	LeaderID    string    `json:"leaderID"`
	LeaderAddr  string    `json:"leaderAddr"`
	LastUpdated time.Time `json:"lastUpdated"` // the writer's wall clock; zero means released
	Term        uint64    `json:"term,omitempty"`

	// Lease is a random value drawn once per leadership and kept on all
	// its writes: it tells leaderships apart even when two processes share
	// a ServerID, and makes every write's bytes unique.
	Lease string `json:"lease,omitempty"`

	// Held is the leader's monotonic time, in milliseconds, from the send
	// of its leadership's first write (its takeover's write of the term
	// object) to the send of this one. Followers use it to bound when a
	// silent leader's lease has run out.
	Held int64 `json:"held,omitempty"`

	// TTL is the writer's LeaderTimeout in milliseconds: how long a
	// follower waits, at least, before it takes this record over
	// (docs/protocol.md, 3.1). Writers before protocol version 3 leave it
	// out; such a record is waited out with the longest lease the reader
	// can assume: the longest of its own LeaderTimeout, 15 s and the
	// longest ttl it has seen on the lockfile (ElectorConfig.LeaderTimeout).
	TTL int64 `json:"ttl,omitempty"`

	// To, on a released record (lastUpdated zero), names the only member
	// that may take the lockfile over at once (Leadership.Transfer,
	// s3lect release -to): every other member waits the transfer window
	// first (docs/protocol.md, section 11). On a step-down request, it is
	// the member the operator asks the leader to hand over to.
	To string `json:"to,omitempty"`

	// StepDown, on a held record, is an operator's request that the
	// leader step down (s3lect release): a random value, written over the
	// leader's own record with If-Match, every other field kept. The
	// leader's next renewal is refused; it then finds its own leadership
	// with this request, and once its holder is done (Resign, Transfer,
	// Close or a new Campaign) releases the lockfile (docs/protocol.md,
	// section 11). The original s3lect ignores both fields.
	StepDown string `json:"stepDown,omitempty"`

	// ReleaseAt, on a held record, announces the leader's release
	// (Leadership.Announce): the leader's held time, in milliseconds (the
	// clock of Held), at which it means to stop its work and release the
	// lockfile. Followers read at that moment, and often for a while
	// after it, so that the release is taken over within a fraction of a
	// second; it never lets anyone take over sooner (docs/moves.md,
	// section 11.4). With it, To names the member the release is meant
	// for: only that member then reads early. The original s3lect
	// ignores it.
	ReleaseAt int64 `json:"releaseAt,omitempty"`

	// PeerPin, in pinned peer mode (ElectorConfig.PeerPinned), is the pin
	// of the leader's peer certificate ("sha256:" and the hex SHA-256 of
	// its public key, PeerPin): followers accept the leader's peer
	// endpoint only if it presents a certificate with that key
	// (docs/protocol.md, section 5). The original s3lect ignores it.
	PeerPin string `json:"peerPin,omitempty"`
}

// errInvalidRecord wraps every reason a lockfile's content is not a valid
// record. Only ParseRecord returns it, and every error ParseRecord
// returns wraps it, so callers need no sentinel: an error from
// ParseRecord is the answer.
var errInvalidRecord = errors.New("s3lect: invalid lockfile record")

// wireRecord is Record as it is decoded: pointers tell a missing field from
// a zero one, and ETag carries the peer endpoint's extension.
type wireRecord struct {
	LeaderID    *string    `json:"leaderID"`
	LeaderAddr  string     `json:"leaderAddr"`
	LastUpdated *time.Time `json:"lastUpdated"`
	Term        uint64     `json:"term"`
	Lease       string     `json:"lease"`
	Held        int64      `json:"held"`
	TTL         int64      `json:"ttl"`
	To          string     `json:"to"`
	StepDown    string     `json:"stepDown"`
	ReleaseAt   int64      `json:"releaseAt"`
	PeerPin     string     `json:"peerPin"`
	ETag        string     `json:"etag,omitempty"`
}

// record returns the decoded Record.
func (w wireRecord) record() Record {
	return Record{LeaderID: *w.LeaderID, LeaderAddr: w.LeaderAddr, LastUpdated: *w.LastUpdated,
		Term: w.Term, Lease: w.Lease, Held: w.Held, TTL: w.TTL, To: w.To, StepDown: w.StepDown, ReleaseAt: w.ReleaseAt, PeerPin: w.PeerPin}
}

// maxLease bounds the lease field; ours are 16 hex digits. It bounds
// stepDown too.
const maxLease = 64

// maxServerID bounds the to field, a ServerID.
const maxServerID = 1024

// encode returns the record's JSON form.
func (r Record) encode() []byte {
	b, err := json.Marshal(r)
	if err != nil { // a Record has no field json cannot encode
		panic("s3lect: encode record: " + err.Error())
	}
	return b
}

// ParseRecord decodes a lockfile. It accepts the original s3lect's records
// (no term: term 0) and ignores unknown fields. It rejects content larger
// than store.MaxObjectSize, anything but one JSON object, fields of the
// wrong type, and a record without leaderID or lastUpdated, with an error
// that says why ("s3lect: invalid lockfile record: ..."): any error it
// returns means the content is not a valid record.
func ParseRecord(data []byte) (Record, error) {
	w, err := parseWire(data)
	if err != nil {
		return Record{}, err
	}
	return w.record(), nil
}

func parseWire(data []byte) (wireRecord, error) {
	var w wireRecord
	if len(data) > store.MaxObjectSize {
		return w, fmt.Errorf("%w: %d bytes, more than the %d allowed", errInvalidRecord, len(data), store.MaxObjectSize)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return w, fmt.Errorf("%w: not a JSON object", errInvalidRecord)
	}
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return w, fmt.Errorf("%w: %v", errInvalidRecord, err)
	}
	switch {
	case w.LeaderID == nil || *w.LeaderID == "":
		return w, fmt.Errorf("%w: leaderID is missing or empty", errInvalidRecord)
	case w.LastUpdated == nil:
		return w, fmt.Errorf("%w: lastUpdated is missing", errInvalidRecord)
	case w.Held < 0:
		return w, fmt.Errorf("%w: held is negative (%d)", errInvalidRecord, w.Held)
	case len(w.PeerPin) > maxPeerPin:
		return w, fmt.Errorf("%w: peerPin is longer than %d bytes", errInvalidRecord, maxPeerPin)
	case w.ReleaseAt < 0:
		return w, fmt.Errorf("%w: releaseAt is negative (%d)", errInvalidRecord, w.ReleaseAt)
	case w.TTL < 0:
		return w, fmt.Errorf("%w: ttl is negative (%d)", errInvalidRecord, w.TTL)
	case len(w.Lease) > maxLease:
		return w, fmt.Errorf("%w: lease is longer than %d bytes", errInvalidRecord, maxLease)
	case len(w.To) > maxServerID || len(w.StepDown) > maxLease:
		return w, fmt.Errorf("%w: to or stepDown is longer than %d bytes", errInvalidRecord, maxServerID)
	}
	return w, nil
}

// salvageTerm returns the term of an invalid record if its term field alone
// can still be read, so that a takeover of a damaged lockfile keeps terms
// rising where it can.
func salvageTerm(data []byte) uint64 {
	var t struct {
		Term uint64 `json:"term"`
	}
	if len(data) > store.MaxObjectSize || json.Unmarshal(data, &t) != nil {
		return 0
	}
	return t.Term
}
