package s3lect

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
)

// Stats is a snapshot of one elector's state and counters, for dashboards
// and health checks. Counters start at zero when the elector is created and
// only go up. A field is never changed in meaning; before v1.0.0 one may be
// removed, and CHANGELOG.md says so (Leading went: Mode says "leader").
type Stats struct {
	// Lockfile and ServerID are the elector's LockfilePath and ServerID.
	Lockfile string
	ServerID string

	// Term is the term of the leader this elector knows of (its own while
	// it leads), 0 when it knows of none.
	Term uint64

	// Mode is how the elector works now: "leader" exactly while it holds
	// a live leadership (by its own clock, as its Changes announce it), or
	// how it watches the lockfile as a follower:
	// "frequent" (leadership changing or unknown), "infrequent" (a steady
	// leader) or "peer" (asking the leader over HTTPS). "" before the
	// elector has started.
	Mode string

	// Won counts the leaderships this elector has won.
	Won uint64

	// Ended counts the leaderships that have ended, by cause: "lost"
	// (another holder wrote the lockfile), "expired" (renewals failed),
	// "resigned" (Resign or Close), "canceled" (the context given to
	// Campaign ended) and "other".
	Ended map[string]uint64

	// StoreRequests counts the elector's store calls, one per attempt
	// (retries count again), by operation ("get", "put"), then by result:
	// "ok", "not_found", "precondition_failed", "timeout" (the attempt's
	// deadline passed), "canceled" (the call was cut short on purpose),
	// "permanent" (a failure the store marks as not worth retrying) and
	// "error": StoreRequests["put"]["ok"] counts the writes the store
	// accepted. Every call the elector makes to its Store is counted, so
	// the sum over results is what the store billed this elector.
	StoreRequests map[string]map[string]uint64

	// PeerRequests counts a follower's questions to the leader in
	// PeerMode (each with its retries), by result: "ok", "timeout",
	// "canceled" and "error".
	PeerRequests map[string]uint64

	// LastRenewal is when this elector's last successful write as a leader
	// was sent (a takeover or a renewal); zero if it never led.
	LastRenewal time.Time

	// LastRead is when this elector last read the lockfile successfully;
	// zero if it never did.
	LastRead time.Time

	// ForeignRecords counts the records this elector has read (each new
	// one once) that lack the fields of protocol version 2 (term and
	// lease): records of the original s3lect. A group where it rises is a
	// mixed group, safe only as docs/protocol.md, section 1.2, says; the
	// elector logs the first one.
	ForeignRecords uint64

	// NeverAnswered is true while every store call of this elector since
	// it started has failed without an answer from the store (a timeout, a
	// refused connection, an unresolved name): almost always a
	// misconfiguration of the endpoint, DNS or network. Change.Err wraps
	// ErrNeverAnswered meanwhile. It turns false at the store's first
	// answer and stays false.
	NeverAnswered bool
}

// Stats returns a snapshot of the elector's state and counters. It does not
// wait for the elector's goroutines and is cheap enough to call on every
// scrape.
func (e *Elector) Stats() Stats {
	s := e.stats.counters()
	s.Lockfile, s.ServerID = e.key, e.cfg.ServerID
	snap := e.snap.Load()
	leading := snap.leading()
	if leading || !snap.change.IsLeader {
		s.Term = snap.change.Leader.Term
	}
	s.Mode, s.LastRenewal, s.LastRead, s.ForeignRecords = snap.mode, snap.lastWrite, snap.lastRead, snap.foreign
	s.NeverAnswered = snap.change.Err != nil && errors.Is(snap.change.Err, ErrNeverAnswered)
	switch {
	case leading:
		s.Mode = "leader"
	case snap.change.IsLeader || s.Mode == "leader":
		s.Mode = frequent.String() // ended; the run loop has not taken it in yet
	}
	return s
}

// recorder keeps an elector's counters; what the election shows (mode,
// leading, the last write and read) is in the run loop's snapshot. The
// engine calls its methods, one line at each place where something
// happens; its zero value is ready. A mutex is enough: the calls are short
// and never block on anything else.
type recorder struct {
	mu    sync.Mutex
	nWon  uint64
	ends  map[string]uint64
	store map[string]map[string]uint64 // op -> result -> count
	peer  map[string]uint64
}

// storeCall counts one attempt of a store call; op is "get" or "put".
func (r *recorder) storeCall(op string, err error) {
	res := "ok"
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotFound):
		res = "not_found"
	case errors.Is(err, store.ErrPreconditionFailed):
		res = "precondition_failed"
	case store.IsPermanent(err):
		res = "permanent"
	default:
		res = failure(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store == nil {
		r.store = map[string]map[string]uint64{}
	}
	if r.store[op] == nil {
		r.store[op] = map[string]uint64{}
	}
	r.store[op][res]++
}

// peerCall counts one question to the leader, with its retries.
func (r *recorder) peerCall(err error) {
	res := "ok"
	if err != nil {
		res = failure(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peer == nil {
		r.peer = map[string]uint64{}
	}
	r.peer[res]++
}

// failure names a failed call's result.
func failure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

// won counts a leadership won.
func (r *recorder) won() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nWon++
}

// ended records a leadership that is over, its release written or given
// up, with the cause of its context.
func (r *recorder) ended(cause error) {
	c := "other"
	switch {
	case errors.Is(cause, ErrLeadershipLost):
		c = "lost"
	case errors.Is(cause, ErrLeaseExpired), errors.Is(cause, errSlowTakeover):
		c = "expired"
	case errors.Is(cause, ErrResigned):
		c = "resigned"
	case errors.Is(cause, context.Canceled), errors.Is(cause, context.DeadlineExceeded):
		c = "canceled"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends == nil {
		r.ends = map[string]uint64{}
	}
	r.ends[c]++
}

// counters returns the counts, in a Stats.
func (r *recorder) counters() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Won: r.nWon, Ended: map[string]uint64{}, StoreRequests: map[string]map[string]uint64{}, PeerRequests: map[string]uint64{}}
	for k, v := range r.ends {
		s.Ended[k] = v
	}
	for op, byResult := range r.store {
		s.StoreRequests[op] = maps.Clone(byResult)
	}
	for k, v := range r.peer {
		s.PeerRequests[k] = v
	}
	return s
}
