package coord

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Ver orders the pages of the assignment: Era is the term of the
// coordinator's leadership that wrote it, N counts that coordinator's
// page writes. A worker applies a page only if its Ver is above the one
// it applied.
type Ver struct{ Era, N uint64 }

// Less reports whether v orders before w.
func (v Ver) Less(w Ver) bool { return v.Era < w.Era || v.Era == w.Era && v.N < w.N }

func maxVer(v, w Ver) Ver {
	if v.Less(w) {
		return w
	}
	return v
}

func (v Ver) MarshalJSON() ([]byte, error) { return json.Marshal([2]uint64{v.Era, v.N}) }

func (v *Ver) UnmarshalJSON(b []byte) error {
	var a [2]uint64
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	v.Era, v.N = a[0], a[1]
	return nil
}

// wireVersion marks the objects of this protocol; the old pool's records
// carry none.
const wireVersion = 2

// Session is a worker's session object, workers/<ID>.json: one per
// worker, rewritten every FrequentInterval by that worker alone, each
// write conditional on its last.
type Session struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	Session string `json:"session"` // random per session; "" in a coordinator's fence
	Seq     uint64 `json:"seq"`     // rises with every write of the session
	TTL     int64  `json:"ttl"`     // the writer's LeaderTimeout, ms, rounded up
	Applied Ver    `json:"applied"` // the page applied, its releases drained
	// AppliedBy is the By of the page applied: an era that finds its own
	// term here with another mark is a repeated era, and steps down.
	AppliedBy string `json:"appliedBy,omitempty"`
	// Took is the page taken, its releases maybe still draining (at or
	// above Applied; absent from the sessions of earlier versions): the
	// worker applies no page at or below it, and Leads lists what it
	// holds by it, draining shards included (4.2). TookBy is its By.
	Took    Ver               `json:"took,omitzero"`
	TookBy  string            `json:"tookBy,omitempty"`
	Leads   map[string]uint64 `json:"leads,omitempty"`
	Closed  bool              `json:"closed,omitempty"`  // the session's last write: it leads nothing, ever
	Leaving bool              `json:"leaving,omitempty"` // Run's context ended: it starts nothing more
	// Nonce is random per write (peer mode): a report that names it was
	// sent after the write was (4.8).
	Nonce string `json:"nonce,omitempty"`
}

// Page is one worker's page of the assignment, assign/<ID>.json, written
// by the coordinator alone.
type Page struct {
	V       int               `json:"v"`
	Ver     Ver               `json:"ver"`
	ID      string            `json:"id"`
	Session string            `json:"session"` // the session the shards are for
	Shards  map[string]uint64 `json:"shards,omitempty"`
	// Homes names, for a shard of this page granted away from a worker
	// that was gone, that worker: the next era learns from it where the
	// shard goes back to (4.4). Left out when the page would not fit.
	Homes map[string]string `json:"homes,omitempty"`
	// Soon asks the worker to read its page every quarter interval for a
	// lease: grants are near (an era's first pages, before its gate).
	Soon   bool  `json:"soon,omitempty"`
	MaxTTL int64 `json:"maxTTL"` // the longest lease the coordinator has seen, ms
	// By marks the coordinator that wrote the page: random, drawn once
	// per era (CoordConfig.Mark), so that an era whose term repeats (the
	// election's lockfile and term object put back) is told from the
	// first one of that term.
	By string `json:"by"`
}

// Marshal encodes a session or page; its errors cannot happen with these
// types.
func Marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ParseSession decodes a session object. A nil error needs the right
// version, an ID that matches id, and pages below era 2^32 (see
// ParsePage).
func ParseSession(data []byte, id string) (Session, error) {
	return parse(data, "session", id, func(s Session) bool {
		return s.V == wireVersion && s.ID == id && s.TTL >= 0 && s.Applied.Era < 1<<32 && s.Took.Era < 1<<32
	})
}

// ParsePage decodes a page. A page of era 2^32 or above is refused: no
// coordinator writes one (section 1), so it is garbage, to be written
// over, not a later era to step down for.
func ParsePage(data []byte, id string) (Page, error) {
	return parse(data, "page", id, func(p Page) bool { return p.V == wireVersion && p.ID == id && p.Ver.Era < 1<<32 })
}

// parse decodes the object of kind on key, or returns the zero T and an
// error if it is not JSON or ok refuses it (another version, another key).
func parse[T any](data []byte, kind, key string, ok func(T) bool) (T, error) {
	var v, zero T
	if err := json.Unmarshal(data, &v); err != nil {
		return zero, fmt.Errorf("%s %q: %w", kind, key, err)
	}
	if !ok(v) {
		return zero, fmt.Errorf("%s %q: not a version %d %s of this key", kind, key, wireVersion, kind)
	}
	return v, nil
}

// Op names an effect.
type Op int

const (
	OpTimer      Op = iota // call Tick at At (replaces the earlier timer)
	OpGetSession           // read Key's session object
	OpPutSession           // write Data to Key's session object, If-Match IfMatch, not after At; Term: the era of the page it says applied (hand it to the Elector)
	OpPutNews              // write Data to Key's news object (unconditional: any ETag)
	OpGetPage              // read Key's page
	OpPutPage              // write Data to Key's page, If-Match IfMatch (Ver: its version)
	OpList                 // list the session and news objects
	OpStart                // start Work for Shard at Term, its lease ending at At
	OpStop                 // end Shard's leadership (its Work drains); Err: ErrLeaseOver, ErrSessionLost, or nil (revoked, leaving)
	OpExtend               // move every leadership's end to At
	OpClosed               // the worker's session is closed: Run may return
	OpFail                 // stop with Err
	OpStepDown             // the coordinator stops: resign its election with Err; Term: a later era it saw (hand it to the Elector), or 0
	OpGetRoster            // read the roster of departed workers
	OpPutRoster            // write Data to the roster, If-Match IfMatch
	nOps
)

var opNames = [...]string{"timer", "get-session", "put-session", "put-news", "get-page", "put-page", "list", "start", "stop", "extend", "closed", "fail", "step-down", "get-roster", "put-roster"}

func (o Op) String() string { return opNames[o] }

// Effect is one thing the core asks its executor to do.
type Effect struct {
	Op      Op
	Key     string // a worker ID
	Data    []byte
	IfMatch string
	Ver     Ver
	Shard   string
	Term    uint64
	At      time.Time
	Err     error
}

var (
	// ErrDuplicateID is a worker whose session another process of the
	// same ID displaced twice.
	ErrDuplicateID = errors.New("duplicate worker ID")
	// ErrLeaseOver is an OpStop's cause when the session's lease ran out.
	ErrLeaseOver = errors.New("the session's lease ran out")
	// ErrSessionLost is an OpStop's cause when another write took the
	// session object.
	ErrSessionLost = errors.New("another write took the session object")
)

// Entry is one key of a listing, by worker: Session is the ETag of its
// session object, News of its news object ("" when absent).
type Entry struct{ Session, News, Nonce string }

func sortedKeys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }

func ttlMillis(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }
