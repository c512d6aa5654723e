// Package next is package pool's engine: it runs the pure cores of
// package coord (a worker's and the coordinator's) against a store, the
// coordinator elected by package s3lect's Elector
// (docs/pool-protocol.md).
package next

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/shardlead"
	"github.com/s3lect/s3lect/store"
)

// Config is package pool's Config, checked and its defaults set by its
// New, less the fields the engine does not use; see there for each.
type Config struct {
	Store            store.Store // implements store.Lister
	Prefix, ID       string
	Shards           []string
	Work             func(ctx context.Context, shard string, lead *s3lect.Leadership)
	FrequentInterval time.Duration
	LeaderTimeout    time.Duration
	Logger           *slog.Logger

	// Peer mode (peer.go): the same settings go to the coordinator's
	// election.
	PeerMode        bool
	ServerAddr      string
	PeerTLS         *tls.Config
	PeerClient      *http.Client
	PeerPinned      bool
	PeerCertificate *tls.Certificate
}

var (
	// ErrDuplicateID is returned by Run when another process runs as the
	// same worker.
	ErrDuplicateID = errors.New("pool: duplicate worker ID")
	// ErrOldPool is returned by Run when the Prefix holds the objects of
	// the pool before version 2 (members.json).
	ErrOldPool = errors.New("pool: the Prefix holds the objects of the old pool (members.json): stop every worker of the old version, then start the new version under a new Prefix, or delete members.json, sessions/ and shards/ under this one")
)

// Pool is one worker of a pool of shards.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	clock lease.Clock
	calls lease.Calls
	ran   atomic.Bool

	coordinating atomic.Bool // an era of this worker's runs (Coordinating)
	etagForms    atomic.Bool // warned that the store lists ETags in another form (etagform.go)

	owned                                                atomic.Int64
	starts, stops, sessions, gets, puts, lists, coordEra atomic.Uint64

	mu      sync.Mutex
	leading map[string]bool
	shards  []string      // under mu: Config.Shards, then as SetShards last set them (shards.go)
	reshard chan struct{} // a SetShards for the coordinator's loop

	el *s3lect.Elector // the coordinator's election; started by Run

	// Peer mode (peer.go).
	peerClient     *http.Client
	pinned         pinnedClient
	reports        chan reportReq // to the coordinator's loop
	electorHandler atomic.Pointer[http.Handler]
}

// New takes cfg as package pool's New has checked it. It starts nothing.
func New(cfg Config) (*Pool, error) {
	p := &Pool{cfg: cfg, log: cfg.Logger.With("pool", cfg.Prefix, "worker", cfg.ID), clock: lease.NewClock(), leading: map[string]bool{},
		reports: make(chan reportReq), shards: slices.Clone(cfg.Shards), reshard: make(chan struct{}, 1)}
	if cfg.PeerMode {
		p.peerClient = newPeerClient(cfg)
	}
	p.calls = lease.Calls{Store: cfg.Store, Timeout: cfg.FrequentInterval, Clock: &p.clock, Count: p.count, Log: p.log}
	// The coordinator's election: its followers read the lockfile every
	// third interval (section 3.3 of docs/protocol.md times the reads
	// just after the leader's renewals, and a renewal missing puts them
	// back to every interval), which keeps 100 workers within $300 a
	// month on S3 and leaves the coordinator's failover as it was with
	// every interval (docs/pool-evidence.md).
	el, err := s3lect.New(s3lect.ElectorConfig{Store: cfg.Store, LockfilePath: cfg.Prefix + "coordinator.json", ServerID: cfg.ID,
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
// ends; then it ends every leadership, waits for Work to return, closes
// its session and returns nil. It returns ErrDuplicateID when another
// process runs as the same worker, and ErrOldPool when the Prefix holds
// the old pool's objects. Package pool's Run calls it once.
func (p *Pool) Run(ctx context.Context) error {
	if _, etag, err := p.calls.Get(ctx, p.cfg.Prefix+"members.json"); err != nil {
		return fmt.Errorf("pool: read %q: %w", p.cfg.Prefix+"members.json", err)
	} else if etag != "" {
		return ErrOldPool
	}
	el := p.el
	defer el.Close()
	defer p.pinned.close()
	if p.cfg.PeerMode && p.cfg.PeerClient == nil {
		defer p.peerClient.CloseIdleConnections()
	}
	if p.cfg.PeerMode {
		h := s3lect.PeerHandler(el)
		p.electorHandler.Store(&h)
		defer p.electorHandler.Store(nil)
	}
	wdone := make(chan struct{})
	cctx, stopCoord := context.WithCancel(context.WithoutCancel(ctx))
	var coordDone sync.WaitGroup
	coordDone.Go(func() { p.coordinate(cctx, el, wdone) })
	err := p.work(ctx, el)
	close(wdone)
	if !p.coordinating.Load() {
		stopCoord() // campaigning: give up
	}
	coordDone.Wait() // coordinating: it ends after handing this worker's shards over
	stopCoord()
	return err
}

// Coordinating reports whether this worker coordinates the pool now (an
// era of its own is running).
func (p *Pool) Coordinating() bool { return p.coordinating.Load() }
