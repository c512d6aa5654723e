package simworld

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// PeerNet is the simulation's network between peer-mode nodes: an
// http.RoundTripper that routes requests to handlers in memory and, until
// Heal, fails some
// (refused), stalls some until the caller gives up, delays some, and
// answers some late. A crashed host's address refuses, or keeps answering
// with a stale body.
type PeerNet struct {
	mu     sync.Mutex
	r      *rand.Rand
	hosts  map[string]*peerHost
	healed bool
	asked  map[string]int // requests per address
}

// NewPeerNet returns a network whose faults are drawn from r until Heal.
func NewPeerNet(r *rand.Rand) *PeerNet {
	return &PeerNet{r: r, hosts: map[string]*peerHost{}, asked: map[string]int{}}
}

// NewCalmPeerNet returns a network without faults, for tests that need
// peer mode in a synctest bubble.
func NewCalmPeerNet() *PeerNet {
	p := NewPeerNet(rand.New(rand.NewPCG(1, 2)))
	p.healed = true
	return p
}

type peerHost struct {
	h     http.Handler
	down  chan struct{} // closed when the host crashes: requests in flight are reset
	stale []byte        // set: the answer to every request, at once
}

// Roll draws a number in [0, 1) from the network's generator.
func (p *PeerNet) Roll() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r.Float64()
}

// Add serves addr with h.
func (p *PeerNet) Add(addr string, h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hosts[addr] = &peerHost{h: h, down: make(chan struct{})}
}

// Crash takes addr's host down: requests in flight are reset, and later
// ones refused, or, with stale set, answered with stale at once (something
// at the address keeps answering with the dead node's last words).
func (p *PeerNet) Crash(addr string, stale []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.hosts[addr]; h != nil && h.h != nil {
		close(h.down)
	}
	p.hosts[addr] = &peerHost{down: make(chan struct{}), stale: stale}
}

// Heal ends the random faults.
func (p *PeerNet) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healed = true
}

// Asked returns how many requests were sent to addr.
func (p *PeerNet) Asked(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked[addr]
}

func (p *PeerNet) RoundTrip(req *http.Request) (*http.Response, error) {
	return p.roundTrip(req, "", &p.mu, p.r)
}

// From returns the network as one caller sees it: its requests' faults
// are drawn from r, not from the network's generator, so that what one
// caller meets does not depend on the order in which callers' requests
// at one virtual instant reach the network (a seed replays exactly). name
// says who calls in the lines Debug prints.
func (p *PeerNet) From(name string, r *rand.Rand) http.RoundTripper {
	return &peerCaller{p: p, r: r, name: name}
}

type peerCaller struct {
	p    *PeerNet
	mu   sync.Mutex
	r    *rand.Rand
	name string
}

func (c *peerCaller) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.p.roundTrip(req, c.name, &c.mu, c.r)
}

// roundTrip serves req from caller from, drawing its faults from r under mu.
func (p *PeerNet) roundTrip(req *http.Request, from string, mu *sync.Mutex, r *rand.Rand) (*http.Response, error) {
	mu.Lock()
	x, d := r.Float64(), time.Duration(r.Int64N(int64(time.Second)))
	mu.Unlock()
	p.mu.Lock()
	h := p.hosts[req.URL.Host]
	p.asked[req.URL.Host]++
	if p.healed {
		x = 1
	}
	p.mu.Unlock()
	Debugf("peer %s -> %s %s: draw %.3f", from, req.URL.Host, req.URL.RawQuery, x)
	defer Debugf("peer %s -> %s %s: done", from, req.URL.Host, req.URL.RawQuery)
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
