// Package faultstore wraps a store.Store and injects the failures an
// election must survive, for tests of programs built on s3lect:
//
//   - Cut: the process holding the store's connections was killed. Every
//     call fails at once, including calls in flight, whose results (even
//     of a write that landed) never reach the caller.
//   - Stall: the network swallows requests. Calls block until the caller's
//     context ends, as a request to a hung server does, and never reach
//     the store.
//   - FailNext: the next n calls fail before reaching the store.
//   - LoseReplies: the next n writes land in the store, but their callers
//     get an error instead of the reply, as when a connection breaks
//     after the server has acted.
//
// Reads, writes and listings (List, when the wrapped store implements
// store.Lister) are all calls: Cut, Stall and FailNext act on each alike.
//
// Faults apply to calls made through one wrapper, so a test gives each
// simulated process its own wrapper around a shared store. The zero fault
// settings pass every call through unchanged. A Store is safe for
// concurrent use.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/s3lect/s3lect/store"
)

// Errors the wrapper returns. None is permanent, so an elector retries
// them as it would a network failure.
var (
	// ErrCut is what every call returns once the store is cut.
	ErrCut = errors.New("faultstore: connection cut (process killed)")
	// ErrInjected is what a call failed by FailNext returns.
	ErrInjected = errors.New("faultstore: injected failure")
	// ErrReplyLost is what a write returns when LoseReplies dropped its
	// reply: the write did land.
	ErrReplyLost = errors.New("faultstore: reply lost after the write landed")
)

// Store passes calls to the store it wraps, with the faults set on it.
// It implements store.Lister (see List).
type Store struct {
	inner store.Store

	mu          sync.Mutex
	cut         chan struct{} // closed by Cut; replaced by Restore
	isCut       bool
	inflight    map[*int]context.CancelFunc // calls in the wrapped store, cancelled by Cut
	stalled     chan struct{}               // non-nil while stalled; closed by Unstall
	failNext    int
	loseReplies int
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// New wraps s.
func New(s store.Store) *Store {
	return &Store{inner: s, cut: make(chan struct{}), inflight: map[*int]context.CancelFunc{}}
}

// Cut makes every later call fail with ErrCut, and every call in flight
// return ErrCut at once (whatever the wrapped store does with it), until
// Restore.
func (s *Store) Cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isCut {
		s.isCut = true
		close(s.cut)
		for _, cancel := range s.inflight {
			cancel()
		}
	}
}

// IsCut reports whether the store is cut.
func (s *Store) IsCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isCut
}

// Restore undoes Cut: later calls reach the store again, as a restarted
// process's would.
func (s *Store) Restore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isCut {
		s.isCut = false
		s.cut = make(chan struct{})
	}
}

// Stall makes calls block, without reaching the store, until their
// context ends (they then return an error wrapping ctx.Err()), until
// Unstall (they then proceed), or until Cut.
func (s *Store) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled == nil {
		s.stalled = make(chan struct{})
	}
}

// Unstall lets stalled and later calls through.
func (s *Store) Unstall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled != nil {
		close(s.stalled)
		s.stalled = nil
	}
}

// FailNext makes the next n calls (reads or writes) fail with ErrInjected
// before they reach the store. It replaces any count still pending; n <= 0
// clears it.
func (s *Store) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = max(n, 0)
}

// LoseReplies makes the next n writes that the store accepts return
// ErrReplyLost although they landed. Writes the store refuses keep their
// own error and do not count. It replaces any count still pending; n <= 0
// clears it.
func (s *Store) LoseReplies(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseReplies = max(n, 0)
}

// enter applies the faults that act before a call reaches the store. It
// returns the context the call must use, which Cut cancels, and the
// function that ends the call.
func (s *Store) enter(ctx context.Context, op, key string) (context.Context, func(), error) {
	s.mu.Lock()
	cut, stalled := s.cut, s.stalled
	if s.isCut {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%s %q: %w", op, key, ErrCut)
	}
	if s.failNext > 0 {
		s.failNext--
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%s %q: %w", op, key, ErrInjected)
	}
	s.mu.Unlock()
	if stalled != nil {
		select {
		case <-stalled:
		case <-cut:
			return nil, nil, fmt.Errorf("%s %q: %w", op, key, ErrCut)
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%s %q: stalled: %w", op, key, ctx.Err())
		}
	}
	// A cut abandons the call: Cut cancels its context, so the wrapped
	// store returns promptly, and the caller gets ErrCut whatever it
	// returned.
	callCtx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.isCut {
		s.mu.Unlock()
		cancel()
		return nil, nil, fmt.Errorf("%s %q: %w", op, key, ErrCut)
	}
	token := new(int)
	s.inflight[token] = cancel
	s.mu.Unlock()
	leave := func() {
		s.mu.Lock()
		delete(s.inflight, token)
		s.mu.Unlock()
		cancel()
	}
	return callCtx, leave, nil
}

// cutErr reports ErrCut if the store was cut while the call ran.
func (s *Store) cutErr(op, key string) error {
	if s.IsCut() {
		return fmt.Errorf("%s %q: %w", op, key, ErrCut)
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	callCtx, leave, err := s.enter(ctx, "get", key)
	if err != nil {
		return nil, "", err
	}
	data, tag, err := s.inner.Get(callCtx, key)
	leave()
	if err := s.cutErr("get", key); err != nil {
		return nil, "", err
	}
	return data, tag, err
}

// ErrNoList is what List returns when the wrapped store does not implement
// store.Lister. It is permanent: retrying will not make the store list.
var ErrNoList = fmt.Errorf("faultstore: the wrapped store does not list (store.Lister): %w", errors.ErrUnsupported)

// List implements store.Lister through the wrapped store, with the same
// faults as Get. A Store always has a List method, whatever it wraps: on a
// wrapped store that does not list, List fails with a permanent error
// wrapping ErrNoList. To test a caller against a store that does not
// list, hide the method (struct{ store.Store }{fs}).
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	l, ok := s.inner.(store.Lister)
	if !ok {
		return nil, store.Permanent(fmt.Errorf("list %q: %w", prefix, ErrNoList))
	}
	callCtx, leave, err := s.enter(ctx, "list", prefix)
	if err != nil {
		return nil, err
	}
	entries, err := l.List(callCtx, prefix)
	leave()
	if err := s.cutErr("list", prefix); err != nil {
		return nil, err
	}
	return entries, err
}

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	callCtx, leave, err := s.enter(ctx, "put", key)
	if err != nil {
		return "", err
	}
	tag, err := s.inner.PutIfMatch(callCtx, key, data, etag)
	leave()
	if err := s.cutErr("put", key); err != nil {
		return "", err
	}
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loseReplies > 0 {
		s.loseReplies--
		return "", fmt.Errorf("put %q: %w", key, ErrReplyLost)
	}
	return tag, nil
}
