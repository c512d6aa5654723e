package s3lect

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// maxPeerWait caps the long-poll wait a follower may ask for.
const maxPeerWait = time.Minute

// peerRecord is the peer endpoint's answer: the lockfile record, plus the
// ETag of the leader's last write (an extension the original s3lect's
// readers ignore).
type peerRecord struct {
	Record
	ETag string `json:"etag,omitempty"`
}

// PeerHandler serves the leadership health of electors at their
// PeerHealthPath: for each, 200 with the lockfile record as JSON
// (leaderID, leaderAddr, lastUpdated, term, and the current etag) while
// that elector leads and its lease is live by its own clock; 503
// otherwise. It is a plain GET, so the original s3lect's followers can
// read it.
//
// Query parameters, all optional: lockfile names the elector (404 when
// none given here has that LockfilePath), etag and wait (a duration, at
// most a minute): when the leader's current ETag equals etag, the answer
// waits until the ETag changes, the leadership ends (after its release is
// written), or wait runs out. This package's followers always name the
// lockfile, so electors of many lockfiles (a worker pool with an elector
// per shard) share one server: a request without lockfile reaches the
// only elector when there is exactly one, as the original s3lect's
// followers expect, and gets 400 when there are several. Of electors
// given for the same lockfile, the last one serves it.
//
// Mount it in your own mux, or serve it with ServePeers.
func PeerHandler(electors ...*Elector) http.Handler {
	byKey := make(map[string]*Elector, len(electors))
	for _, e := range electors {
		byKey[e.key] = e
	}
	var only *Elector
	if len(byKey) == 1 {
		for _, e := range byKey {
			only = e
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lf := r.URL.Query().Get("lockfile")
		e := byKey[lf]
		if lf == "" {
			e = only
		}
		switch {
		case e != nil:
			e.servePeer(w, r)
		case lf == "" && len(byKey) > 1:
			http.Error(w, "several electors are served here: name one with ?lockfile=", http.StatusBadRequest)
		case lf != "":
			http.Error(w, "no elector for that lockfile here", http.StatusNotFound)
		default:
			http.NotFound(w, r)
		}
	})
}

func (e *Elector) servePeer(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != e.cfg.PeerHealthPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query() // PeerHandler has routed the lockfile parameter here
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			http.Error(w, "wait must be a non-negative duration such as 10s", http.StatusBadRequest)
			return
		}
		wait = min(d, maxPeerWait)
	}
	if q.Get("stepDown") != "" && e.snap.Load().lead != nil { // a leader's run loop runs
		// s3lect release wrote a step-down request: renew early, so that
		// the refused renewal shows it now (at most eight renewals per
		// FrequentInterval, however often this is asked).
		select {
		case e.reqs <- nudgeReq{}:
		case <-e.loopDone:
		case <-r.Context().Done():
		}
	}
	known := q.Get("etag")
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		snap := e.snap.Load()
		l := snap.lead
		if l == nil {
			notLeader(w)
			return
		}
		if !l.live() {
			if l.ctx.Err() != nil && wait > 0 {
				// Ending: answer once the release is written, so that the
				// follower's next read finds the lease vacant.
				select {
				case <-l.exited:
				case <-timer.C:
				case <-r.Context().Done():
				}
			}
			notLeader(w)
			return
		}
		if known != snap.etag || known == "" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			json.NewEncoder(w).Encode(peerRecord{Record: snap.rec, ETag: snap.etag})
			return
		}
		select { // nothing new yet: wait for a renewal or the end
		case <-snap.next:
		case <-l.ctx.Done():
		case <-timer.C:
			known = "" // answer with what there is
		case <-r.Context().Done():
			// The follower gave up, or the server is shutting down: a
			// shutdown is no answer for the leadership, so say 503.
			notLeader(w)
			return
		}
	}
}

func notLeader(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "not the leader", http.StatusServiceUnavailable)
}

// ServePeers serves h over HTTPS on ln until ctx ends. cfg must hold the
// server's certificate; for mutual TLS, set cfg.ClientAuth to
// tls.RequireAndVerifyClientCert and cfg.ClientCAs to the followers' CA.
// TLS versions below 1.2 are refused whatever cfg says. Read, write and
// header timeouts bound every connection.
//
// When ctx ends, ServePeers stops accepting, answers waiting long-polls
// with 503, waits up to five seconds for requests in flight, closes every
// connection, and returns nil. If serving fails first, it closes every
// connection and returns the error.
func ServePeers(ctx context.Context, ln net.Listener, h http.Handler, cfg *tls.Config) error {
	if cfg == nil || (len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil) {
		ln.Close()
		return errors.New("s3lect: ServePeers needs a tls.Config with the server's certificate")
	}
	cfg = cfg.Clone()
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	base, stop := context.WithCancel(context.Background())
	defer stop()
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      maxPeerWait + 10*time.Second,
		IdleTimeout:       time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          log.New(io.Discard, "", 0), // handshake noise from scanners and bad clients
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-served:
		// The listener failed: connections it accepted may still be
		// served, so close them all before returning.
		srv.Close()
		return fmt.Errorf("s3lect: serve peers on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	stop() // long-polls see their request context end
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-served
	return nil
}
