package s3lect_test

// Go blocks of docs/library.md about planned moves and pinned peer mode,
// compiled here; internal/mdcheck checks that the Markdown shows them
// exactly. They are not run: they need a store, a network and a leader's
// work.

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"sync"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

func Example_announce() {
	var (
		ctx  context.Context
		lead *s3lect.Leadership
		wg   sync.WaitGroup
	)
	stopWork := func() {}
	if err := lead.Announce(ctx, ""); err != nil { // about an InfrequentInterval in storage mode, at once in peer mode
		log.Printf("announcing: %v", err) // the leadership ended first, or ctx did: release as usual
	}
	stopWork()
	wg.Wait()
	lead.Resign(ctx) // followers are watching: one takes over within about FrequentInterval/16
}

func Example_peerPinned() {
	var (
		ctx context.Context
		st  store.Store
		id  string
	)
	ln, err := net.Listen("tcp", ":8443")
	if err != nil {
		log.Fatal(err)
	}
	e, err := s3lect.New(s3lect.ElectorConfig{
		Store: st, LockfilePath: "leader/x.json", ServerID: id,
		PeerMode: true, ServerAddr: "10.0.1.42:8443", // where followers reach this instance
		PeerPinned: true, // a self-signed certificate, pinned in the lockfile: nothing to make
	})
	if err != nil {
		log.Fatal(err)
	}
	go s3lect.ServePeers(ctx, ln, s3lect.PeerHandler(e), e.PeerServerTLS())
}

func Example_peerPinnedOwnCertificate() {
	var (
		st       store.Store
		id       string
		certFile string
		keyFile  string
	)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile) // any certificate: only its key is pinned
	if err != nil {
		log.Fatal(err)
	}
	e, err := s3lect.New(s3lect.ElectorConfig{
		Store: st, LockfilePath: "leader/x.json", ServerID: id,
		PeerMode: true, ServerAddr: "10.0.1.42:8443",
		PeerPinned: true, PeerCertificate: &cert,
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = e
}
