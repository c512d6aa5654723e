package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// process is one simulated server process: an elector, its connection to
// the store, and its peer server and client. kill ends it as SIGKILL
// would.
type process struct {
	e      *s3lect.Elector
	inner  store.Store       // the store as the process reaches it, below the fault layer
	st     *faultstore.Store // what the elector uses; cut by kill
	writes *writeClock
	ln     net.Listener
	tr     *http.Transport // the peer client's; its dials are tracked
	stop   context.CancelFunc
	served chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{} // every connection accepted or dialed, open or not
	dead  bool
}

// track remembers c so that kill can reset it; a dead process has no
// connections, so c is reset at once.
func (p *process) track(c net.Conn) (net.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		reset(c)
		return nil, fmt.Errorf("process killed")
	}
	p.conns[c] = struct{}{}
	return c, nil
}

// kill crashes the process: store calls fail, every connection is reset,
// the listener closes, and nothing is said to anyone.
func (p *process) kill() {
	p.st.Cut()
	p.mu.Lock()
	p.dead = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		reset(c)
	}
	p.ln.Close() // ServePeers sees its listener fail and closes what is left, already reset
}

// reset closes c so that the peer reads RST, not FIN: no goodbye.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// trackedListener hands every accepted connection to its process.
type trackedListener struct {
	net.Listener
	p *process
}

func (l trackedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c, err := l.p.track(c); err == nil {
			return c, nil
		}
	}
}

// startProcess starts a process electing with cfg (its Store, ServerAddr
// and PeerClient are filled in) on inner, with its peer server on a
// loopback port of its own.
func startProcess(ctx context.Context, pki *devtls.PKI, inner store.Store, cfg s3lect.ElectorConfig) (*process, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &process{inner: inner, served: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.writes = &writeClock{Store: inner, sent: map[[sha256.Size]byte]time.Time{}}
	p.st = faultstore.New(p.writes)
	p.ln = trackedListener{ln, p}
	p.tr = &http.Transport{
		TLSClientConfig:     pki.ClientTLS(),
		TLSHandshakeTimeout: cfg.PeerTimeout,
		MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return p.track(c)
		},
	}
	cfg.Store, cfg.ServerAddr = p.st, ln.Addr().String()
	if cfg.PeerMode {
		cfg.PeerClient = &http.Client{
			Transport:     p.tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if p.e, err = s3lect.New(cfg); err != nil {
		ln.Close()
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	p.stop = stop
	go func() { defer close(p.served); s3lect.ServePeers(sctx, p.ln, s3lect.PeerHandler(p.e), pki.ServerTLS()) }()
	return p, nil
}

// close ends the process in an orderly way once a measurement is over.
func (p *process) close() {
	p.e.Close()
	p.stop()
	<-p.served
	p.tr.CloseIdleConnections()
}
