// Package pool spreads many shards over a pool of workers, each shard led
// by at most one worker at a time, with one multiplexed lease per worker
// instead of one election per shard.
//
// Every worker runs one Pool over the same shard names and the same
// Prefix, each with its own ID. A worker keeps one session object of its
// own alive by rewriting it every FrequentInterval; that one write keeps
// the leases of all the shards it owns. A shard's ownership record (owner,
// the owner's session, the shard's term) is written only when ownership
// changes. A worker takes a shard over from another only after that
// owner's session object has stayed unchanged for LeaderTimeout (or has
// named another session for as long), as a follower of a single
// election does, with If-Match on the shard record and the term raised by
// one. Its watch is timed to that rule: it lists the session objects
// just after the renewals land, and the look that takes a dead worker's
// shards begins shortly before that worker's lease runs out and reads
// the sessions that clear its claims at that instant. The protocol and its safety argument are in docs/pool-protocol.md
// in the repository.
//
// # Guarantees
//
//   - At most one live leadership per shard: a shard's Leadership Context
//     is live only while its worker's session lease is, by that worker's
//     monotonic clock, and it is cancelled no later than LeaderTimeout
//     minus a tenth after the send of the session's last successful
//     write. Before a claim, a worker lists it in its session object (its
//     intent), then reads the member list and every other worker's
//     session object, and claims only where none of them can lead the
//     shard. That holds whatever is deleted or restored: session objects
//     (an absent one is buried under a tombstone that then ages like any
//     record; a record counts by what it lists only once seen to follow
//     an earlier write of its session, else it must stand unchanged for
//     a lease; a failed read breaks a sighting's age), shard records, the
//     member list (which states each member's longest lease, so that a
//     worker that never read a member's records waits out its lease
//     all the same). Three cases are not covered. A session object of a
//     live session put back to an earlier write of that session that
//     another worker has not seen superseded (with content-hash ETags an
//     exact copy of a write it had seen looks unchanged; an older write
//     it never saw looks current): that worker may take a shard the
//     session leads until the session's next renewal fails on the
//     restored object (at most its lease; a FrequentInterval less a tenth
//     of LeaderTimeout when the copy is of a write it had seen), and,
//     when the shard's record was put back too or a restore set its terms
//     back, a shard whose record names that session, at a term that may
//     repeat the one the session leads. Restore a session object only
//     while its worker is stopped. And the member
//     list and a shard record both deleted, and a worker started since
//     (that has never read the owner's session) creating that record
//     before the owner's next look has put it back in the list.
//   - Each shard's leaderships have terms (fencing tokens) that rise
//     with every change of owner (by one, unless a session listed a
//     higher term) and never repeat: a claim writes a term above the
//     record's and above every term a session object lists for the shard
//     (leading it, claiming it, or having led it: a leadership that ended
//     without a release keeps its term listed until a later one
//     supersedes it, and a new session of the worker takes over the
//     list). A claim whose reply was lost is never adopted: its record
//     is claimed anew. Terms can start again lower only when a shard
//     record is deleted (or restored to an older version) and no object
//     a worker can find lists its last term: the record was released;
//     or the session object listing it is deleted too; or it is the
//     session object of a worker that has left, and the member list,
//     deleted or put back to an older version since, no longer names it
//     (with content-hash ETags, a list put back to bytes a prune was
//     decided on also lets that prune land over a member that restarted
//     since; each write of the list is otherwise unique).
//   - Two workers given the same ID are found out: the one whose session
//     the other's overwrite a second time returns an error matching
//     ErrDuplicateID from Run, and the other goes on alone.
//   - The shards spread evenly: each live worker aims at ⌊N/W⌋ or ⌈N/W⌉
//     of N shards over W live workers (the workers with the lowest IDs
//     take the larger share). When a worker dies the survivors take its
//     shards over; when one joins, workers above their share hand shards
//     over to it: the shard's work is cancelled and drained, then the
//     record released, then it is claimed. Workers that start together
//     let the pool assemble first: a worker that leads nothing claims
//     nothing until a FrequentInterval after the member list last grew
//     (at most a LeaderTimeout after it joined it).
//   - Not protected: a live worker that renews its session but cannot
//     claim (its reads of shard records fail, say) leaves the shards that
//     are its share unled for a while. The others take such a shard up
//     (the orphan rule) one at a time, the first one four leases (the
//     longest lease among the workers; with an InfrequentInterval,
//     InfrequentInterval + FrequentInterval if longer) after it became
//     unowned in its view, and not at all if they have stopped looking
//     by then (two looks in a row found the same counts). It is led
//     again when that worker can claim, or when its session ends
//     (docs/pool-protocol.md, "The watch").
//
// # Cost
//
// In steady state each worker writes one PUT per FrequentInterval,
// whatever its number of shards. On a store that implements
// store.Lister it reads twice per FrequentInterval, whatever the number
// of workers: one listing of the session objects and one read of the
// member list; it reads the session objects themselves only when
// something changes (a death, a join, a leave, a worker off its share;
// at a death, a worker that holds its share reads them an interval
// later, after those below their share have claimed).
// With Config.InfrequentInterval above FrequentInterval, a settled
// pool's workers list and read the member list every InfrequentInterval
// instead (2 × FrequentInterval/InfrequentInterval reads per worker per
// FrequentInterval), at the price of finding a crash or a join up to an
// InfrequentInterval later. With Config.PeerMode the workers tell each
// other their renewals over HTTPS (PeerHandler) and list the store and
// read the member list every InfrequentInterval, and at any tick where
// the peers cannot answer for every live worker: the same reads as with
// the infrequent interval, the frequent pace's crash failover. On a store
// that does not list (or with Config.ReadEachSession), it reads the
// member list and every other member's session object once per
// FrequentInterval. A member
// whose session is over leaves the list (once no term it lists is
// needed; a worker whose Run ends with everything released takes itself
// off), so dead workers are not read for ever. A look that claims shards
// costs, beyond the shard records' reads and the claims, two session
// renewals (the intent, then its removal), a read of the member list and
// one of every other worker's session object. A listing only tells a
// worker when to look: every claim rests on fresh reads, so a listing that
// lags behind the writes can delay a takeover, never cause one.
//
// # Keys
//
// Under Prefix: "members.json" (the workers), "sessions/<ID>.json" (one
// per worker) and "shards/<name>.json" (one per shard). Never point an
// s3lect Elector, of this library or the original, at these keys: an
// elector takes over any object that stays unchanged for LeaderTimeout,
// and a shard record stays unchanged for as long as its owner lives.
package pool

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
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
	// Store holds the pool's objects. Required.
	Store store.Store

	// Prefix is put before every key of the pool, for example
	// "pools/ingest/". Every worker of a pool uses the same. Required.
	Prefix string

	// ID identifies this worker; it must be unique in the pool and stay
	// the same across restarts. Required.
	ID string

	// Shards names the shards. Every worker of a pool uses the same names.
	// Required; names must be unique and non-empty.
	Shards []string

	// Work runs the shard while this worker leads it, in its own
	// goroutine. ctx is the leadership's context: Work must return soon
	// after it ends. If Work returns while the leadership is live, the
	// pool resigns it. The pool claims the shard again only after Work has
	// returned. lead.Resign may be called inside Work (defer
	// lead.Resign(ctx)): after a handover or Run's end it returns at once,
	// and the release is written when Work returns. Required.
	Work func(ctx context.Context, shard string, lead *s3lect.Leadership)

	// FrequentInterval is how often the worker renews its session and
	// reads the others'. It is also the timeout of one store call.
	// Default s3lect.DefaultFrequentInterval (5s).
	FrequentInterval time.Duration

	// LeaderTimeout is how long a session object must stay unchanged
	// before its shards are taken over. It must exceed two
	// FrequentIntervals. A worker's leaderships end LeaderTimeout minus a
	// tenth after the send of its last successful session write. Default
	// s3lect.DefaultLeaderTimeout (15s).
	LeaderTimeout time.Duration

	// InfrequentInterval is how often the worker watches the pool (one
	// listing of the session objects and one read of the member list) once
	// the pool is settled: every live worker at its share, every shard
	// owned, nothing due, and every other worker's session seen renewed at
	// the last listing. Any change (a session that did not renew, a join,
	// a leave, a shortfall) brings the watch back to every
	// FrequentInterval. Session renewals stay at FrequentInterval: they
	// are the lease. A crash is then found up to InfrequentInterval later,
	// so a crashed worker's shards are led again within about
	// InfrequentInterval + max(InfrequentInterval, LeaderTimeout) of its
	// last renewal, and a joining worker gets its share up to an
	// InfrequentInterval later. Default FrequentInterval (the watch never
	// slows down); it must not be below FrequentInterval. It applies to
	// the listing watch only: on a store that does not list, or with
	// ReadEachSession, every read of the pool is a look at every session.
	InfrequentInterval time.Duration

	// ReadEachSession makes the worker read every member's session object
	// every FrequentInterval, as on a store that cannot list, instead of
	// one listing of the session objects (store.Lister) and reads only
	// when something changes. It costs a read per member per interval;
	// it pays only where a listing costs more than that: on NATS KV, a
	// listing streams every key of the bucket, the shard records
	// included (docs/stores.md).
	ReadEachSession bool

	// PeerMode makes the workers tell each other their session renewals
	// over HTTPS instead of listing the store every FrequentInterval
	// (docs/pool-protocol.md, "Peer mode"). Every worker serves
	// PeerHandler at ServerAddr and, once per FrequentInterval, asks one
	// worker, the live one with the lowest ID (the hub), for the others'
	// latest session ETags, telling it its own. The store is still
	// listed, and the member list read, every InfrequentInterval, and
	// whenever the hub cannot answer for every live worker (a death, a
	// join, a hub that is down, stalls or lies): a crash failover takes
	// as long as at the frequent pace. What a peer says only tells a
	// worker when to look; every claim rests on fresh reads of the store.
	// With PeerMode a zero InfrequentInterval means 6 × FrequentInterval.
	// Give every worker of a pool the same PeerMode: a worker that does
	// not report makes the others list the store every interval.
	PeerMode bool

	// ServerAddr is the host:port at which the other workers reach this
	// worker's PeerHandler, over HTTPS. Required with PeerMode.
	ServerAddr string

	// PeerTLS configures this worker's HTTPS requests to the others:
	// RootCAs to verify them, Certificates for mutual TLS. Nil means the
	// system's roots. Set PeerTLS or PeerClient, not both.
	PeerTLS *tls.Config

	// PeerClient, if set, makes this worker's requests to the others
	// instead of a client built from PeerTLS. It should not follow
	// redirects.
	PeerClient *http.Client

	// Logger receives the pool's events. Default slog.Default().
	Logger *slog.Logger
}

// maxKeyLen is the longest object key the stores accept.
const maxKeyLen = 1024

// Pool is one worker of a pool of shards.
type Pool struct {
	cfg         Config
	fi, ii, lt  time.Duration
	margin      time.Duration // LeaderTimeout / 10
	log         *slog.Logger
	keyMembers  string
	keySession  string
	keySessions string       // the prefix of every session object
	lister      store.Lister // nil when the store does not list
	closed      []byte       // the session's released record, once written (Run reads it after the heartbeat)

	clock lease.Clock // the local clock; tests run it fast or slow
	calls lease.Calls // the store calls, on clock
	leads shardlead.Factory[*s3lect.Leadership]

	sess   session
	queue  eventQueue
	stats  recorder
	works  sync.WaitGroup // the Work goroutines and the releases in flight
	relSem chan struct{}  // capacity 8: the releases written at once (loopState.release)
	ran    atomic.Bool
	rtt    atomic.Int64 // the store's recent round trip, in nanoseconds: a decaying maximum of the renewals' (noteRTT)

	stopRun func(error)     // ends Run's loop with a cause (ErrDuplicateID)
	twins   map[string]twin // heartbeat-owned: sessions of this ID that this process never opened, seen displacing it

	// Peer mode (peer.go): nil without Config.PeerMode.
	hub        *hub
	peerClient *http.Client
	ownedPeer  bool // peerClient was built here: Run's end closes its idle connections

	// The loop's state: only the goroutine running Run touches it.
	st loopState
}

// New checks cfg. It starts nothing.
func New(cfg Config) (*Pool, error) {
	if cfg.FrequentInterval == 0 {
		cfg.FrequentInterval = s3lect.DefaultFrequentInterval
	}
	if cfg.LeaderTimeout == 0 {
		cfg.LeaderTimeout = s3lect.DefaultLeaderTimeout
	}
	if cfg.InfrequentInterval == 0 {
		cfg.InfrequentInterval = cfg.FrequentInterval
		if cfg.PeerMode {
			cfg.InfrequentInterval = peerIIFactor * cfg.FrequentInterval
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("pool: invalid config: "+format, args...)
	}
	longest := 0
	for _, s := range cfg.Shards {
		longest = max(longest, len(s))
	}
	switch {
	case cfg.Store == nil:
		return nil, bad("Store is nil; give the store that holds the pool's objects")
	case cfg.Prefix == "":
		return nil, bad("Prefix is empty; give a key prefix of the pool's own, such as %q", "pools/ingest/")
	case cfg.ID == "":
		return nil, bad("ID is empty; give this worker's unique name, such as its host name")
	case len(cfg.Shards) == 0:
		return nil, bad("Shards is empty; name at least one shard")
	case cfg.Work == nil:
		return nil, bad("Work is nil; give the function that runs a shard while this worker leads it")
	case cfg.FrequentInterval < 0:
		return nil, bad("FrequentInterval %v is negative", cfg.FrequentInterval)
	case cfg.LeaderTimeout < 0:
		return nil, bad("LeaderTimeout %v is negative", cfg.LeaderTimeout)
	case cfg.InfrequentInterval < 0:
		return nil, bad("InfrequentInterval %v is negative", cfg.InfrequentInterval)
	case cfg.InfrequentInterval < cfg.FrequentInterval:
		return nil, bad("InfrequentInterval %v is below FrequentInterval %v; leave it zero to watch every FrequentInterval", cfg.InfrequentInterval, cfg.FrequentInterval)
	case cfg.LeaderTimeout <= 2*cfg.FrequentInterval:
		return nil, bad("LeaderTimeout %v must exceed two FrequentIntervals (2 × %v)", cfg.LeaderTimeout, cfg.FrequentInterval)
	case cfg.PeerMode && cfg.ServerAddr == "":
		return nil, bad("PeerMode needs ServerAddr, the host:port at which the other workers reach this worker's PeerHandler")
	case cfg.PeerTLS != nil && cfg.PeerClient != nil:
		return nil, bad("both PeerTLS and PeerClient are set; put the TLS settings in PeerClient's transport")
	case len(cfg.Prefix)+len("sessions/.json")+max(len(cfg.ID), longest) > maxKeyLen:
		return nil, bad("Prefix, ID or a shard name is too long: keys would exceed %d bytes", maxKeyLen)
	}
	for what, s := range map[string]string{"Prefix": cfg.Prefix, "ID": cfg.ID} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return nil, bad("%s %q must be UTF-8 without NUL bytes, as object keys are", what, s)
		}
	}
	if strings.Contains(cfg.ID, "/") {
		return nil, bad("ID %q contains a slash; worker IDs name one object each", cfg.ID)
	}
	seen := map[string]bool{}
	for _, name := range cfg.Shards {
		switch {
		case name == "":
			return nil, bad("Shards holds an empty name")
		case seen[name]:
			return nil, bad("Shards names shard %q twice", name)
		case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
			return nil, bad("shard name %q must be UTF-8 without NUL bytes, as object keys are", name)
		}
		seen[name] = true
	}
	p := &Pool{
		cfg:         cfg,
		fi:          cfg.FrequentInterval,
		ii:          cfg.InfrequentInterval,
		lt:          cfg.LeaderTimeout,
		margin:      lease.Margin(cfg.LeaderTimeout),
		log:         cfg.Logger.With("pool", cfg.Prefix, "worker", cfg.ID),
		keyMembers:  cfg.Prefix + "members.json",
		keySession:  cfg.Prefix + "sessions/" + cfg.ID + ".json",
		keySessions: cfg.Prefix + "sessions/",
		clock:       lease.NewClock(),
	}
	p.calls = lease.Calls{Store: cfg.Store, Timeout: cfg.FrequentInterval, Clock: &p.clock, Count: p.stats.call, Log: p.log}
	if mutNoMargin {
		p.margin = 0
	}
	if !cfg.ReadEachSession {
		p.lister, _ = cfg.Store.(store.Lister)
	}
	p.sess.leads = map[string]*lead{}
	p.sess.ended = map[string]uint64{}
	p.sess.reqs = make(chan func(*session))
	p.relSem = make(chan struct{}, 8)
	p.sess.stopped = make(chan struct{})
	p.twins = map[string]twin{}
	p.sess.kick = make(chan struct{}, 1)
	p.sess.flush = make(chan chan error)
	p.queue.wake = make(chan struct{}, 1)
	if cfg.PeerMode {
		p.hub = newHub(p)
		p.peerClient = cfg.PeerClient
		if p.peerClient == nil {
			p.peerClient, p.ownedPeer = newPeerClient(cfg.PeerTLS), true
		}
	}
	p.st.init(p)
	return p, nil
}

func (p *Pool) sessionKey(worker string) string { return p.cfg.Prefix + "sessions/" + worker + ".json" }
func (p *Pool) shardKey(shard string) string    { return p.cfg.Prefix + "shards/" + shard + ".json" }

// now is the worker's local monotonic time.
func (p *Pool) now() time.Time { return p.clock.Now() }

// realUntil returns how long, in real time, until local time t (rounded
// up: a timer set for it never fires before t).
func (p *Pool) realUntil(t time.Time) time.Duration { return p.clock.RealUntil(t) }

// sleep waits until local time t or until ctx ends; it reports whether t
// came.
func (p *Pool) sleep(ctx context.Context, t time.Time, wake <-chan struct{}) bool {
	timer := time.NewTimer(max(p.realUntil(t), 0))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// shardHash orders the shards the same way for every worker, and scatters
// names that sort together (shard-0001, shard-0002...) across the order.
func shardHash(shard string) uint64 {
	sum := sha256.Sum256([]byte(shard))
	return binary.BigEndian.Uint64(sum[:])
}

// Run keeps this worker's session, claims its share of the shards, runs
// Work for those it leads and hands shards over to balance the pool,
// until ctx ends. Then it ends every leadership (Work's contexts are
// cancelled), waits for Work to return, releases the shard records and
// the session, and returns nil; or, when it finds another process
// running as the same worker, it stops the same way and returns an error
// that matches ErrDuplicateID. Call it once.
func (p *Pool) Run(ctx context.Context) error {
	if p.ran.Swap(true) {
		return errors.New("pool: Run called twice")
	}
	p.leads = newLeaderships(p.clock)
	switch {
	case p.hub != nil:
		p.log.Info("watching the other workers through the hub of peer mode, and the store every InfrequentInterval", "addr", p.cfg.ServerAddr, "infrequent", p.ii)
	case p.lister != nil:
		p.log.Info("watching the other workers by one listing of their session objects per interval")
	case p.cfg.ReadEachSession:
		p.log.Info("watching the other workers by reading each one's session object every interval (Config.ReadEachSession)")
	default:
		p.log.Info("watching the other workers by reading each one's session object every interval: the store does not implement store.Lister")
	}
	lctx, stopLoop := context.WithCancelCause(ctx)
	defer stopLoop(nil)
	p.stopRun = stopLoop
	if p.hub != nil {
		p.hub.open()
		defer p.hub.close()
		if p.ownedPeer {
			defer p.peerClient.CloseIdleConnections()
		}
	}
	bctx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		p.heartbeat(bctx)
	}()
	p.loop(lctx)
	p.works.Wait()
	stopBeat()
	<-beatDone
	if p.closed != nil {
		p.leaveMembers(p.closed, len(p.sess.endedTerms()) == 0)
	}
	if err := context.Cause(lctx); errors.Is(err, ErrDuplicateID) {
		return err
	}
	return nil
}

// newLeaderships builds the shards' Leaderships (package s3lect registers
// it; see internal/shardlead).
var newLeaderships = shardlead.Registered[*s3lect.Leadership]()

// ErrDuplicateID is returned by Run when another process runs as the same
// worker: two workers were given one ID.
var ErrDuplicateID = errors.New("pool: duplicate worker ID")

// Leading returns the shards this worker leads, sorted.
func (p *Pool) Leading() []string {
	var out []string
	if shown := p.sess.shown.Load(); shown != nil {
		for _, ld := range *shown {
			if ld.l.Context().Err() == nil {
				out = append(out, ld.shard)
			}
		}
	}
	slices.Sort(out)
	return out
}
