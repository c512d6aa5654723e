// Package cutstore wraps a store.Store with a switch that cuts it off, as
// the death of the process holding the connection would. The examples use
// it to simulate crashes.
package cutstore

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/s3lect/s3lect/store"
)

// ErrCut is what every call returns once the store is cut.
var ErrCut = errors.New("cutstore: connection cut")

// Store passes calls to the store it wraps until Cut is called.
type Store struct {
	inner store.Store
	cut   atomic.Bool
}

// New wraps s.
func New(s store.Store) *Store { return &Store{inner: s} }

// Cut makes every later call fail with ErrCut.
func (s *Store) Cut() { s.cut.Store(true) }

// IsCut reports whether Cut was called.
func (s *Store) IsCut() bool { return s.cut.Load() }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	if s.IsCut() {
		return nil, "", ErrCut
	}
	return s.inner.Get(ctx, key)
}

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if s.IsCut() {
		return "", ErrCut
	}
	return s.inner.PutIfMatch(ctx, key, data, etag)
}
