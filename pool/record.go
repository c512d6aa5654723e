package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
)

// formatVersion marks the pool's records, so that a pool never mistakes an
// elector's lockfile (or anything else) for one of its own.
const formatVersion = 1

// sessionRecord is the content of a worker's session object. The worker
// writes it every FrequentInterval while its session lives; every write
// has new bytes (seq rises).
type sessionRecord struct {
	Pool    int    `json:"s3lectPoolSession"` // formatVersion
	Worker  string `json:"worker"`
	Session string `json:"session"` // 16 hex digits, new for every session
	Seq     uint64 `json:"seq"`     // 0 on the session's first write, one more on each
	// Held is the worker's monotonic milliseconds from the send of the
	// session's first write to the send of this one.
	Held int64 `json:"held"`
	// TTL is the worker's LeaderTimeout in milliseconds, rounded up: the
	// lease the others must wait out at least.
	TTL         int64     `json:"ttl"`
	LastUpdated time.Time `json:"lastUpdated"` // wall clock, for people only
	Released    bool      `json:"released,omitempty"`
	// Addr is where the worker serves PeerHandler (Config.ServerAddr), in
	// peer mode only.
	Addr string `json:"addr,omitempty"`
	// Shards lists the shards the session owns, with their terms. It is a
	// hint for the other workers (who owns what, how many); the shard
	// records decide.
	Shards map[string]uint64 `json:"shards,omitempty"`
	// Claiming lists the shards the session is about to claim, with the
	// terms it will write: written before the claims, so that a worker
	// that checks the sessions before claiming the same shard sees it.
	Claiming map[string]uint64 `json:"claiming,omitempty"`
	// Ended lists, for shards whose leadership by this worker ended
	// without a release (the lease ran out, the process restarted), the
	// highest term it knows, until it sees that term superseded. If the
	// shard's record is deleted, the term lives on here, and a claim
	// writes a term above it.
	Ended map[string]uint64 `json:"ended,omitempty"`
}

// shardRecord is the content of a shard's ownership record. It is
// written only when ownership changes: a claim (term + 1) or a release
// (same term, no owner).
type shardRecord struct {
	Pool        int       `json:"s3lectPoolShard"` // formatVersion
	Shard       string    `json:"shard"`
	Owner       string    `json:"owner"`   // the owner's worker ID; "" when released
	Session     string    `json:"session"` // the owner's session; on a release, the releasing one
	Term        uint64    `json:"term"`
	TTL         int64     `json:"ttl"`         // the owner's LeaderTimeout in milliseconds, rounded up
	LastUpdated time.Time `json:"lastUpdated"` // wall clock, for people only
}

// The lease rules the pool shares with the elector, in internal/lease,
// under the names the pool's loop calls them by: a LeaderTimeout as a
// record's ttl states it (milliseconds, rounded up); how long a record
// stating ttl must be seen unchanged (the longer of this worker's
// LeaderTimeout and the writer's); an object as a read found it (ETag and
// SHA-256); a session's random identity.
var (
	ttlMillis    = lease.TTLMillis
	wait         = lease.Wait
	sight        = lease.Sight
	newSessionID = lease.NewID
)

type sighting = lease.Sighting

// tombstoneRecord is what a worker writes into another worker's session
// object that it found absent (see bury): unique bytes in place of an
// absence. It is not a session record.
type tombstoneRecord struct {
	Pool        int       `json:"s3lectPoolGone"` // formatVersion
	Worker      string    `json:"worker"`         // whose session object it is
	By          string    `json:"by"`             // the worker that wrote it
	Nonce       string    `json:"nonce"`          // makes every tombstone's bytes unique
	LastUpdated time.Time `json:"lastUpdated"`    // wall clock, for people only
}

// membersRecord lists the workers of a pool, so that each can find the
// others' session objects.
type membersRecord struct {
	Pool    int      `json:"s3lectPoolMembers"` // formatVersion
	Workers []string `json:"workers"`
	// TTL is, for each worker, the longest LeaderTimeout it has run with,
	// in milliseconds, rounded up: a worker that never read a member's
	// records still waits out its lease (a rolling change of
	// configuration). A worker claims nothing before the list states its
	// own.
	TTL map[string]int64 `json:"ttl,omitempty"`
	// Left names, for each member that stopped with its session released
	// but a term of its own not yet released (so it stays a member: the
	// term lives on in its object), that released session. Written by the
	// member as it stops, it changes the list, which every worker reads
	// each interval: the others look, and find the session released,
	// instead of waiting for its object to stand still for a lease.
	Left map[string]string `json:"left,omitempty"`
	// Sessions names, for each member, the session it last wrote the list
	// with. A worker writes the list when a session of its opens, before
	// it claims anything in it (membersRead), so the list changes whenever
	// a session opens: a prune decided on a read of an earlier session's
	// object, written over the list as read before that read, is refused
	// (docs/pool-protocol.md, "The member list").
	Sessions map[string]string `json:"sessions,omitempty"`
	// Write is drawn at random for every write of the list (stampMembers),
	// so that no two writes have the same bytes: on a store whose ETags
	// hash the content, a list put back to earlier bytes (a paused
	// worker's join, a prune's undoing) would otherwise bring back an
	// earlier ETag, and a write decided on that earlier list, If-Match,
	// would land over it.
	Write string `json:"write,omitempty"`
}

// stampMembers returns the member list data with a new random Write: the
// executor's, since the core draws no random numbers. Data that is not
// a member list is returned as it is.
func stampMembers(data []byte) []byte {
	m, err := parseMembers(data)
	if err != nil || mutNoMemberStamp {
		return data
	}
	m.Write = lease.NewID()
	return encode(m)
}

var errNotPool = errors.New("not a pool record")

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("pool: encode: " + err.Error()) // the records have nothing json cannot encode
	}
	return b
}

// decode parses data into v, which must carry the pool's mark (ok reports
// the field named mark was formatVersion).
func decode(data []byte, v any, mark func() int) error {
	if len(data) > store.MaxObjectSize {
		return fmt.Errorf("%w: %d bytes", errNotPool, len(data))
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), v); err != nil {
		return fmt.Errorf("%w: %v", errNotPool, err)
	}
	if mark() != formatVersion {
		return fmt.Errorf("%w: no pool mark of version %d", errNotPool, formatVersion)
	}
	return nil
}

func parseSession(data []byte) (sessionRecord, error) {
	var r sessionRecord
	err := decode(data, &r, func() int { return r.Pool })
	switch {
	case err != nil:
	case r.Worker == "" || r.Session == "":
		err = fmt.Errorf("%w: session record without worker or session", errNotPool)
	case r.TTL < 0:
		err = fmt.Errorf("%w: negative ttl", errNotPool)
	}
	return r, err
}

func parseShard(data []byte) (shardRecord, error) {
	var r shardRecord
	err := decode(data, &r, func() int { return r.Pool })
	switch {
	case err != nil:
	case r.Owner != "" && r.Session == "":
		err = fmt.Errorf("%w: shard record with an owner and no session", errNotPool)
	case r.TTL < 0:
		err = fmt.Errorf("%w: negative ttl", errNotPool)
	}
	return r, err
}

func parseMembers(data []byte) (membersRecord, error) {
	var r membersRecord
	err := decode(data, &r, func() int { return r.Pool })
	return r, err
}
