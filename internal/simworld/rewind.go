package simworld

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
)

// ErrStoreDown is what a Rewind store answers while it is down.
var ErrStoreDown = errors.New("rewind store: down")

// Rewind is a store that, when it crashes, loses its last acknowledged
// writes and then hands their revision numbers out again for other
// content, as a NATS server with a lazy sync_interval does. ETags are
// revision numbers.
type Rewind struct {
	mu        sync.Mutex
	hist      []Write // every state, the current one last
	downUntil time.Time
	epoch     int // counts crashes: a request sent before one never lands
}

// Write is one write to a Rewind store: key's content from revision Rev
// on. The revision counter is the store's, shared by every key.
type Write struct {
	Key    string
	Data   []byte
	Rev    uint64
	exists bool
}

func (s *Rewind) epochNow() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

func (s *Rewind) sameEpoch(ep int) bool { return s.epochNow() == ep }

// Down reports whether the store is down now: a request sent now is
// refused, it does not wait for the server to come back. A nil Rewind is
// never down.
func (s *Rewind) Down() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.downUntil)
}

// cur returns key's current state.
func (s *Rewind) cur(key string) Write {
	for i := len(s.hist) - 1; i >= 0; i-- {
		if s.hist[i].Key == key {
			return s.hist[i]
		}
	}
	return Write{}
}

// lastRev returns the store's last revision.
func (s *Rewind) lastRev() uint64 {
	if len(s.hist) == 0 {
		return 0
	}
	return s.hist[len(s.hist)-1].Rev
}

// Crash loses the last n writes and makes every call fail for outage. It
// returns the writes kept and those lost, oldest first.
func (s *Rewind) Crash(n int, outage time.Duration) (kept, lost []Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downUntil = time.Now().Add(outage)
	s.epoch++
	n = min(n, len(s.hist))
	kept, lost = s.hist[:len(s.hist)-n], slices.Clone(s.hist[len(s.hist)-n:])
	s.hist = kept
	Debugf("CRASH lost %d, down until %s, now rev %d", n, s.downUntil.Format("05.000"), s.lastRev())
	return slices.Clone(kept), lost
}

func (s *Rewind) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.downUntil) {
		return nil, "", ErrStoreDown
	}
	c := s.cur(key)
	if !c.exists {
		return nil, "", store.ErrNotFound
	}
	return append([]byte(nil), c.Data...), fmt.Sprintf(`"%d"`, c.Rev), nil
}

func (s *Rewind) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.downUntil) {
		return "", ErrStoreDown
	}
	c := s.cur(key)
	if (etag == "" && c.exists) || (etag != "" && (!c.exists || etag != fmt.Sprintf(`"%d"`, c.Rev))) {
		return "", store.ErrPreconditionFailed
	}
	n := Write{Key: key, Data: append([]byte(nil), data...), Rev: s.lastRev() + 1, exists: true}
	s.hist = append(s.hist, n)
	Debugf("PUT rev %d over %s: %s", n.Rev, etag, data)
	return fmt.Sprintf(`"%d"`, n.Rev), nil
}
