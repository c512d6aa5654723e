// Package s3lect elects one leader among many instances using a single
// object in S3, or in any store with conditional writes, as the only
// coordination service.
//
// # Guarantees
//
//   - At most one live leadership per lockfile. A Leadership's Context is
//     live only while its holder's lease is valid by the holder's own
//     monotonic clock. A follower takes over only once the holder's lease
//     must have run out: after it has watched the lockfile stay unchanged
//     for the longer of its LeaderTimeout and the leader's (the record
//     states it), or earlier when the leader's own reported time
//     (the record's held field, stretched by an eighth) proves the lease
//     over, both measured on the follower's monotonic clock. Wall clocks
//     may disagree by any amount without breaking this; clock rates need
//     only agree to within 5%.
//   - Every leadership has a term, a fencing token higher than every term
//     before it on the lockfile that never repeats, also across records
//     written without terms (the original s3lect) and a deleted lockfile: a second object
//     next to the lockfile, LockfilePath + ".term", keeps the highest
//     term used. Terms can repeat only if that object is deleted too (or
//     lost by the store) while the lockfile's term is also lost, or if
//     someone forges a term. A resource that remembers the highest term
//     it has accepted and rejects lower ones is protected even from a
//     leader that is paused after its context was cancelled.
//   - A leader that cannot renew stops by itself: its Context is cancelled
//     no later than LeaderTimeout minus a tenth after the start of its last
//     successful write, by its own clock: monotonic, and on Linux also
//     counting a suspend of the host (CLOCK_BOOTTIME), checked at least
//     every LeaderTimeout/20. A VM paused by its hypervisor, or a suspend
//     on other systems, is caught only by the wall clock once it is set
//     right; Leadership.Context says exactly what Err then catches.
//
// The protocol, its timing rules and the argument for its safety are in
// docs/protocol.md in the repository.
//
// # Non-guarantees
//
//   - Cancellation is a signal. Work that ignores its context, or a process
//     paused by the operating system, can outlive the lease; only fencing
//     with Term protects against that.
//   - Liveness needs the store: while it is unreachable nobody can become
//     leader, and a leader that cannot reach it steps down.
//   - The store must honour conditional writes (If-None-Match and If-Match
//     on S3). A store that ignores them breaks every guarantee above.
//
// # Use
//
//	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: "leader/scheduler.json", ServerID: host})
//	...
//	defer e.Close()
//	lead, err := e.Campaign(ctx)
//	if err != nil { ... }
//	run(lead.Context()) // returns when leadership ends
package s3lect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
)

// Defaults for the zero values of ElectorConfig's intervals, exported
// for programs that scale them.
const (
	DefaultFrequentInterval   = 5 * time.Second
	DefaultInfrequentInterval = 30 * time.Second
	DefaultLeaderTimeout      = 15 * time.Second
)

// Defaults of the peer settings, stated in their fields' docs. The path is
// the original s3lect's, which its followers ask.
const (
	defaultPeerTimeout    = 3 * time.Second
	defaultPeerHealthPath = "/health/leadership"
)

var (
	// ErrLeadershipLost is the cause of a Leadership's Context when another
	// holder wrote the lockfile.
	ErrLeadershipLost = errors.New("s3lect: leadership lost to another holder")

	// ErrAskedToStepDown is the cause of a Leadership's Context, in storage
	// mode, when an operator's step-down request (s3lect release) ended it:
	// at the leader's next renewal, or at the announced moment of an
	// announced request (docs/moves.md, 11.5). It matches
	// ErrLeadershipLost too. Stop the work, then Resign or Transfer: the
	// release is written then.
	ErrAskedToStepDown = fmt.Errorf("%w: asked to step down by an operator (s3lect release)", ErrLeadershipLost)

	// ErrLeaseExpired is the cause of a Leadership's Context when renewals
	// failed (every retry, or until the lease deadline passed).
	ErrLeaseExpired = errors.New("s3lect: lease expired before it could be renewed")

	// ErrResigned is the cause of a Leadership's Context after Resign or
	// Close.
	ErrResigned = errors.New("s3lect: leadership resigned")

	// ErrClosed is returned by Campaign after Close.
	ErrClosed = errors.New("s3lect: elector closed")

	// ErrCampaigning is returned by Campaign while another Campaign call on
	// the same Elector is waiting or its Leadership is still live.
	ErrCampaigning = errors.New("s3lect: elector is already campaigning or leading")

	// ErrNeverAnswered wraps Change.Err while the store has not answered
	// one call of this elector since it started (Stats.NeverAnswered): almost
	// always a misconfiguration (the endpoint, DNS, a firewall) rather than
	// an outage. The elector logs it at WARN at the first failure, and
	// keeps trying: Campaign still waits.
	ErrNeverAnswered = errors.New("s3lect: the store has not answered since this elector started; check its endpoint, DNS and network")
)

// Change is what Changes delivers: the leader this elector knows of, and
// whether it is this elector. Leader.LeaderID is "" when there is no live
// leader (the lease is vacant, expired or unreadable).
type Change struct {
	Leader   Record
	IsLeader bool

	// Err is the store failure this elector saw at its last read of the
	// lockfile, nil once reads succeed again. A watcher uses it to tell
	// "no leader" from "cannot read the store".
	Err error
}

// Elector campaigns for, holds and watches the leadership of one lockfile.
// Its methods are safe for concurrent use. Many electors can share one
// Store and one process. Once started (by Campaign, Changes or Observe), an
// elector runs two goroutines: its run loop, which alone owns the election
// state, and a storage goroutine: the reader (a follower's reads and
// takeovers) while it follows, the renewer (a leader's renewals and
// release) while it leads. In PeerMode a third, the peer poller.
type Elector struct {
	cfg     ElectorConfig
	owned   store.Store // the store New built from Bucket, released by Close
	key     string
	termKey string // the term high-water mark: key + termSuffix
	log     *slog.Logger
	margin  time.Duration // the leader's safety margin: LeaderTimeout / 10
	// newLease draws a campaign's lease value (lease.NewID); a test in
	// virtual time replaces it, before its first Campaign, with a seeded
	// draw so that what hashes the lease (half slots) repeats exactly.
	newLease func() string

	ctx    context.Context // the storage goroutines' lifetime; cancelled by Close after the loop ends
	cancel context.CancelFunc
	// g runs the run loop, the storage goroutines and the peer poller;
	// Close returns the first error one of them returns. Only the run loop
	// has one to give: the storage goroutines and the poller hand every
	// failure of theirs to the loop as a result, for the election to
	// decide on.
	g errgroup.Group

	// Channels of the run loop. Nobody closes them; senders select on
	// loopDone or their own context.
	reqs        chan request     // API calls -> loop
	results     chan evStore     // storage goroutines -> loop
	leadDone    chan *Leadership // a leadership's context ended -> loop
	peerTargets chan peerTarget  // capacity 1: loop -> poller, latest target wins
	peerReports chan peerReport  // poller -> loop
	loopDone    chan struct{}    // closed when the run loop has returned

	peerClient *http.Client     // followers' peer requests; nil unless PeerMode
	ownedPeer  bool             // peerClient was built here; Close releases it
	peerCert   *tls.Certificate // the certificate a pinned elector serves (PeerPinned); nil otherwise
	pin        string           // its pin, carried by this elector's records

	snap      atomic.Pointer[snapshot] // what Leader and the peer handler read
	stats     recorder                 // counters for Stats and the health check
	campaigns atomic.Uint64            // numbers Campaign calls

	clock lease.Clock // the local and wall clocks; tests run them fast or slow
	calls lease.Calls // the store calls, under the retry policy, on clock

	life      sync.Mutex // guards started and closed, nothing else
	started   bool
	closed    bool
	closeDone chan struct{}
}

// snapshot is an immutable picture of the election, published by the run
// loop whenever the core shows a new status, and before a Campaign, Resign
// or Close that the status concerns returns. Leader, Stats, the health
// check and the peer handler read it and nothing else of the election.
type snapshot struct {
	status
	lead *Leadership   // the live or ending leadership handed out, if any
	next chan struct{} // closed when a newer snapshot is published
}

// New validates cfg and returns an Elector. It starts nothing: background
// work begins with the first call to Campaign, Changes or Observe.
func New(cfg ElectorConfig) (*Elector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var (
		peerCert *tls.Certificate
		pin      string
	)
	if cfg.PeerPinned {
		var err error
		if peerCert, pin, err = peerIdentity(cfg); err != nil {
			return nil, err
		}
	}
	var owned store.Store
	if cfg.Store == nil {
		st, err := defaultstore.Get()(context.Background(), cfg.Bucket, cfg.S3PathStyle)
		if err != nil {
			return nil, fmt.Errorf("s3lect: S3 store for Bucket %q: %w", cfg.Bucket, err)
		}
		cfg.Store = st
		owned = st
	}
	ctx, cancel := context.WithCancel(context.Background())
	peerClient, ownedPeer := cfg.PeerClient, false
	if cfg.PeerMode && peerClient == nil {
		peerClient, ownedPeer = newPeerClient(cfg), true
	}
	e := &Elector{
		cfg:         cfg,
		owned:       owned,
		key:         cfg.LockfilePath,
		termKey:     cfg.LockfilePath + termSuffix,
		log:         cfg.Logger.With("lockfile", cfg.LockfilePath, "server", cfg.ServerID),
		margin:      lease.Margin(cfg.LeaderTimeout),
		newLease:    lease.NewID,
		ctx:         ctx,
		cancel:      cancel,
		reqs:        make(chan request),
		results:     make(chan evStore),
		leadDone:    make(chan *Leadership),
		peerTargets: make(chan peerTarget, 1),
		peerReports: make(chan peerReport),
		loopDone:    make(chan struct{}),
		peerClient:  peerClient,
		ownedPeer:   ownedPeer,
		peerCert:    peerCert,
		pin:         pin,
		clock:       lease.NewClock(),
		closeDone:   make(chan struct{}),
	}
	e.calls = lease.Calls{Store: cfg.Store, Timeout: cfg.FrequentInterval, Clock: &e.clock, Count: e.stats.storeCall, Log: e.log}
	if mutMarginZero {
		e.margin = 0
	}
	e.clock.MonoOnly = mutMonoClock
	e.snap.Store(&snapshot{next: make(chan struct{})})
	return e, nil
}

// Store returns the store this elector elects on: ElectorConfig.Store, or
// the S3 store New built from Bucket. A leader fences its objects on it
// (fence.New(e.Store(), lead.Term())) without building a second client
// from the same configuration. Close closes the idle connections of a
// store built from Bucket; later calls open new ones.
func (e *Elector) Store() store.Store { return e.cfg.Store }

// params returns the fixed inputs of the election's decisions.
func (e *Elector) params() params {
	return params{id: e.cfg.ServerID, addr: e.cfg.ServerAddr, fi: e.cfg.FrequentInterval,
		ii: e.cfg.InfrequentInterval, lt: e.cfg.LeaderTimeout, margin: e.margin, peerMode: e.cfg.PeerMode,
		slot: crc32.ChecksumIEEE([]byte(e.cfg.ServerID)), pin: e.pin}
}

// start launches the goroutines, once, unless Close has begun. It reports
// whether the run loop is (or was) running.
func (e *Elector) start() bool {
	e.life.Lock()
	defer e.life.Unlock()
	if e.started {
		return true
	}
	if e.closed {
		return false
	}
	e.started = true
	e.g.Go(func() error {
		defer close(e.loopDone)
		return e.run(e.ctx)
	})
	if e.cfg.PeerMode {
		e.g.Go(func() error { return e.pollPeers(e.ctx) })
	}
	return true
}

// publishSnapshot publishes st and lead, if they differ from the last.
func (e *Elector) publishSnapshot(st status, lead *Leadership) {
	old := e.snap.Load()
	if old.lead == lead && old.status.same(st) {
		return
	}
	n := &snapshot{status: st, lead: lead, next: make(chan struct{})}
	e.snap.Store(n)
	close(old.next)
}

// same reports whether s and t show the same.
func (s status) same(t status) bool {
	return s.known == t.known && s.mode == t.mode && s.holding == t.holding && s.rec == t.rec && s.etag == t.etag &&
		s.lastWrite.Equal(t.lastWrite) && s.lastRead.Equal(t.lastRead) && s.foreign == t.foreign && s.until.Equal(t.until) &&
		s.change.IsLeader == t.change.IsLeader && s.change.Leader == t.change.Leader && sameErr(s.change.Err, t.change.Err)
}

// Changes returns a new channel that receives this elector's view of the
// leadership: first the current state, once known, then every change of
// leader (ID or term), of whether this elector leads, or of the store
// error it sees. The elector never waits for a reader: a slow reader
// finds only the latest state, having missed the ones in between. The
// channel is closed by Close. Calling Changes starts the background
// reader, so an elector that never campaigns can watch a group. Use
// Observe for a channel that can be given up before Close.
func (e *Elector) Changes() <-chan Change { return e.Observe(context.Background()) }

// Observe is Changes for a channel that is closed, and forgotten by the
// elector, when ctx ends or at Close, whichever comes first.
func (e *Elector) Observe(ctx context.Context) <-chan Change {
	sub := &subscription{ch: make(chan Change, 1)}
	if ctx.Err() != nil || !e.ask(ctx, subscribeReq{sub}) {
		close(sub.ch)
		return sub.ch
	}
	if ctx.Done() != nil {
		context.AfterFunc(ctx, func() {
			// Hand the channel back to the loop, which closes it; after
			// Close the loop has closed it already.
			select {
			case e.reqs <- unsubscribeReq{sub}:
			case <-e.loopDone:
			}
		})
	}
	return sub.ch
}

// Leader returns the leader this elector knows of, and false when it knows
// of none (before the first read, or when the lease is vacant, expired or
// unreadable). What it reports, exactly:
//
//   - while this elector leads: itself, while its lease is live by its own
//     clock (Leadership.Context);
//   - while leadership is changing (frequent reads), or in PeerMode while
//     the leader's answers carry ETags: the leader of the last record read
//     or heard, until this elector would be allowed to take that record
//     over (docs/protocol.md, 3.1 and 3.2);
//   - for a follower that reads the store every InfrequentInterval (a
//     leader seen renewing steadily): the leader of its last read, until
//     its next read is overdue (InfrequentInterval plus that read's
//     retries) or that read says otherwise. Its lease may have ended since
//     the last read: a crashed leader is reported until the next read.
func (e *Elector) Leader() (Record, bool) {
	s := e.snap.Load()
	if s.change.IsLeader && !s.leading() {
		return Record{}, false // this elector's leadership ended; the run loop has not taken it in yet
	}
	if !s.change.IsLeader && !s.until.IsZero() && !e.clock.Now().Before(s.until) {
		return Record{}, false // what this elector knew has run out, whether or not the run loop has stepped since
	}
	return s.change.Leader, s.known && s.change.Leader.LeaderID != ""
}

// NoteTerm records term as one this elector has seen, as if a read of the
// lockfile had shown it: its next takeover writes a term above it. A
// resource fenced by this election's terms hands in a term it has seen
// above the ones the election's objects show (they were put back to an
// earlier version, docs/protocol.md 1.1), so that the next leadership
// starts above it at once rather than one term per election. It never
// lowers a term, changes no leadership in force, and returns once the run
// loop has taken it in (at once after Close, doing nothing). A term of
// 2^64-1 makes every later Campaign fail: the term could not be raised.
func (e *Elector) NoteTerm(term uint64) { e.ask(context.Background(), noteTermReq{term}) }

// leading reports whether the snapshot shows this elector leading with a
// live lease: a leadership whose context has ended, or whose lease ran out
// on the clock, is not shown as leading even before the run loop hears.
func (s *snapshot) leading() bool {
	return s.change.IsLeader && (s.lead == nil || s.lead.live())
}

// Close resigns a held leadership (releasing the lockfile), makes a waiting
// Campaign return ErrClosed, stops every goroutine and waits for them, and
// closes every Changes and Observe channel. It returns nil, or why the
// release it wrote could not be written (the lockfile then stays held
// until followers take over after LeaderTimeout). It is safe to call more
// than once; later calls wait for the first to finish and return nil.
func (e *Elector) Close() error {
	e.life.Lock()
	if e.closed {
		e.life.Unlock()
		<-e.closeDone
		return nil
	}
	e.closed = true
	started := e.started
	e.life.Unlock()

	var err error
	if started {
		// The loop ends a leadership (writing its release), answers a
		// waiting Campaign once a takeover in flight has decided, closes
		// every subscription and returns.
		select {
		case e.reqs <- closeReq{}:
		case <-e.loopDone:
		}
		<-e.loopDone
		e.cancel()
		err = e.g.Wait()
	}
	e.cancel()
	if c, ok := e.owned.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	if e.ownedPeer {
		e.peerClient.CloseIdleConnections()
	}
	close(e.closeDone)
	return err
}

// errCloseResign is the cause of a leadership ended by Close.
var errCloseResign = fmt.Errorf("%w: %w", ErrResigned, ErrClosed)

// StepDownError is the cause of a Leadership's Context that an operator's
// step-down request ended (it matches ErrAskedToStepDown and
// ErrLeadershipLost): To is the member the request hands over to, "" for
// any member. The holder learns it without another read of the lockfile.
type StepDownError struct{ To string }

func (e *StepDownError) Error() string {
	if e.To == "" {
		return ErrAskedToStepDown.Error()
	}
	return ErrAskedToStepDown.Error() + ", to hand over to " + e.To
}

// Unwrap returns ErrAskedToStepDown.
func (e *StepDownError) Unwrap() error { return ErrAskedToStepDown }
