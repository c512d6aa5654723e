// Command demo shows s3lect electing a leader, failing over after a crash
// and handing over on resignation, with a live timeline.
//
// By default it runs three candidates in one process on the in-memory
// store, with every interval scaled down tenfold, and exits by itself in
// about twenty seconds:
//
//	go run ./examples/demo
//
// Flags:
//
//	-n 5                  five candidates
//	-real                 the default timings (renew every 5s, lease 15s);
//	                      -speed N divides them by N instead (default 10)
//	-peer                 peer mode: candidates serve HTTPS on loopback and stable
//	                      followers ask the leader instead of the store
//	-bucket B             elect on S3 bucket B, from the standard AWS environment
//	                      (AWS_ENDPOINT_URL_S3 for MinIO; add -path-style)
//	-nats nats://host:4222  elect on a NATS JetStream KV bucket (S3LECT_DEMO)
//	-svg timeline.svg     also draw the timeline as an SVG chart
//	-metrics 127.0.0.1:9464  serve every elector's metrics (/metrics) and liveness (/healthz)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/cutstore"
	"github.com/s3lect/s3lect/internal/devtls"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/natskv"
	"github.com/s3lect/s3lect/store/s3store"
)

type options struct {
	n         int
	speed     int
	peer      bool
	bucket    string
	pathStyle bool
	natsURL   string
	key       string
	svg       string
	metrics   string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 3, "number of candidates")
	flag.IntVar(&o.speed, "speed", 10, "divide the default intervals (5s / 30s / 15s) by this")
	real := flag.Bool("real", false, "use the default timings: -speed 1")
	flag.BoolVar(&o.peer, "peer", false, "peer mode: followers ask the leader over HTTPS on loopback")
	flag.StringVar(&o.bucket, "bucket", "", "elect on this S3 bucket (standard AWS environment; AWS_ENDPOINT_URL_S3 for MinIO)")
	flag.BoolVar(&o.pathStyle, "path-style", false, "path-style S3 addressing (MinIO)")
	flag.StringVar(&o.natsURL, "nats", "", "elect on a NATS JetStream KV bucket at this URL")
	flag.StringVar(&o.key, "key", "leader/demo.json", "lockfile key")
	flag.StringVar(&o.svg, "svg", "", "write the timeline as an SVG chart to this file")
	flag.StringVar(&o.metrics, "metrics", "", "serve metrics and liveness over HTTP on this host:port")
	flag.Parse()
	if *real {
		o.speed = 1
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// candidate is one instance of the service. Its store connection can be
// cut to simulate a crash.
type candidate struct {
	id     string
	conn   *cutstore.Store
	e      *s3lect.Elector
	stop   context.CancelFunc // its peer server
	served chan struct{}
}

type win struct {
	c    *candidate
	lead *s3lect.Leadership
	at   time.Time
}

func run(ctx context.Context, o options, w io.Writer) error {
	if o.n < 2 {
		return errors.New("-n must be at least 2 so that someone can take over")
	}
	if o.speed < 1 || o.speed > 100 {
		return errors.New("-speed must be between 1 and 100")
	}
	if o.bucket != "" && o.natsURL != "" {
		return errors.New("choose -bucket or -nats, not both")
	}
	base, where, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	speed := time.Duration(o.speed)
	cfg := s3lect.ElectorConfig{
		LockfilePath:       o.key,
		FrequentInterval:   s3lect.DefaultFrequentInterval / speed,
		InfrequentInterval: s3lect.DefaultInfrequentInterval / speed,
		LeaderTimeout:      s3lect.DefaultLeaderTimeout / speed,
		PeerMode:           o.peer,
		Logger:             slog.New(slog.DiscardHandler),
	}
	lt := cfg.LeaderTimeout
	tl := &timeline{w: w, start: time.Now()}
	mode := "storage mode"
	if o.peer {
		mode = "peer mode (HTTPS on loopback)"
	}
	fmt.Fprintf(w, "s3lect demo: %d candidates on %s, %s, LeaderTimeout %v\n\n", o.n, where, mode, lt)

	var pki *devtls.PKI
	if o.peer {
		if pki, err = devtls.New(); err != nil {
			return err
		}
	}
	wins := make(chan win, o.n)
	var cands []*candidate
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range o.n {
		c := &candidate{id: fmt.Sprintf("node-%d", i+1), conn: cutstore.New(base), served: make(chan struct{})}
		ccfg := cfg
		ccfg.Store, ccfg.ServerID, ccfg.ServerAddr = c.conn, c.id, "127.0.0.1:0"
		var ln net.Listener
		if o.peer {
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return err
			}
			ccfg.ServerAddr, ccfg.PeerTLS = ln.Addr().String(), pki.ClientTLS()
		}
		e, err := s3lect.New(ccfg)
		if err != nil {
			return err
		}
		c.e = e
		defer e.Close()
		sctx, stop := context.WithCancel(ctx)
		c.stop = stop
		if ln != nil {
			go func() { defer close(c.served); s3lect.ServePeers(sctx, ln, e.PeerHandler(), pki.ServerTLS()) }()
		} else {
			close(c.served)
		}
		defer func() { stop(); <-c.served }()
		cands = append(cands, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lead, err := e.Campaign(ctx)
				if err != nil {
					return // closed
				}
				tl.add(c.id, "lead", lead.Term(), "became leader, term %d", lead.Term())
				wins <- win{c, lead, time.Now()}
				<-lead.Done()
				tl.add(c.id, "end", lead.Term(), "stopped leading: %v", context.Cause(lead.Context()))
				if c.conn.IsCut() {
					return
				}
			}
		}()
	}

	// A watcher that never campaigns prints what the group sees.
	watcher := cfg
	watcher.Store, watcher.ServerID, watcher.PeerMode = base, "watcher", false
	we, err := s3lect.New(watcher)
	if err != nil {
		return err
	}
	defer we.Close()
	stopMetrics, err := serveMetrics(o.metrics, w, append(electorsOf(cands), we))
	if err != nil {
		return err
	}
	defer stopMetrics()
	changes := we.Changes()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for c := range changes {
			if c.Leader.LeaderID == "" {
				tl.add("watch", "", 0, "no live leader")
			} else {
				tl.add("watch", "", 0, "leader is %s (term %d)", c.Leader.LeaderID, c.Leader.Term)
			}
		}
	}()

	first := <-wins
	time.Sleep(4 * lt)

	tl.add(first.c.id, "crash", 0, "CRASH: cut off from the store, never resigns")
	crashed := time.Now()
	first.c.conn.Cut()
	first.c.stop()
	second := <-wins
	tl.add("demo", "", 0, "failover took %.2fs (LeaderTimeout %v)", second.at.Sub(crashed).Seconds(), lt)
	time.Sleep(4 * lt)

	tl.add(second.c.id, "resign", 0, "RESIGN: releasing the lockfile")
	resigned := time.Now()
	if err := second.lead.Resign(ctx); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	third := <-wins
	tl.add("demo", "", 0, "handover took %.2fs", third.at.Sub(resigned).Seconds())
	time.Sleep(2 * lt)
	tl.add("demo", "", 0, "done; closing every elector")
	for _, c := range cands {
		c.e.Close()
	}
	we.Close()
	wg.Wait()
	if o.svg != "" {
		ids := make([]string, len(cands))
		for i, c := range cands {
			ids[i] = c.id
		}
		if err := os.WriteFile(o.svg, tl.svg(ids), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "\ntimeline chart written to %s\n", o.svg)
	}
	return nil
}

// openStore returns the store every candidate shares, a description, and
// how to close it.
func openStore(ctx context.Context, o options) (store.Store, string, func(), error) {
	switch {
	case o.bucket != "":
		st, err := s3store.FromEnvironment(ctx, o.bucket, o.pathStyle)
		if err != nil {
			return nil, "", nil, err
		}
		return st, "S3 bucket " + o.bucket, st.(*s3store.Store).CloseIdleConnections, nil
	case o.natsURL != "":
		nc, err := nats.Connect(o.natsURL)
		if err != nil {
			return nil, "", nil, fmt.Errorf("connect to NATS: %w", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, "", nil, err
		}
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "S3LECT_DEMO"})
		if err != nil {
			nc.Close()
			return nil, "", nil, fmt.Errorf("open KV bucket S3LECT_DEMO: %w", err)
		}
		return natskv.New(kv), "NATS KV bucket S3LECT_DEMO", nc.Close, nil
	default:
		return memstore.New(), "the in-memory store", func() {}, nil
	}
}
