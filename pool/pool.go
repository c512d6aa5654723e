// Package pool spreads many shards over a pool of workers, each shard led
// by at most one worker at a time, with one lease per worker instead of
// one election per shard.
//
// Every worker runs one Pool over the same shard names and the same
// Prefix, each with its own ID. One of them, elected by package s3lect's
// own Elector, is the coordinator: it alone decides which worker leads
// which shard, and writes each worker a page of the assignment with
// If-Match on its last write. Every worker renews one session object per
// FrequentInterval (its lease), listing the shards it leads and the page
// it has applied, and reads its page. The protocol and its safety
// argument are in docs/pool-protocol.md in the repository.
//
// # Guarantees
//
//   - At most one live leadership per shard. A worker leads a shard only
//     while its page names the shard for its current session and its
//     session lease is live by its monotonic clock (a write sent at t
//     keeps it until t + LeaderTimeout − LeaderTimeout/10), and only once
//     a session write listing the shard has succeeded. The coordinator
//     moves a shard only after the old owner's session shows it released
//     (its Work drained), or after that session is over: closed, written
//     over, or unchanged for a lease as confirmed by a fresh read.
//   - Each shard's leaderships have terms (fencing tokens, lead.Term())
//     that rise with every grant and never repeat, as far as the
//     coordinator election's terms do.
//   - The exceptions are those of docs/pool-protocol.md, section 7 "Not
//     covered", each with its bound: the election's own (a repeated
//     coordinator term, which can repeat or lower shard terms); on a
//     store whose ETags hash the bytes (S3), a session object put back to
//     exact bytes the coordinator had seen, put back and written over
//     again unseen, or put back twice within a lease (two owners for at
//     most the worker's LeaderTimeout, two under a retried write of
//     unknown outcome); a listing that lags (at an era's start without
//     bound, later for two FrequentIntervals).
//     Restore the pool's objects only while every worker is stopped.
//   - Two workers given the same ID are found out: one of them returns an
//     error matching ErrDuplicateID from Run, and the other goes on.
//   - The shards spread evenly: each live worker gets ⌊N/W⌋ or ⌈N/W⌉ of
//     N shards over W live workers. A crashed worker's shards are led
//     elsewhere about LeaderTimeout + FrequentInterval after its last
//     renewal; the coordinator's crash stops no shard that is already
//     assigned; a worker whose Run ends drains its Work and closes its
//     session before Run returns, so that its shards move at the
//     coordinator's next listing, without waiting a lease. After faults
//     stop, every shard is led within 3 × LeaderTimeout + 3 ×
//     FrequentInterval.
//   - Not protected: a worker leads at most as many shards as one page
//     can name within store.MaxObjectSize (about 1,800 names of 11
//     bytes); a pool with fewer workers than that needs leaves the rest
//     unled.
//
// # Cost
//
// In steady state each worker writes one PUT per FrequentInterval (its
// session) and reads its page once, whatever its number of shards and
// the number of workers; as a follower of the coordinator election it
// also reads the election's lockfile once per FrequentInterval. The
// coordinator adds two listings (of the sessions and of their news, so
// that the election's term claims, which pile up, are never listed) and
// a read or two per interval. A death, join or leave costs requests in proportion to the
// shards that move, not to the workers. The store must implement
// store.Lister (every backend of this module does).
//
// # Keys
//
// Under Prefix: "coordinator.json" and "coordinator.json.term" (the
// coordinator election), "workers/<ID>.json" (each worker's session),
// "news/<ID>.json" (a hint to read it) and "assign/<ID>.json" (each
// worker's page). Never point another Elector at these keys. The pool of
// s3lect before the coordinator (keys "members.json", "sessions/" and
// "shards/") is not compatible: Run refuses to start where it finds
// its objects (ErrOldPool).
package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/shardlead"
	"github.com/s3lect/s3lect/store"
)

// Config configures a Pool. Zero durations mean the defaults of s3lect.
type Config struct {
	// Store holds the pool's objects. It must implement store.Lister.
	// Required.
	Store store.Store

	// Prefix is put before every key of the pool, for example
	// "pools/ingest/". Every worker of a pool uses the same. Required.
	Prefix string

	// ID identifies this worker; it must be unique in the pool and stay
	// the same across restarts (a restarted worker gets its shards back
	// where the spread allows). Required.
	ID string

	// Shards names the shards. Every worker of a pool uses the same names.
	// Required; names must be unique and non-empty.
	Shards []string

	// Work runs the shard while this worker leads it, in its own
	// goroutine. ctx is the leadership's context: Work must return soon
	// after it ends; the shard moves to another worker only once it has.
	// lead.Term() is the shard's term, a fencing token. If Work returns
	// while the leadership is live, the worker gives the shard up, and
	// runs it again only when the coordinator assigns it anew.
	// lead.Resign (or Transfer) inside Work ends the leadership and
	// returns at once; the shard is given up when Work returns. Required.
	Work func(ctx context.Context, shard string, lead *s3lect.Leadership)

	// FrequentInterval is how often the worker renews its session and
	// reads its page, and how often the coordinator lists the pool. It
	// is also the timeout of one store call. Default
	// s3lect.DefaultFrequentInterval (5s).
	FrequentInterval time.Duration

	// LeaderTimeout is how long a session object must stay unchanged
	// before the coordinator moves its shards, and the coordinator
	// election's LeaderTimeout. It must exceed two FrequentIntervals. A
	// worker's leaderships end LeaderTimeout minus a tenth after the send
	// of its last successful session write. Default
	// s3lect.DefaultLeaderTimeout (15s).
	LeaderTimeout time.Duration

	// InfrequentInterval is ignored.
	//
	// Deprecated: it slowed the old pool's watch of the store once the
	// pool was settled. In the coordinator-decided pool a worker reads
	// only its own page, once per FrequentInterval, which costs less
	// than the old pool did at any InfrequentInterval.
	InfrequentInterval time.Duration

	// ReadEachSession is ignored.
	//
	// Deprecated: the old pool read every session object on stores that
	// cannot list. In the coordinator-decided pool only the coordinator
	// lists, and every store of this module lists.
	ReadEachSession bool

	// PeerMode makes each worker report its renewals to the coordinator
	// over HTTPS and read its page only when the coordinator's answer
	// names another: one PUT per worker per FrequentInterval and no read
	// while the pool is stable (docs/pool-protocol.md, 4.8). Every worker
	// serves PeerHandler at ServerAddr (s3lect.ServePeers). Give every
	// worker of a pool the same PeerMode.
	PeerMode bool

	// ServerAddr is the host:port at which the other workers reach this
	// worker's PeerHandler, over HTTPS. Required with PeerMode.
	ServerAddr string

	// PeerTLS configures this worker's HTTPS requests to the coordinator:
	// RootCAs to trust; nil: the system's roots. For PeerMode. Set PeerTLS,
	// PeerClient or PeerPinned, one of them.
	PeerTLS *tls.Config

	// PeerClient, if set, makes this worker's requests to the coordinator
	// instead of a client built from PeerTLS. For PeerMode.
	PeerClient *http.Client

	// PeerPinned, with PeerMode, needs no certificate to be made: the
	// coordinator's election record pins the public key of the
	// certificate its worker serves, and the workers check it on every
	// request. Serve PeerHandler with PeerServerTLS.
	PeerPinned bool

	// PeerCertificate is the certificate a pinned worker serves; nil: a
	// self-signed one made by New. Only with PeerPinned.
	PeerCertificate *tls.Certificate

	// Logger receives the pool's events. Default slog.Default().
	Logger *slog.Logger
}

var (
	// ErrDuplicateID is returned by Run when another process runs as the
	// same worker: two workers were given one ID.
	ErrDuplicateID = errors.New("pool: duplicate worker ID")

	// ErrOldPool is returned by Run when the Prefix holds the objects of
	// the pool of s3lect before the coordinator ("members.json",
	// "sessions/<ID>.json", "shards/<name>.json"): the two cannot share
	// a Prefix.
	ErrOldPool = errors.New("pool: the Prefix holds the objects of the old pool")
)

// Pool is one worker of a pool of shards.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	clock lease.Clock
	calls lease.Calls
	ran   atomic.Bool
	el    *s3lect.Elector // the coordinator's election; started by Run

	coordinating atomic.Bool // an era of this worker's runs
	etagForms    atomic.Bool // warned that the store lists ETags in another form (listing.go)

	owned                                                atomic.Int64
	starts, stops, sessions, gets, puts, lists, coordEra atomic.Uint64

	mu      sync.Mutex
	leading map[string]bool
	shards  []string      // under mu: Config.Shards, then as SetShards last set them
	reshard chan struct{} // a SetShards for the coordinator's loop

	// Peer mode (peer.go).
	peerClient     *http.Client
	pinned         pinnedClient
	reports        chan reportReq // to the coordinator's loop
	electorHandler atomic.Pointer[http.Handler]
}

// New checks cfg. It starts nothing.
func New(cfg Config) (*Pool, error) {
	if cfg.FrequentInterval == 0 {
		cfg.FrequentInterval = s3lect.DefaultFrequentInterval
	}
	if cfg.LeaderTimeout == 0 {
		cfg.LeaderTimeout = s3lect.DefaultLeaderTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("pool: invalid config: "+format, args...)
	}
	switch _, lists := cfg.Store.(store.Lister); {
	case cfg.Store == nil:
		return nil, bad("Store is nil; give the store that holds the pool's objects")
	case !lists:
		return nil, bad("Store %T cannot list keys (store.Lister); the coordinator lists the workers' sessions: use a store of this module or add List", cfg.Store)
	case cfg.Prefix == "":
		return nil, bad("Prefix is empty; give a key prefix of the pool's own, such as %q", "pools/ingest/")
	case !utf8.ValidString(cfg.Prefix) || strings.ContainsRune(cfg.Prefix, 0):
		return nil, bad("Prefix %q must be UTF-8 without NUL bytes, as object keys are", cfg.Prefix)
	case cfg.Work == nil:
		return nil, bad("Work is nil; give the function that runs a shard while this worker leads it")
	case cfg.FrequentInterval < 0:
		return nil, bad("FrequentInterval %v is negative", cfg.FrequentInterval)
	case cfg.LeaderTimeout < 0:
		return nil, bad("LeaderTimeout %v is negative", cfg.LeaderTimeout)
	case cfg.LeaderTimeout <= 2*cfg.FrequentInterval:
		return nil, bad("LeaderTimeout %v must exceed two FrequentIntervals (2 × %v)", cfg.LeaderTimeout, cfg.FrequentInterval)
	}
	if err := checkID(cfg.Prefix, cfg.ID); err != nil {
		return nil, bad("%v", err) // as the peer handler checks a reported ID
	}
	if err := checkShards(cfg.Shards); err != nil {
		return nil, bad("Shards: %v", err)
	}
	switch {
	case cfg.PeerMode && cfg.ServerAddr == "":
		return nil, bad("PeerMode needs ServerAddr, the host:port at which the other workers reach this worker's PeerHandler")
	case cfg.PeerTLS != nil && cfg.PeerClient != nil:
		return nil, bad("both PeerTLS and PeerClient are set; put the TLS settings in PeerClient's transport")
	case cfg.PeerPinned && (cfg.PeerTLS != nil || cfg.PeerClient != nil):
		return nil, bad("PeerPinned checks the coordinator's key itself; leave PeerTLS and PeerClient unset")
	}
	p := &Pool{cfg: cfg, log: cfg.Logger.With("pool", cfg.Prefix, "worker", cfg.ID), clock: lease.NewClock(), leading: map[string]bool{},
		reports: make(chan reportReq), shards: slices.Clone(cfg.Shards), reshard: make(chan struct{}, 1)}
	p.peerClient = cfg.PeerClient
	if cfg.PeerMode && p.peerClient == nil {
		p.peerClient = peerHTTPClient(cfg.PeerTLS.Clone())
	}
	p.calls = lease.Calls{Store: cfg.Store, Timeout: cfg.FrequentInterval, Clock: &p.clock, Count: p.count, Log: p.log}
	// The coordinator's election: its followers read the lockfile every
	// third interval (section 3.3 of docs/protocol.md times the reads
	// just after the leader's renewals, and a renewal missing puts them
	// back to every interval), which keeps 100 workers within $300 a
	// month on S3 and leaves the coordinator's failover as it was with
	// every interval (docs/pool-evidence.md).
	el, err := s3lect.New(s3lect.ElectorConfig{Store: cfg.Store, LockfilePath: cfg.Prefix + coordinatorKey, ServerID: cfg.ID,
		FrequentInterval: cfg.FrequentInterval, LeaderTimeout: cfg.LeaderTimeout,
		InfrequentInterval: 3 * cfg.FrequentInterval, Logger: p.log,
		PeerMode: cfg.PeerMode, ServerAddr: cfg.ServerAddr, PeerTLS: cfg.PeerTLS, PeerClient: cfg.PeerClient,
		PeerPinned: cfg.PeerPinned, PeerCertificate: cfg.PeerCertificate})
	if err != nil {
		return nil, fmt.Errorf("pool: coordinator election: %w", err) // it starts nothing: no Close needed
	}
	p.el = el
	return p, nil
}

// maxKeyLen is the longest object key the stores accept, in bytes.
const maxKeyLen = 1024

// checkID returns why id cannot name a worker of the pool under prefix,
// or nil. New checks the worker's own ID with it, and the peer handler
// every ID a report names: a report must never make the coordinator read
// a key the store refuses (MinIO answers every GET of a key with a NUL
// byte with 400).
func checkID(prefix, id string) error {
	switch {
	case id == "":
		return errors.New("ID is empty; give this worker's unique name, such as its host name")
	case !utf8.ValidString(id) || strings.ContainsRune(id, 0):
		return fmt.Errorf("ID %q must be UTF-8 without NUL bytes, as object keys are", id)
	case strings.Contains(id, "/"):
		return fmt.Errorf("ID %q contains a slash; worker IDs name one object each", id)
	case len(prefix)+len("coordinator.json.term")+len(id) > maxKeyLen:
		return fmt.Errorf("Prefix or ID is too long: keys would exceed %d bytes", maxKeyLen)
	case len(id) > 255:
		return fmt.Errorf("ID %q is longer than 255 bytes", id)
	}
	return nil
}

func (p *Pool) count(op string, _ error) {
	switch op {
	case "get":
		p.gets.Add(1)
	case "list":
		p.lists.Add(1)
	default:
		p.puts.Add(1)
	}
}

func (p *Pool) sessionKey(id string) string { return p.cfg.Prefix + "workers/" + id + ".json" }
func (p *Pool) newsKey(id string) string    { return p.cfg.Prefix + "news/" + id + ".json" }
func (p *Pool) pageKey(id string) string    { return p.cfg.Prefix + "assign/" + id + ".json" }
func (p *Pool) rosterKey() string           { return p.cfg.Prefix + "departed.json" }

// newLeaderships builds the shards' Leaderships (package s3lect registers
// it; see internal/shardlead).
var newLeaderships = shardlead.Registered[*s3lect.Leadership]()

// Run keeps this worker's session, runs Work for the shards the
// coordinator assigns it, and campaigns to be the coordinator, until ctx
// ends. Then it ends every leadership (Work's contexts are cancelled),
// waits for Work to return, closes its session so that its shards move
// at once, and returns nil. It returns an error matching ErrDuplicateID
// when another process runs as the same worker, and one matching
// ErrOldPool, before it writes anything, when the Prefix holds the old
// pool's objects. Call it once.
func (p *Pool) Run(ctx context.Context) error {
	if p.ran.Swap(true) {
		return errors.New("pool: Run called twice")
	}
	if p.cfg.InfrequentInterval != 0 || p.cfg.ReadEachSession {
		p.log.Info("Config.InfrequentInterval and ReadEachSession are ignored: the coordinator-decided pool reads one page per worker per FrequentInterval")
	}
	if err := p.refuseOldPool(ctx); err != nil {
		return err
	}
	defer p.el.Close()
	defer p.pinned.close()
	if p.cfg.PeerMode {
		if p.cfg.PeerClient == nil {
			defer p.peerClient.CloseIdleConnections()
		}
		h := s3lect.PeerHandler(p.el)
		p.electorHandler.Store(&h)
		defer p.electorHandler.Store(nil)
	}
	wdone := make(chan struct{})
	cctx, stopCoord := context.WithCancel(context.WithoutCancel(ctx))
	var coordDone sync.WaitGroup
	coordDone.Go(func() { p.coordinate(cctx, wdone) })
	err := p.work(ctx)
	close(wdone)
	if !p.coordinating.Load() {
		stopCoord() // campaigning: give up
	}
	coordDone.Wait() // coordinating: it ends after handing this worker's shards over
	stopCoord()
	return err
}

// Leading returns the shards this worker leads, sorted.
func (p *Pool) Leading() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.leading))
}
