package s3lect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
)

// simPeers is the simulation's network between peer-mode electors: it
// routes requests to PeerHandlers in memory and, until heal, fails some
// (refused), stalls some until the caller gives up, delays some, and
// answers some late. A crashed host's address refuses, or keeps answering
// with a stale body.
type simPeers struct {
	mu     sync.Mutex
	r      *rand.Rand
	hosts  map[string]*simHost
	healed bool
	asked  map[string]int // requests per address
}

// newPeerNet returns a network without faults, for tests that need peer
// mode in a synctest bubble.
func newPeerNet() *simPeers {
	return &simPeers{r: rand.New(rand.NewPCG(1, 2)), hosts: map[string]*simHost{}, healed: true, asked: map[string]int{}}
}

type simHost struct {
	h     http.Handler
	down  chan struct{} // closed when the host crashes: requests in flight are reset
	stale []byte        // set: the answer to every request, at once
}

func (p *simPeers) roll() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r.Float64()
}

func (p *simPeers) add(addr string, h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hosts[addr] = &simHost{h: h, down: make(chan struct{})}
}

func (p *simPeers) crash(addr string, stale []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.hosts[addr]; h != nil && h.h != nil {
		close(h.down)
	}
	p.hosts[addr] = &simHost{down: make(chan struct{}), stale: stale}
}

func (p *simPeers) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healed = true
}

func (p *simPeers) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	h := p.hosts[req.URL.Host]
	if p.asked != nil {
		p.asked[req.URL.Host]++
	}
	x, d := p.r.Float64(), time.Duration(p.r.Int64N(int64(time.Second)))
	if p.healed {
		x = 1
	}
	p.mu.Unlock()
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-req.Context().Done():
			return req.Context().Err()
		}
	}
	switch {
	case h == nil || (h.h == nil && h.stale == nil) || x < 0.04:
		return nil, errors.New("dial: connection refused")
	case x < 0.07: // a stalled connection
		<-req.Context().Done()
		return nil, req.Context().Err()
	case x < 0.15: // slow to connect
		if err := wait(d); err != nil {
			return nil, err
		}
	}
	if h.stale != nil {
		rec := httptest.NewRecorder()
		rec.Write(h.stale)
		return rec.Result(), nil
	}
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.h.ServeHTTP(rec, req.WithContext(ctx))
	}()
	select {
	case <-done:
	case <-h.down:
		cancel()
		<-done
		return nil, errors.New("read: connection reset by peer")
	case <-req.Context().Done():
		cancel()
		<-done
		return nil, req.Context().Err()
	}
	if x >= 0.15 && x < 0.2 { // the answer comes late
		if err := wait(d); err != nil {
			return nil, err
		}
	}
	return rec.Result(), nil
}

// rewindStore is a store that, when it crashes, loses its last
// acknowledged writes and then hands their revision numbers out again for
// other content, as a NATS server with a lazy sync_interval does. ETags
// are revision numbers.
type rewindStore struct {
	mu        sync.Mutex
	hist      []rewindState // every state, the current one last
	downUntil time.Time
	lostTerms map[uint64]bool // terms of takeovers the store lost
	epoch     int             // counts crashes: a request sent before one never lands
}

func (s *rewindStore) epochNow() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

func (s *rewindStore) sameEpoch(ep int) bool { return s.epochNow() == ep }

// down reports whether the store is down now: a request sent now is
// refused, it does not wait for the server to come back.
func (s *rewindStore) down() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.downUntil)
}

// rewindState is one write: key's content from revision rev on. The
// revision counter is the store's, shared by every key.
type rewindState struct {
	key    string
	data   []byte
	rev    uint64
	exists bool
}

// cur returns key's current state.
func (s *rewindStore) cur(key string) rewindState {
	for i := len(s.hist) - 1; i >= 0; i-- {
		if s.hist[i].key == key {
			return s.hist[i]
		}
	}
	return rewindState{}
}

// lastRev returns the store's last revision.
func (s *rewindStore) lastRev() uint64 {
	if len(s.hist) == 0 {
		return 0
	}
	return s.hist[len(s.hist)-1].rev
}

// crash loses the last lost writes and makes every call fail for outage.
// It reports whether anything was lost.
func (s *rewindStore) crash(lost int, outage time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downUntil = time.Now().Add(outage)
	s.epoch++
	lost = min(lost, len(s.hist))
	kept := s.hist[:len(s.hist)-lost]
	before := uint64(0)
	for i := len(kept) - 1; i >= 0; i-- {
		if kept[i].key == testKey {
			if rec, err := ParseRecord(kept[i].data); err == nil {
				before = rec.Term
			}
			break
		}
	}
	for _, st := range s.hist[len(kept):] {
		if rec, err := ParseRecord(st.data); err == nil && st.key == testKey && rec.Term > before {
			if s.lostTerms == nil {
				s.lostTerms = map[uint64]bool{}
			}
			s.lostTerms[rec.Term] = true
		}
	}
	s.hist = kept
	if rewindDebug {
		fmt.Printf("%s CRASH lost %d, down until %s, now rev %d\n", time.Now().Format("05.000"), lost, s.downUntil.Format("05.000"), s.lastRev())
	}
	return lost > 0
}

var errStoreDown = errors.New("rewind store: down")

func (s *rewindStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.downUntil) {
		return nil, "", errStoreDown
	}
	c := s.cur(key)
	if !c.exists {
		return nil, "", store.ErrNotFound
	}
	return append([]byte(nil), c.data...), fmt.Sprintf(`"%d"`, c.rev), nil
}

func (s *rewindStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.downUntil) {
		return "", errStoreDown
	}
	c := s.cur(key)
	if (etag == "" && c.exists) || (etag != "" && (!c.exists || etag != fmt.Sprintf(`"%d"`, c.rev))) {
		return "", store.ErrPreconditionFailed
	}
	n := rewindState{key: key, data: append([]byte(nil), data...), rev: s.lastRev() + 1, exists: true}
	s.hist = append(s.hist, n)
	if rewindDebug {
		fmt.Printf("%s PUT rev %d over %s: %s\n", time.Now().Format("05.000"), n.rev, etag, data)
	}
	return fmt.Sprintf(`"%d"`, n.rev), nil
}

// lost reports whether a takeover at term was lost by the store.
func (s *rewindStore) lost(term uint64) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostTerms[term]
}

var rewindDebug = false
