// Package next is the executor of the coordinator-decided pool (issue
// 40): it runs the pure core of package coord against a store, with the
// coordinator elected by package s3lect's Elector. It keeps package
// pool's public API (Config, New, Run, Stats, Leading, PeerHandler,
// ErrDuplicateID) and will replace package pool's implementation once it
// has passed the same measurements; until then it is unexported, beside
// the old pool.
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
	"unicode/utf8"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/shardlead"
	"github.com/s3lect/s3lect/store"
)

// Config configures a Pool: the fields of package pool's Config that the
// coordinator-decided pool keeps.
type Config struct {
	Store            store.Store // must implement store.Lister
	Prefix           string
	ID               string
	Shards           []string
	Work             func(ctx context.Context, shard string, lead *s3lect.Leadership)
	FrequentInterval time.Duration // default s3lect.DefaultFrequentInterval
	LeaderTimeout    time.Duration // default s3lect.DefaultLeaderTimeout
	Logger           *slog.Logger

	// PeerMode makes each worker report its renewals to the coordinator
	// over HTTPS (PeerHandler) and read its page only when the answer
	// names another one: one PUT per worker per FrequentInterval and no
	// read while the pool is stable. The coordinator's election runs in
	// the root package's peer mode too. Every worker serves PeerHandler at
	// ServerAddr. Give every worker of a pool the same PeerMode.
	PeerMode bool
	// ServerAddr is the host:port at which the other workers reach this
	// worker's PeerHandler, over HTTPS. Required with PeerMode.
	ServerAddr string
	// PeerTLS configures this worker's HTTPS requests to the coordinator
	// (and its election's to the leader): RootCAs to trust; nil: the
	// system's roots. Set PeerTLS or PeerClient, not both.
	PeerTLS *tls.Config
	// PeerClient, if set, makes those requests instead of a client built
	// from PeerTLS. It should not follow redirects.
	PeerClient *http.Client
	// PeerPinned, with PeerMode, needs no certificate to be made: the
	// coordinator's election record pins the public key of the
	// certificate its worker serves (s3lect.ElectorConfig.PeerPinned), and
	// the workers check it on every request. Serve PeerHandler with
	// PeerServerTLS. Set PeerTLS, PeerClient or PeerPinned, one of them.
	PeerPinned bool
	// PeerCertificate is the certificate a pinned worker serves; nil: a
	// self-signed one made by New. Only with PeerPinned.
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
	cfg    Config
	log    *slog.Logger
	clock  lease.Clock
	calls  lease.Calls
	lister store.Lister
	ran    atomic.Bool

	coordinating atomic.Bool // an era of this worker's runs
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
	lister, _ := cfg.Store.(store.Lister)
	switch {
	case cfg.Store == nil:
		return nil, bad("Store is nil; give the store that holds the pool's objects")
	case lister == nil:
		return nil, bad("Store %T cannot list keys (store.Lister): the coordinator lists the workers' sessions", cfg.Store)
	case cfg.Prefix == "":
		return nil, bad("Prefix is empty; give a key prefix of the pool's own, such as %q", "pools/ingest/")
	case CheckID(cfg.Prefix, cfg.ID) != nil:
		return nil, bad("%v", CheckID(cfg.Prefix, cfg.ID))
	case len(cfg.Shards) == 0:
		return nil, bad("Shards is empty; name at least one shard")
	case cfg.Work == nil:
		return nil, bad("Work is nil; give the function that runs a shard while this worker leads it")
	case cfg.PeerMode && cfg.ServerAddr == "":
		return nil, bad("PeerMode needs ServerAddr, the host:port at which the other workers reach this worker's PeerHandler")
	case cfg.PeerTLS != nil && cfg.PeerClient != nil:
		return nil, bad("both PeerTLS and PeerClient are set; put the TLS settings in PeerClient's transport")
	case cfg.PeerPinned && (cfg.PeerTLS != nil || cfg.PeerClient != nil):
		return nil, bad("PeerPinned checks the coordinator's key itself; leave PeerTLS and PeerClient unset")
	case cfg.FrequentInterval < 0 || cfg.LeaderTimeout <= 2*cfg.FrequentInterval:
		return nil, bad("LeaderTimeout %v must exceed two FrequentIntervals (2 × %v)", cfg.LeaderTimeout, cfg.FrequentInterval)
	}
	seen := map[string]bool{}
	for _, s := range cfg.Shards {
		if s == "" || seen[s] || !utf8.ValidString(s) {
			return nil, bad("shard name %q is empty, repeated or not UTF-8", s)
		}
		seen[s] = true
	}
	p := &Pool{cfg: cfg, log: cfg.Logger.With("pool", cfg.Prefix, "worker", cfg.ID), clock: lease.NewClock(), lister: lister, leading: map[string]bool{},
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
// the old pool's objects. Call it once.
func (p *Pool) Run(ctx context.Context) error {
	if p.ran.Swap(true) {
		return errors.New("pool: Run called twice")
	}
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
