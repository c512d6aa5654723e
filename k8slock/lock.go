// Package k8slock is a lock for client-go's leader election
// (k8s.io/client-go/tools/leaderelection) and controller-runtime's
// manager, kept in one object of any store.Store (S3, GCS, Azure Blob,
// NATS KV, or anything s3lect elects on) instead of a Lease in one
// cluster, so that controllers in several clusters, or outside
// Kubernetes, elect one leader among them.
//
//	lock, err := k8slock.New(k8slock.Config{Store: st, Key: "leader/my-controller.json", Identity: podName})
//	...
//	mgr, err := manager.New(cfg, manager.Options{LeaderElection: true, LeaderElectionResourceLockInterface: lock})
//
// A Lock implements resourcelock.Interface: Get reads the object, Create
// writes it only if it is absent (If-None-Match: *), Update writes it only
// if its ETag is still the one this Lock last read or wrote (If-Match);
// the ETag plays the part of a Lease's resourceVersion. A refused write
// fails with the API server's own errors (AlreadyExists, Conflict), a
// missing object reads as NotFound, so client-go's LeaderElector runs its
// usual rules on it, unchanged.
//
// # What you get, compared with s3lect's own Elector
//
//   - client-go's rules decide. A candidate takes over once it has seen
//     the record unchanged for the record's leaseDurationSeconds, on its
//     own monotonic clock, and only with a conditional write on the
//     version it read: two candidates never both win one takeover. Every
//     write carries a random write ID, so that no two writes have the same
//     bytes: a renewal is always seen as a change, and its ETag is always
//     new.
//   - The record's LeaderTransitions rises by one at each change of
//     holder, through the same conditional write; Lock.Term returns it
//     plus one. It can serve as a fencing term (package fence) with the
//     limits below.
//   - LeaseContext gives work a context that ends when this Lock's own
//     lease bound has passed: the record's leaseDurationSeconds minus a
//     tenth, counted from the start of the last write that named this Lock
//     the holder, checked on the monotonic clock by every Err call, so a
//     process that resumes after a pause (SIGSTOP, a stopped VM) past its
//     lease finds it ended before it does anything. The context that
//     client-go gives OnStartedLeading does not: client-go counts its
//     RenewDeadline from the end of the last successful call, and a
//     process resumed after a pause keeps it live until its next renewal
//     attempt times out (up to RenewDeadline after the resume), while
//     another holder may lead.
//
// # What you lose
//
//   - No term object. s3lect's Elector keeps the highest term in a
//     second object, so its terms never repeat; here LeaderTransitions
//     lives in the record only. Deleting the object restarts it at 0, and
//     a holder that wins its own record back (its lease ran out but
//     nobody took over) keeps the same value: two leaderships of one
//     Identity can share a term. Never delete the object while candidates
//     run, and give every candidate an Identity of its own.
//   - Leader side of the lease: client-go stops leading when a renewal
//     has failed for RenewDeadline; it counts from the end of its last
//     successful write, not its start as the Elector does, so a write
//     whose reply came back more than LeaseDuration − RenewDeadline −
//     RetryPeriod after it landed (3 s at client-go's defaults) leaves
//     the leader's context live after a follower may take over. Use
//     LeaseContext for work that must not overlap.
//   - Whole seconds. The record holds the lease as whole seconds; every
//     candidate uses the holder's value, and clock rates must agree within
//     the margin of LeaseDuration over RenewDeadline (client-go's rule)
//     and within a tenth for LeaseContext.
//   - No peer mode, no watchers, no handover to a named successor
//     (client-go's PreferredHolder and Coordinated modes are carried in
//     the record but are alpha features of client-go's own). More store
//     calls: at client-go's defaults the leader writes every RetryPeriod
//     (1,800 PUT an hour) and every other candidate reads every
//     RetryPeriod plus a jitter (1,125 GET an hour), where an Elector
//     leader writes 720 times an hour and a stable follower reads 120
//     times, or never in peer mode.
//   - Unreadable content is never taken over: Get returns an error that
//     names the key, and client-go retries it until someone deletes or
//     fixes the object. s3lect's Elector waits such content out instead.
//   - What client-go itself does not guarantee (its package doc): it is
//     not fencing. A paused process, or work that ignores its context,
//     can act after its lease; LeaseContext narrows the first, only a
//     fence on the resource closes both.
//
// Events: RecordEvent sends client-go's "became leader" and "stopped
// leading" events to Config.EventRecorder, about Config.EventObject.
package k8slock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/s3lect/s3lect/store"
)

// groupResource names the lock in the API errors it returns, which
// client-go and its logs print.
var groupResource = schema.GroupResource{Group: "s3lect.io", Resource: "locks"}

// Config configures a Lock.
type Config struct {
	// Store holds the lock's object. Required.
	Store store.Store

	// Key is the object's key, for example "leader/my-controller.json".
	// Every candidate of one election uses the same key; do not share it
	// with an s3lect Elector's LockfilePath. Required.
	Key string

	// Identity names this candidate; it must be unique among the
	// candidates (a pod's name). Required.
	Identity string

	// EventRecorder, if set, receives client-go's leader election events
	// (controller-runtime's manager.GetEventRecorderFor gives one).
	EventRecorder resourcelock.EventRecorder

	// EventObject is the object the events are about, for example this
	// candidate's Pod. Required with EventRecorder.
	EventObject runtime.Object

	// CallTimeout bounds each store call. client-go gives a follower's
	// calls no deadline of its own, so without one a hung store call
	// would stall that candidate for good. Keep it at most half
	// RenewDeadline, as client-go does for its own API client. Default
	// DefaultCallTimeout.
	CallTimeout time.Duration
}

// DefaultCallTimeout is the default of Config.CallTimeout: half
// client-go's default RenewDeadline of 10 s.
const DefaultCallTimeout = 5 * time.Second

// Lock is a resourcelock.Interface on one object of a store.Store. It is
// safe for concurrent use.
type Lock struct {
	cfg Config

	mu     sync.Mutex
	etag   string    // the ETag this Lock last read or wrote; "" before
	term   uint64    // LeaderTransitions+1 of the last write naming this Lock
	until  time.Time // monotonic: when this Lock's lease bound passes
	leases map[*leaseCtx]struct{}
	timer  *time.Timer // fires at until for the live lease contexts
}

var _ resourcelock.Interface = (*Lock)(nil)

// New returns a Lock for cfg, or an error naming the field that is wrong.
func New(cfg Config) (*Lock, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("k8slock: invalid config: "+format, args...)
	}
	switch {
	case cfg.Store == nil:
		return nil, bad("Store is nil")
	case cfg.Key == "":
		return nil, bad("Key is empty; name the object the candidates share")
	case cfg.Identity == "":
		return nil, bad("Identity is empty; give each candidate a unique one (its pod's name)")
	case cfg.EventRecorder != nil && cfg.EventObject == nil:
		return nil, bad("EventRecorder is set but EventObject is nil; name the object the events are about (this candidate's Pod)")
	case cfg.CallTimeout < 0:
		return nil, bad("CallTimeout %v is negative", cfg.CallTimeout)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	return &Lock{cfg: cfg, leases: map[*leaseCtx]struct{}{}}, nil
}

// Get reads the record. It returns a NotFound API error when the object
// does not exist, and an error naming the key for content that is not a
// lock record. The bytes it returns are the object's, write ID included.
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	data, etag, err := l.cfg.Store.Get(ctx, l.cfg.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierrors.NewNotFound(groupResource, l.cfg.Key)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("k8slock: get %q: %w", l.cfg.Key, err)
	}
	rec, err := decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("k8slock: get %q: %w", l.cfg.Key, err)
	}
	l.mu.Lock()
	l.etag = etag
	if rec.HolderIdentity != l.cfg.Identity {
		l.endLeaseLocked()
	}
	l.mu.Unlock()
	return rec, data, nil
}

// Create writes the record if no object exists at the key; otherwise it
// returns an AlreadyExists API error.
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.put(ctx, "create", ler, "")
}

// Update replaces the record if the object's ETag is still the one this
// Lock last read or wrote; otherwise it returns a Conflict API error.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	etag := l.etag
	l.mu.Unlock()
	if etag == "" {
		return fmt.Errorf("k8slock: update %q: the record was never read; call Get or Create first", l.cfg.Key)
	}
	return l.put(ctx, "update", ler, etag)
}

func (l *Lock) put(ctx context.Context, op string, ler resourcelock.LeaderElectionRecord, etag string) error {
	data, err := encode(ler, newWriteID())
	if err != nil {
		return fmt.Errorf("k8slock: %s %q: %w", op, l.cfg.Key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	start := time.Now() // the lease is counted from before the write can land
	newETag, err := l.cfg.Store.PutIfMatch(ctx, l.cfg.Key, data, etag)
	if errors.Is(err, store.ErrPreconditionFailed) {
		if etag == "" {
			return apierrors.NewAlreadyExists(groupResource, l.cfg.Key)
		}
		return apierrors.NewConflict(groupResource, l.cfg.Key, fmt.Errorf("the object changed since this candidate read it: %w", err))
	}
	if err != nil {
		// The write may have landed: the ETag this Lock holds then no
		// longer matches, its next Update fails with a Conflict, and
		// client-go reads the record again. The lease bound is left as
		// it was, which is still a bound.
		return fmt.Errorf("k8slock: %s %q: %w", op, l.cfg.Key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.etag = newETag
	if ler.HolderIdentity != l.cfg.Identity || ler.LeaseDurationSeconds <= 0 {
		l.endLeaseLocked()
		return nil
	}
	l.term = uint64(ler.LeaderTransitions) + 1
	lease := time.Duration(ler.LeaseDurationSeconds) * time.Second
	l.extendLeaseLocked(start.Add(lease - lease/10))
	return nil
}

// RecordEvent sends one of client-go's leader election events ("became
// leader", "stopped leading") to Config.EventRecorder, if set, as a
// Normal event with reason LeaderElection about Config.EventObject.
func (l *Lock) RecordEvent(s string) {
	if l.cfg.EventRecorder == nil {
		return
	}
	l.cfg.EventRecorder.Eventf(l.cfg.EventObject, corev1.EventTypeNormal, "LeaderElection", "%s %s", l.cfg.Identity, s)
}

// Identity returns Config.Identity.
func (l *Lock) Identity() string { return l.cfg.Identity }

// Describe names the lock in client-go's logs: its key.
func (l *Lock) Describe() string { return l.cfg.Key }

// Term returns the record's LeaderTransitions plus one as of this Lock's
// last write naming it the holder, or 0 if it never wrote one. See the
// package doc for when two leaderships can share it.
func (l *Lock) Term() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

// newWriteID returns 16 random bytes in hex: every write's bytes, and so
// its ETag on stores that hash the content, differ from every other's.
func newWriteID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
