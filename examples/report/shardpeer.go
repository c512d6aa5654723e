package main

// -shard-peer: the shard table's pools in peer mode (pool.Config.PeerMode),
// each worker with a real HTTPS server of its own on a loopback port
// (certificates from devtls), killed as a process is: its store calls
// fail, every connection its peer server accepted or its peer client
// dialed is reset, its listener is closed; no graceful shutdown.

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3lect/s3lect/devtls"
	shardpool "github.com/s3lect/s3lect/pool"
)

// shardPeers is the peer mode of one shard table: the CA its workers
// trust. A nil *shardPeers is storage mode.
type shardPeers struct{ pki *devtls.PKI }

type shardPeersKey struct{}

// withShardPeers returns ctx carrying the shard table's peer mode when
// -shard-peer is set (shardTrial finds it there: its signature stays as
// it is).
func withShardPeers(ctx context.Context, o options) (context.Context, error) {
	if !o.shardPeer {
		return ctx, nil
	}
	pki, err := devtls.New()
	if err != nil {
		return nil, err
	}
	return context.WithValue(ctx, shardPeersKey{}, &shardPeers{pki}), nil
}

func shardPeersOf(ctx context.Context) *shardPeers {
	ps, _ := ctx.Value(shardPeersKey{}).(*shardPeers)
	return ps
}

// shardPeer is one worker's peer server and client. A nil *shardPeer (a
// worker in storage mode) does nothing.
type shardPeer struct {
	ps     *shardPeers
	ln     net.Listener
	srv    *http.Server
	tr     *http.Transport
	served chan struct{}
	asked  atomic.Uint64 // requests the server received

	mu    sync.Mutex
	conns map[net.Conn]struct{} // every connection accepted or dialed
	dead  bool
}

// start opens a worker's listener on a loopback port of its own and
// fills in cfg's peer mode: ServerAddr, and a PeerClient whose dials are
// tracked. serve starts the server once the pool exists.
func (ps *shardPeers) start(cfg *shardpool.Config) (*shardPeer, error) {
	if ps == nil {
		return nil, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sp := &shardPeer{ps: ps, conns: map[net.Conn]struct{}{}, served: make(chan struct{})}
	sp.ln = &shardPeerListener{ln, sp}
	sp.tr = &http.Transport{
		TLSClientConfig:     ps.pki.ClientTLS(),
		TLSHandshakeTimeout: cfg.FrequentInterval,
		MaxIdleConnsPerHost: 2,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return sp.track(c)
		},
	}
	cfg.PeerMode, cfg.ServerAddr = true, ln.Addr().String()
	cfg.PeerClient = &http.Client{Transport: sp.tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return sp, nil
}

// serve serves p's PeerHandler over HTTPS, counting the requests.
func (sp *shardPeer) serve(p *shardpool.Pool) {
	if sp == nil {
		return
	}
	h := shardpool.PeerHandler(p)
	sp.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sp.asked.Add(1)
			h.ServeHTTP(w, r)
		}),
		TLSConfig:         sp.ps.pki.ServerTLS(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // resets after a kill are expected
	}
	go func() { defer close(sp.served); sp.srv.ServeTLS(sp.ln, "", "") }()
}

// requests returns how many requests the server has received.
func (sp *shardPeer) requests() uint64 {
	if sp == nil {
		return 0
	}
	return sp.asked.Load()
}

// track remembers c so that kill can reset it; after the kill c is
// reset at once.
func (sp *shardPeer) track(c net.Conn) (net.Conn, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.dead {
		reset(c)
		return nil, fmt.Errorf("worker killed")
	}
	sp.conns[c] = struct{}{}
	return c, nil
}

// kill ends the worker's peer side as SIGKILL would: every connection
// (accepted or dialed) is reset, the listener closed; no answer, no
// shutdown.
func (sp *shardPeer) kill() {
	if sp == nil {
		return
	}
	sp.mu.Lock()
	sp.dead = true
	conns := sp.conns
	sp.conns = nil
	sp.mu.Unlock()
	for c := range conns {
		reset(c)
	}
	sp.ln.Close()
}

// close ends the server and the client once the trial is over (after
// the pool's Run has returned).
func (sp *shardPeer) close() {
	if sp == nil {
		return
	}
	if sp.srv == nil {
		sp.ln.Close()
	} else {
		sp.srv.Close()
		<-sp.served
	}
	sp.tr.CloseIdleConnections()
}

// shardPeerListener hands every accepted connection to its worker.
type shardPeerListener struct {
	net.Listener
	sp *shardPeer
}

func (l *shardPeerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c, err := l.sp.track(c); err == nil {
			return c, nil
		}
	}
}

// shardPeerNote says, under the shard table's heading, what peer mode
// changes; shardPeerHeader and shardPeerCell add its column.
func shardPeerNote(o options, w io.Writer) {
	if !o.shardPeer {
		return
	}
	fmt.Fprintf(w, "Peer mode (-shard-peer, pool.Config.PeerMode): every worker serves pool.PeerHandler over HTTPS on a loopback port of its own (a dev CA's certificates) "+
		"and, after each renewal of its session, reports it to the coordinator, reading its page only when the answer names another; "+
		"the coordinator lists the store every LeaderTimeout/2, and the coordinator's election runs in peer mode too. "+
		"A killed worker's peer connections, accepted and dialed, are reset and its listener closed. "+
		"Peer requests are the requests the workers' peer servers received (reports and the election's), per worker per FrequentInterval.\n\n")
}

func shardPeerHeader(o options) string {
	if !o.shardPeer {
		return ""
	}
	return " peer requests per worker per FrequentInterval |"
}

func shardPeerDash(o options) string {
	if !o.shardPeer {
		return ""
	}
	return "---|"
}

func shardPeerCell(o options, r shardResult) string {
	if !o.shardPeer {
		return ""
	}
	return fmt.Sprintf(" %.2f |", r.perWorker.hub)
}
