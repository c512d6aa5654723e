package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
)

// peerClients gives the HTTPS client to ask a leader's peer endpoint with
// (release's nudge and member check, a runner's member announcements): for
// a record that pins the leader's certificate (pinned peer mode, run
// -peer-addr alone), one that accepts only a certificate with that key,
// whatever its chain; for any other, the CA-based client from the peer
// flags. The pin comes from the lockfile, as in the elector (protocol.md,
// section 5).
type peerClients struct {
	base    *http.Client
	timeout time.Duration // of each pinned client's requests; 0: none (the caller's context bounds them)

	mu     sync.Mutex
	pin    string       // pinned's pin
	pinned *http.Client // for the last pin asked for
}

// forRecord returns the client to ask rec's leader with.
func (p *peerClients) forRecord(rec s3lect.Record) *http.Client {
	if rec.PeerPin == "" {
		return p.base
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinned == nil || p.pin != rec.PeerPin {
		if p.pinned != nil {
			p.pinned.CloseIdleConnections()
		}
		p.pin = rec.PeerPin
		p.pinned = &http.Client{Timeout: p.timeout, Transport: &http.Transport{TLSClientConfig: s3lect.PinnedTLS(rec.PeerPin)}}
	}
	return p.pinned
}

// closeIdle closes the clients' idle connections.
func (p *peerClients) closeIdle() {
	p.base.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinned != nil {
		p.pinned.CloseIdleConnections()
	}
}
