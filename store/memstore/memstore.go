// Package memstore is an in-memory store.Store for tests, demos and many
// electors inside one process.
//
// ETags are content hashes, as on S3, so a store that received the same
// bytes twice would hand out the same ETag twice: tests on memstore see the
// same A-B-A hazards a real bucket would.
package memstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/s3lect/s3lect/store"
)

// Store is an in-memory store.Store. The zero value is not usable; call New.
// It is safe for concurrent use by any number of goroutines.
type Store struct {
	mu      sync.Mutex
	objects map[string]object
	gen     uint64 // writes so far, of every key
}

type object struct {
	data []byte
	etag string
	gen  uint64 // numbers every write: the sighting token
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Lister  = (*Store)(nil)
	_ store.Sighter = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{objects: make(map[string]object)}
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("memstore: get %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, "", fmt.Errorf("memstore: get %q: %w", key, store.ErrNotFound)
	}
	return append([]byte(nil), o.data...), o.etag, nil
}

// GetSighting implements store.Sighter: the token numbers the write that
// left the object, so a write of bytes the object held before, which
// gets the same ETag, has another token.
func (s *Store) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", "", fmt.Errorf("memstore: get %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, "", "", fmt.Errorf("memstore: get %q: %w", key, store.ErrNotFound)
	}
	return append([]byte(nil), o.data...), o.etag, strconv.FormatUint(o.gen, 10), nil
}

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memstore: put %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	switch {
	case etag == "" && ok:
		return "", fmt.Errorf("memstore: put %q: object exists: %w", key, store.ErrPreconditionFailed)
	case etag != "" && !ok:
		return "", fmt.Errorf("memstore: put %q: object absent: %w", key, store.ErrPreconditionFailed)
	case etag != "" && o.etag != etag:
		return "", fmt.Errorf("memstore: put %q: etag %s is not %s: %w", key, o.etag, etag, store.ErrPreconditionFailed)
	}
	return s.putLocked(key, data), nil
}

// List implements store.Lister.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: list %q: %w", prefix, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var entries []store.Entry
	for key, o := range s.objects {
		if strings.HasPrefix(key, prefix) {
			entries = append(entries, store.Entry{Key: key, ETag: o.etag})
		}
	}
	slices.SortFunc(entries, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	return entries, nil
}

// Delete removes key, as an operator or a lifecycle rule might. s3lect
// itself never deletes a lockfile.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
}

// Set writes data at key unconditionally, as an operator might. It returns
// the new ETag. Tests use it to plant corrupt or foreign lockfiles.
func (s *Store) Set(key string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putLocked(key, data)
}

// putLocked stores a copy of data under an ETag that is the quoted MD5 of
// the content, the form S3 uses for single-part uploads.
func (s *Store) putLocked(key string, data []byte) string {
	sum := md5.Sum(data)
	s.gen++
	o := object{data: append([]byte(nil), data...), etag: `"` + hex.EncodeToString(sum[:]) + `"`, gen: s.gen}
	s.objects[key] = o
	return o.etag
}
