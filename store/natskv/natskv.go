// Package natskv is a store.Store on a NATS JetStream key-value bucket.
//
// Create-if-absent is KeyValue.Create, compare-and-swap is KeyValue.Update
// on the revision, and the revision, as a decimal string, is the ETag.
// Revisions only grow, so an ETag never comes back.
//
// # Keys
//
// Lockfile paths are mapped to NATS keys by Key: letters, digits, '-', '_'
// and '/' stay as they are, and every other byte becomes '=' followed by two
// upper-case hex digits, so "leader/my-group.json" is stored under
// "leader/my-group=2Ejson". The mapping is reversible (see Path) and keeps
// keys clear of NATS's rules about dots and wildcards.
//
// # Bucket TTL
//
// s3lect does not need the bucket's TTL (MaxAge): a leader's expiry is
// judged by each follower's own clock. A bucket TTL shorter than the time
// between writes deletes the lockfile under a live leader: followers that
// saw it held then wait a full LeaderTimeout before recreating it, but a
// newly started instance creates it at once, and the term history is lost.
// Leave the TTL unset, or make it many times LeaderTimeout; released
// records then expire harmlessly.
//
// # Durability
//
// The store contract needs every acknowledged write to survive a server
// crash: a lost write can bring back an older lockfile, and revisions
// already handed out are handed out again for other bytes. JetStream
// acknowledges a write on a single-replica file stream before it reaches
// the disk unless the server runs with
//
//	jetstream { sync_interval: always }
//
// so run it so, or give the bucket Replicas: 3 on a cluster (a write is
// then acknowledged once a majority has it). Memory storage loses
// everything on a restart. Never delete, recreate or restore (from a
// backup or snapshot) a bucket that a live group elects on. The Store
// warns once, at its first write, about what it can see: memory storage
// and a bucket TTL; the server's sync_interval it cannot see.
package natskv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/store"
)

// Store is a store.Store on one JetStream key-value bucket. It is safe for
// concurrent use.
type Store struct {
	kv     jetstream.KeyValue
	log    *slog.Logger
	warned sync.Once

	// status is held for writing while warnRisky asks the bucket's status,
	// and for reading around every other call: nats.go's KeyValue.Status
	// rewrites the stream information that Get reads, unsynchronized (a
	// race the detector reported with three electors on one Store).
	status sync.RWMutex
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithLogger sets where the Store warns about risky bucket settings. The
// default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// New returns a Store on kv.
func New(kv jetstream.KeyValue, opts ...Option) *Store {
	s := &Store{kv: kv, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// warnRisky logs, once per Store, the bucket settings it can see that
// break the store contract.
func (s *Store) warnRisky(ctx context.Context) {
	s.warned.Do(func() {
		s.status.Lock()
		st, err := s.kv.Status(ctx)
		s.status.Unlock()
		if err != nil {
			return // the write that follows reports the failure
		}
		if kvs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
			if info := kvs.StreamInfo(); info != nil && info.Config.Storage == jetstream.MemoryStorage {
				s.log.Warn("natskv: the bucket uses memory storage: a server restart loses the lockfile and its term history; use file storage with sync_interval: always, or Replicas: 3",
					"bucket", s.kv.Bucket(), "risk", "memory storage")
			}
		}
		if st.TTL() > 0 {
			s.log.Warn("natskv: the bucket has a TTL: a lockfile not written for that long is deleted, and its term history with it; leave the TTL unset or make it many times LeaderTimeout",
				"bucket", s.kv.Bucket(), "ttl", st.TTL(), "risk", "bucket TTL")
		}
	})
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, path string) ([]byte, string, error) {
	key, err := keyFor(path)
	if err != nil {
		return nil, "", err
	}
	s.status.RLock()
	e, err := s.kv.Get(ctx, key)
	s.status.RUnlock()
	if err != nil {
		return nil, "", s.mapError("get", path, err)
	}
	data := e.Value()
	if len(data) > store.MaxObjectSize+1 {
		data = data[:store.MaxObjectSize+1]
	}
	return data, strconv.FormatUint(e.Revision(), 10), nil
}

// List implements store.Lister. It watches the bucket's keys for their
// latest revisions only (an ordered consumer delivering the last message
// of each key, headers without values, deletions skipped) and stops the
// watch once the keys present when it started have arrived: one consumer
// created and deleted per listing, never a Get per key.
//
// NATS filters keys by whole dot-separated tokens, and Key keeps a path in
// one token, so the watch goes over every key in the bucket and List keeps
// those under prefix: its cost grows with the keys of the whole bucket,
// not only those listed.
//
// A watch that delivers nothing for listStall (10 s) before it has every key
// (seen once in CI: a listing that never ended) is abandoned and started
// again once on a fresh consumer; a second stall is returned as an error
// that says so. So List never waits longer than about twice listStall
// without news, whatever ctx allows.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	list, err := s.watchList(ctx, prefix)
	if errors.Is(err, errStalled) && ctx.Err() == nil {
		list, err = s.watchList(ctx, prefix)
	}
	if err != nil {
		return nil, s.mapError("list", prefix, err)
	}
	return list, nil
}

// listStall is how long List waits for the next key of a watch before it
// gives that watch up (see List). A variable so that tests can shorten it.
var listStall = 10 * time.Second

var errStalled = errors.New("the watch delivered nothing for a while before it had every key (the server overloaded, or its consumer stuck): try again")

// watchList is one watch of List.
func (s *Store) watchList(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.status.RLock()
	w, err := s.kv.WatchAll(ctx, jetstream.MetaOnly(), jetstream.IgnoreDeletes())
	s.status.RUnlock()
	if err != nil {
		return nil, err
	}
	defer stopWatch(w)
	want := Key(prefix)
	latest := map[string]uint64{}
	stall := time.NewTimer(listStall)
	defer stall.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stall.C:
			return nil, fmt.Errorf("%w (%d keys after %v)", errStalled, len(latest), listStall)
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("the watch ended before it had every key (connection closed?)")
			}
			if e == nil { // every key present at the start has arrived
				return entries(latest), nil
			}
			if strings.HasPrefix(e.Key(), want) {
				latest[e.Key()] = max(latest[e.Key()], e.Revision())
			}
			stall.Reset(listStall)
		}
	}
}

// stopWatch stops w, then takes what the watch still delivers, so that its
// callback, which blocks on a full channel, returns. The channel is closed
// once the subscription is, but not always (seen in CI: a drain that
// waited for ever), so the drain also ends after a second with nothing
// delivered: nothing is sent after the stop but what was already under
// way.
func stopWatch(w jetstream.KeyWatcher) {
	w.Stop()
	quiet := time.NewTimer(time.Second)
	defer quiet.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
			quiet.Reset(time.Second)
		case <-quiet.C:
			return
		}
	}
}

// entries turns the latest revision of each key into a listing in the
// order of the keys' paths (which is not the order of the keys: Key
// escapes some bytes). Keys that no path maps to (written by some other
// program, such as "a.b") are left out: Get could not read them.
func entries(latest map[string]uint64) []store.Entry {
	list := make([]store.Entry, 0, len(latest))
	for key, rev := range latest {
		if path, err := Path(key); err == nil && Key(path) == key {
			list = append(list, store.Entry{Key: path, ETag: strconv.FormatUint(rev, 10)})
		}
	}
	slices.SortFunc(list, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	return list
}

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, path string, data []byte, etag string) (string, error) {
	key, err := keyFor(path)
	if err != nil {
		return "", err
	}
	s.warnRisky(ctx)
	s.status.RLock()
	defer s.status.RUnlock()
	var rev uint64
	if etag == "" {
		rev, err = s.kv.Create(ctx, key, data)
	} else {
		want, perr := strconv.ParseUint(etag, 10, 64)
		if perr != nil {
			// Not a revision this store handed out: it cannot match.
			return "", fmt.Errorf("natskv: put %q: etag %q is not a revision: %w", path, etag, store.ErrPreconditionFailed)
		}
		rev, err = s.kv.Update(ctx, key, data, want)
	}
	if err != nil {
		return "", s.mapError("put", path, err)
	}
	return strconv.FormatUint(rev, 10), nil
}

func (s *Store) mapError(op, path string, err error) error {
	where := fmt.Sprintf("natskv: %s %q in bucket %s", op, path, s.kv.Bucket())
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%s: %w", where, store.ErrNotFound)
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%s: %v: %w", where, err, store.ErrPreconditionFailed)
	case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrInvalidKey):
		return store.Permanent(fmt.Errorf("%s: %w", where, err))
	}
	return fmt.Errorf("%s: %w", where, err)
}

// Key returns the NATS key a lockfile path is stored under, for example to
// inspect it with `nats kv get BUCKET KEY`.
func Key(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

// Path returns the lockfile path a key was made from by Key, or an error if
// key is not such a key.
func Path(key string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] != '=' {
			b.WriteByte(key[i])
			continue
		}
		if i+2 >= len(key) {
			return "", fmt.Errorf("natskv: key %q: '=' at %d is not followed by two hex digits", key, i)
		}
		v, err := strconv.ParseUint(key[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("natskv: key %q: bad escape at %d: %w", key, i, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

func keyFor(path string) (string, error) {
	if path == "" {
		return "", store.Permanent(errors.New("natskv: empty lockfile path"))
	}
	return Key(path), nil
}
