// Package s3lect elects one leader among many instances using a single
// object in S3, or in any store with conditional writes, as the only
// coordination service.
//
// # Guarantees
//
//   - At most one live leadership per lockfile. A Leadership's Context is
//     live only while its holder's lease is valid by the holder's own
//     monotonic clock, and a follower takes over only after it has watched
//     the lockfile stay unchanged for LeaderTimeout by its own monotonic
//     clock. Wall clocks may disagree by any amount without breaking this;
//     the clocks' rates need only agree to within a tenth of LeaderTimeout
//     over one LeaderTimeout.
//   - Every leadership has a term, a fencing token that goes up by one each
//     time leadership passes to a holder (or back to the same holder after
//     it lost it) and never repeats. A resource that remembers the highest
//     term it has accepted and rejects lower ones is protected even from a
//     leader that is paused after its context was cancelled.
//   - A leader that cannot renew stops by itself: its Context is cancelled
//     no later than LeaderTimeout minus a tenth after the start of its last
//     successful write.
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
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/store"
)

// Defaults for the zero values of ElectorConfig.
const (
	DefaultFrequentInterval   = 5 * time.Second
	DefaultInfrequentInterval = 30 * time.Second
	DefaultLeaderTimeout      = 15 * time.Second
	DefaultPeerTimeout        = 3 * time.Second
	DefaultPeerHealthPath     = "/health/leadership"
)

var (
	// ErrLeadershipLost is the cause of a Leadership's Context when another
	// holder wrote the lockfile.
	ErrLeadershipLost = errors.New("s3lect: leadership lost to another holder")

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

	// ErrInvalidRecord wraps every reason a lockfile's content is not a
	// valid record.
	ErrInvalidRecord = errors.New("s3lect: invalid lockfile record")
)

// ElectorConfig configures an Elector. Zero values mean the defaults.
type ElectorConfig struct {
	// Store is the coordination store. Set Store, or set Bucket to use S3.
	Store store.Store

	// Bucket, when Store is nil, makes New build an S3 store on this
	// bucket from the standard AWS environment (credentials, AWS_REGION,
	// AWS_ENDPOINT_URL_S3 for MinIO or R2, shared config files). The S3
	// backend must be linked in: import package
	// github.com/s3lect/s3lect/store/s3store, if only as
	// import _ "github.com/s3lect/s3lect/store/s3store".
	Bucket string

	// S3PathStyle addresses the bucket as https://endpoint/bucket/key
	// instead of https://bucket.endpoint/key. MinIO and most self-hosted
	// stores need it. Used with Bucket only.
	S3PathStyle bool

	// LockfilePath is the object key of the lockfile, for example
	// "leader/my-group.json". Every instance of one election group uses the
	// same key. Required.
	LockfilePath string

	// ServerID identifies this instance; it must be unique in the group.
	// Required.
	ServerID string

	// ServerAddr is the host:port advertised to followers for peer checks.
	// Required with PeerMode.
	ServerAddr string

	// FrequentInterval is how often a leader renews and how often a
	// follower reads the lockfile while leadership is changing. It is also
	// the timeout of a single store call. Default 5s.
	FrequentInterval time.Duration

	// InfrequentInterval is how often a follower checks on a leader that
	// has been renewing steadily. Default 30s; never below
	// FrequentInterval.
	InfrequentInterval time.Duration

	// LeaderTimeout is how long a follower must see the lockfile unchanged
	// before it takes over. It must exceed two FrequentIntervals. A leader
	// steps down when LeaderTimeout minus a tenth has passed since the start
	// of its last successful write. Default 15s.
	LeaderTimeout time.Duration

	// PeerMode makes stable followers ask the leader over HTTPS instead of
	// reading the store.
	PeerMode bool

	// PeerHealthPath is the HTTP path of the leader's health endpoint.
	// Default "/health/leadership".
	PeerHealthPath string

	// PeerTimeout bounds one peer request (beyond the time a long-poll
	// request is asked to wait). Default 3s.
	PeerTimeout time.Duration

	// PeerTLS configures followers' HTTPS requests to the leader: RootCAs
	// to verify it, Certificates for mutual TLS. Nil means the system's
	// roots. Used with PeerMode, unless PeerClient is set.
	PeerTLS *tls.Config

	// PeerClient, if set, makes the followers' peer requests instead of a
	// client built from PeerTLS. It should not follow redirects.
	PeerClient *http.Client

	// PeerWait is how long a follower's peer request may wait at the
	// leader for its next write (a long-poll), so that followers hear of
	// every renewal and of a resignation as they happen. Default
	// LeaderTimeout/2. A negative PeerWait turns long-polling off:
	// followers then ask once per InfrequentInterval.
	PeerWait time.Duration

	// Logger receives the elector's events. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns cfg with every zero field set to its default.
func (cfg ElectorConfig) withDefaults() ElectorConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.FrequentInterval, DefaultFrequentInterval)
	def(&cfg.InfrequentInterval, DefaultInfrequentInterval)
	def(&cfg.LeaderTimeout, DefaultLeaderTimeout)
	def(&cfg.PeerTimeout, DefaultPeerTimeout)
	def(&cfg.PeerWait, cfg.LeaderTimeout/2)
	if cfg.PeerHealthPath == "" {
		cfg.PeerHealthPath = DefaultPeerHealthPath
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// validate checks a config that already has its defaults.
func (cfg ElectorConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("s3lect: invalid config: "+format, args...)
	}
	switch {
	case cfg.Store == nil && cfg.Bucket == "":
		return bad("Store is nil and Bucket is empty; set one of them")
	case cfg.Store != nil && cfg.Bucket != "":
		return bad("both Store and Bucket are set; set one of them")
	case cfg.Store == nil && defaultstore.Get() == nil:
		return bad("Bucket is set but the S3 backend is not linked in; import _ %q", "github.com/s3lect/s3lect/store/s3store")
	case cfg.LockfilePath == "":
		return bad("LockfilePath is empty")
	case cfg.ServerID == "":
		return bad("ServerID is empty")
	case cfg.FrequentInterval < 0:
		return bad("FrequentInterval %v is negative", cfg.FrequentInterval)
	case cfg.InfrequentInterval < 0:
		return bad("InfrequentInterval %v is negative", cfg.InfrequentInterval)
	case cfg.LeaderTimeout < 0:
		return bad("LeaderTimeout %v is negative", cfg.LeaderTimeout)
	case cfg.PeerTimeout < 0:
		return bad("PeerTimeout %v is negative", cfg.PeerTimeout)
	case cfg.PeerWait > maxPeerWait:
		return bad("PeerWait %v is above the %v a leader waits at most", cfg.PeerWait, maxPeerWait)
	case cfg.LeaderTimeout <= 2*cfg.FrequentInterval:
		return bad("LeaderTimeout %v must exceed two FrequentIntervals (2 × %v)", cfg.LeaderTimeout, cfg.FrequentInterval)
	case cfg.InfrequentInterval < cfg.FrequentInterval:
		return bad("InfrequentInterval %v is below FrequentInterval %v", cfg.InfrequentInterval, cfg.FrequentInterval)
	case cfg.PeerMode && cfg.ServerAddr == "":
		return bad("PeerMode needs ServerAddr, the host:port followers reach this instance at")
	case cfg.PeerTLS != nil && cfg.PeerClient != nil:
		return bad("both PeerTLS and PeerClient are set; put the TLS settings in PeerClient's transport")
	case !strings.HasPrefix(cfg.PeerHealthPath, "/"):
		return bad("PeerHealthPath %q must start with /", cfg.PeerHealthPath)
	}
	return nil
}

// Record is the content of the lockfile, and what the leader's peer
// endpoint serves. Its JSON form is compatible with the original s3lect.
type Record struct {
	LeaderID    string    `json:"leaderID"`
	LeaderAddr  string    `json:"leaderAddr"`
	LastUpdated time.Time `json:"lastUpdated"` // the writer's wall clock; zero means released
	Term        uint64    `json:"term,omitempty"`
}

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
// Store and one process; each costs one goroutine while it follows or
// watches, one more while it leads, and one more in peer mode.
type Elector struct {
	cfg    ElectorConfig
	owned  store.Store // the store New built from Bucket, released by Close
	key    string
	log    *slog.Logger
	margin time.Duration // the leader's safety margin: LeaderTimeout / 10

	ctx      context.Context // the elector's lifetime; cancelled last by Close
	cancel   context.CancelFunc
	loopCtx  context.Context // the run loop's reads; cancelled first by Close
	stopLoop context.CancelFunc
	g        errgroup.Group // the run loop, the peer poller and the live Leadership's heartbeat

	peerClient  *http.Client    // followers' peer requests; nil unless PeerMode
	ownedPeer   bool            // peerClient was built here; Close releases it
	peerTargets chan peerTarget // capacity 1: run loop -> poller, latest target wins
	peerReports chan peerReport // poller -> run loop

	closing  chan struct{} // closed when Close starts
	loopDone chan struct{} // closed when the run loop returns
	wake     chan struct{} // capacity 1: nudges the run loop to look at its inputs

	mu        sync.Mutex
	started   bool // the run loop was launched
	closed    bool
	camp      *campaign   // the waiting Campaign call, if any
	lead      *Leadership // the live or ending Leadership, if any
	handoff   *view       // what a finished Leadership left in the store, for the run loop
	subs      []chan Change
	current   Change // last state published
	known     bool   // current reflects at least one read or write
	stamp     time.Time
	maxTerm   uint64 // highest term seen or written
	closeDone chan struct{}
}

// New validates cfg and returns an Elector. It starts nothing: background
// work begins with the first call to Campaign or Changes.
func New(cfg ElectorConfig) (*Elector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
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
	loopCtx, stopLoop := context.WithCancel(ctx)
	peerClient, ownedPeer := cfg.PeerClient, false
	if cfg.PeerMode && peerClient == nil {
		peerClient, ownedPeer = newPeerClient(cfg), true
	}
	return &Elector{
		peerClient:  peerClient,
		ownedPeer:   ownedPeer,
		peerTargets: make(chan peerTarget, 1),
		peerReports: make(chan peerReport),
		loopCtx:     loopCtx,
		stopLoop:    stopLoop,
		cfg:         cfg,
		owned:       owned,
		key:         cfg.LockfilePath,
		log:         cfg.Logger.With("lockfile", cfg.LockfilePath, "server", cfg.ServerID),
		margin:      cfg.LeaderTimeout / 10,
		ctx:         ctx,
		cancel:      cancel,
		closing:     make(chan struct{}),
		loopDone:    make(chan struct{}),
		wake:        make(chan struct{}, 1),
		closeDone:   make(chan struct{}),
	}, nil
}

// start launches the run loop, once, unless Close has begun.
func (e *Elector) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	e.g.Go(func() error {
		defer close(e.loopDone)
		return e.run(e.loopCtx)
	})
	if e.cfg.PeerMode {
		e.g.Go(func() error { return e.pollPeers(e.loopCtx) })
	}
}

// nudge asks the run loop to look at its inputs again. It never blocks.
func (e *Elector) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Changes returns a new channel that receives this elector's view of the
// leadership: first the current state, once known, then every change of
// leader (ID or term) or of whether this elector leads. The elector never
// waits for a reader: a slow reader finds only the latest state, having
// missed the ones in between. The channel is closed by Close. Calling
// Changes starts the background reader, so an elector that never
// campaigns can watch a group.
func (e *Elector) Changes() <-chan Change {
	ch := make(chan Change, 1)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		close(ch)
		return ch
	}
	if e.known {
		ch <- e.current
	}
	e.subs = append(e.subs, ch)
	e.mu.Unlock()
	e.start()
	return ch
}

// Lockfile reads the lockfile once, under the retry policy, and returns
// its record; found is false when there is no lockfile. Content that is not
// a valid record gives an error wrapping ErrInvalidRecord. It is meant for
// status tools: electing needs none of it.
func (e *Elector) Lockfile(ctx context.Context) (rec Record, found bool, err error) {
	data, etag, err := e.get(ctx)
	if err != nil || etag == "" {
		return Record{}, false, err
	}
	rec, err = ParseRecord(data)
	if err != nil {
		return Record{}, true, fmt.Errorf("s3lect: lockfile %q: %w", e.key, err)
	}
	return rec, true, nil
}

// Leader returns the live leader this elector knows of, and false when it
// knows of none (before the first read, or when the lease is vacant,
// expired or unreadable).
func (e *Elector) Leader() (Record, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current.Leader, e.known && e.current.Leader.LeaderID != ""
}

// publish records c as the current state and, if the leader's ID or term or
// IsLeader changed, hands it to every Changes channel, replacing a value
// the reader has not taken yet.
func (e *Elector) publish(c Change) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.publishLocked(c)
}

func (e *Elector) publishLocked(c Change) {
	if c.Leader.Term > e.maxTerm {
		e.maxTerm = c.Leader.Term
	}
	prev, wasKnown := e.current, e.known
	e.current, e.known = c, true
	if e.closed || (wasKnown && prev.IsLeader == c.IsLeader && sameErr(prev.Err, c.Err) &&
		prev.Leader.LeaderID == c.Leader.LeaderID && prev.Leader.Term == c.Leader.Term) {
		return
	}
	for _, ch := range e.subs {
		select { // drop the unread value, if any; only publishers send, under e.mu
		case <-ch:
		default:
		}
		ch <- c
	}
}

func sameErr(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}

// Observe returns a channel that receives this elector's view of the
// leadership like Changes, but that is closed and forgotten when ctx ends
// or at Close.
func (e *Elector) Observe(ctx context.Context) <-chan Change {
	ch := make(chan Change, 1)
	e.mu.Lock()
	if e.closed || ctx.Err() != nil {
		e.mu.Unlock()
		close(ch)
		return ch
	}
	if e.known {
		ch <- e.current
	}
	e.subs = append(e.subs, ch)
	e.mu.Unlock()
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, s := range e.subs {
			if s == ch {
				e.subs = append(e.subs[:i], e.subs[i+1:]...)
				close(ch)
				return
			}
		}
	})
	e.start()
	return ch
}

// nextStamp returns a lastUpdated for a new write: the wall clock, but
// always after every stamp this elector wrote before, so that no two of its
// writes have the same bytes even if the wall clock steps back.
func (e *Elector) nextStamp() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now().UTC().Round(0)
	if !now.After(e.stamp) {
		now = e.stamp.Add(time.Nanosecond)
	}
	e.stamp = now
	return now
}

// Close resigns a held leadership (releasing the lockfile), makes a waiting
// Campaign return ErrClosed, stops every goroutine and waits for them, and
// closes every Changes channel. It is safe to call more than once; later
// calls wait for the first to finish.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.closeDone
		return nil
	}
	e.closed = true
	close(e.closing)
	e.stopLoop()
	started := e.started
	e.mu.Unlock()

	// The run loop returns at its next look at its inputs, after finishing
	// a takeover it may be writing; from then on no leadership can start.
	// A Campaign that sees closing withdraws, and resigns what a takeover
	// in flight won.
	if started {
		<-e.loopDone
	}
	e.mu.Lock()
	l := e.lead
	e.mu.Unlock()
	if l != nil {
		l.end(errCloseResign)
		<-l.exited
	}
	e.cancel()
	err := e.g.Wait()
	e.mu.Lock()
	for _, ch := range e.subs {
		close(ch)
	}
	e.subs = nil
	e.mu.Unlock()
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
