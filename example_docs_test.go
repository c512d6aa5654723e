package s3lect_test

// The Go blocks of docs/library.md, compiled here; internal/mdcheck checks
// that the Markdown shows them exactly. They are not run: they need a
// store, a network and a leader's work.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net"
	"sync"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

func Example_changes() {
	var e *s3lect.Elector
	for c := range e.Changes() { // first the current state, then every change; closed by Close
		log.Printf("leader %q term %d (me: %v)", c.Leader.LeaderID, c.Leader.Term, c.IsLeader)
	}
}

func Example_observe() {
	var (
		ctx context.Context
		e   *s3lect.Elector
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // frees the subscription
	for c := range e.Observe(ctx) {
		if c.Err != nil {
			log.Printf("cannot read the lockfile: %v", c.Err)
		}
	}
}

func Example_drain() {
	var (
		ctx  context.Context
		lead *s3lect.Leadership
		wg   sync.WaitGroup
	)
	stopWork := func() {}
	stopWork()
	wg.Wait()
	lead.Resign(ctx) // writes the released record: a follower takes over at its next read
}

func Example_shards() {
	var (
		ctx          context.Context
		st           store.Store
		shards       []string
		workerID     string
		processShard func(context.Context, int)
	)
	for i := range shards {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: fmt.Sprintf("shards/%d.json", i), ServerID: workerID})
		if err != nil {
			log.Fatal(err) // names the field that is wrong, such as an empty ServerID
		}
		go func() {
			for {
				lead, err := e.Campaign(ctx)
				if err != nil {
					return // ctx done or elector closed
				}
				processShard(lead.Context(), i)
			}
		}()
	}
}

func Example_peerMode() {
	var (
		ctx       context.Context
		st        store.Store
		id        string
		peersCA   *x509.CertPool
		ln        net.Listener
		serverTLS *tls.Config
	)
	e, err := s3lect.New(s3lect.ElectorConfig{
		Store: st, LockfilePath: "leader/x.json", ServerID: id,
		PeerMode: true, ServerAddr: "10.0.1.42:8443", // where followers reach this instance
		PeerTLS: &tls.Config{RootCAs: peersCA}, // add Certificates for mutual TLS
	})
	if err != nil {
		log.Fatal(err)
	}
	go s3lect.ServePeers(ctx, ln, s3lect.PeerHandler(e), serverTLS) // or mount s3lect.PeerHandler(e) in your own mux
}
