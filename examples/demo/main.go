// Command demo shows s3lect electing a leader, failing over after a crash
// and handing over on resignation, with a live timeline.
//
// A crash is a killed process: the leader's store calls fail (through
// store/faultstore), every connection its peer server accepted or its peer
// client dialed is reset, its listener is closed, and it writes no release
// and answers no 503. Failover is timed from that moment to the next
// leader, and handover from the Resign call: each step from the event it
// names to the first leadership of a higher term won after it. On a
// machine too loaded for the demo's speed a lease may run out before the
// demo acts; it then crashes (or resigns) whoever leads at that moment,
// and if a takeover still beat the step it says so rather than print a
// negative time. The demo never waits silently: a watcher prints the store errors
// it sees (Change.Err); a permanent one, such as a bucket that does not
// exist, stops the demo with the fix, and no leader within ten lease times
// stops it with the last store error.
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
//	-store URL            elect on the lockfile the URL names: s3://bucket/key,
//	                      gs://bucket/key, azblob://container/key or
//	                      nats://host:port/bucket/key (package store/storeurl);
//	                      needs the build tag cloud, which links the clouds' SDKs:
//	                      go run -tags cloud ./examples/demo -store gs://b/k
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
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/natskv"
	"github.com/s3lect/s3lect/store/s3store"
)

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

type options struct {
	n         int
	speed     int
	peer      bool
	bucket    string
	pathStyle bool
	natsURL   string
	storeURL  string
	key       string
	svg       string
	metrics   string
	patience  time.Duration // how long a step may wait for a leader before the demo gives up (0: ten leases and 5s)
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
	flag.StringVar(&o.storeURL, "store", "", "elect on the lockfile this URL names: s3://, gs://, azblob:// or nats:// (build with -tags cloud)")
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

// candidate is one instance of the service: an elector, its store
// connection and, in peer mode, its peer server and client. kill crashes
// it as SIGKILL would.
type candidate struct {
	id     string
	conn   *faultstore.Store
	e      *s3lect.Elector
	ln     net.Listener    // its peer listener (peer mode)
	tr     *http.Transport // its peer client's
	stop   context.CancelFunc
	served chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{} // every connection accepted or dialed
	dead  bool
}

// track remembers c so that kill can reset it; a dead candidate's new
// connections are reset at once.
func (c *candidate) track(conn net.Conn) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		reset(conn)
		return nil, errors.New("process killed")
	}
	c.conns[conn] = struct{}{}
	return conn, nil
}

// kill crashes the candidate: its store calls fail (those in flight too),
// every connection it accepted or dialed is reset, its listener goes, and
// it says no goodbye: no release, no 503.
func (c *candidate) kill() {
	c.conn.Cut()
	c.mu.Lock()
	c.dead = true
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for conn := range conns {
		reset(conn)
	}
	if c.ln != nil {
		c.ln.Close()
	}
}

// reset closes conn so that the other side reads RST, not FIN.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// trackedListener hands every accepted connection to its candidate.
type trackedListener struct {
	net.Listener
	c *candidate
}

func (l trackedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if conn, err := l.c.track(conn); err == nil {
			return conn, nil
		}
	}
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
	if n := btoi(o.bucket != "") + btoi(o.natsURL != "") + btoi(o.storeURL != ""); n > 1 {
		return errors.New("choose one of -store, -bucket and -nats")
	}
	base, where, closeStore, err := openStore(ctx, &o)
	if err != nil {
		return err
	}
	defer closeStore()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
	fmt.Fprintf(w, "s3lect demo: %d candidates on %s, %s, LeaderTimeout %v\n", o.n, where, mode, lt)
	fmt.Fprintf(w, "A crash here is a killed process: its store calls fail, its connections are reset, its listener is gone, and it says no goodbye. Failover is timed from the crash to the next leader.\n\n")

	var pki *devtls.PKI
	if o.peer {
		if pki, err = devtls.New(); err != nil {
			return err
		}
	}
	wins := make(chan win, o.n)
	// fatal carries a store failure that retrying will not fix, from a
	// Campaign or the watcher; the demo stops and says what to fix.
	fatal := make(chan error, o.n+1)
	var cands []*candidate
	var wg sync.WaitGroup
	defer wg.Wait()
	// A candidate that resigned stands aside until the handover is over,
	// so that the handover shows another candidate taking the lease.
	handedOver := make(chan struct{})
	var handOnce sync.Once
	endHandover := func() { handOnce.Do(func() { close(handedOver) }) }
	defer endHandover()
	for i := range o.n {
		c := &candidate{id: fmt.Sprintf("node-%d", i+1), conn: faultstore.New(base), served: make(chan struct{}), conns: map[net.Conn]struct{}{}}
		ccfg := cfg
		ccfg.Store, ccfg.ServerID, ccfg.ServerAddr = c.conn, c.id, "127.0.0.1:0"
		if o.peer {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			c.ln = trackedListener{ln, c}
			c.tr = &http.Transport{
				TLSClientConfig:     pki.ClientTLS(),
				TLSHandshakeTimeout: lt / 2,
				MaxIdleConnsPerHost: 1,
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return c.track(conn)
				},
			}
			defer c.tr.CloseIdleConnections()
			ccfg.ServerAddr = ln.Addr().String()
			ccfg.PeerClient = &http.Client{
				Transport:     c.tr,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
		}
		e, err := s3lect.New(ccfg)
		if err != nil {
			return err
		}
		c.e = e
		defer e.Close()
		sctx, stop := context.WithCancel(ctx)
		c.stop = stop
		if c.ln != nil {
			go func() { defer close(c.served); s3lect.ServePeers(sctx, c.ln, s3lect.PeerHandler(e), pki.ServerTLS()) }()
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
					if store.IsPermanent(err) {
						tl.add(c.id, "", 0, "campaign failed: %v", err)
						fatal <- err
					}
					return // closed, or the demo is stopping
				}
				tl.add(c.id, "lead", lead.Term(), "became leader, term %d", lead.Term())
				wins <- win{c, lead, time.Now()}
				<-lead.Context().Done()
				tl.add(c.id, "end", lead.Term(), "stopped leading: %v", context.Cause(lead.Context()))
				if c.conn.IsCut() {
					return
				}
				if errors.Is(context.Cause(lead.Context()), s3lect.ErrResigned) {
					<-handedOver
				}
			}
		}()
	}

	// A watcher that never campaigns prints what the group sees, and any
	// store failure it meets while reading: never a silent wait.
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
	changes := we.Observe(ctx)
	var lastErr struct {
		sync.Mutex
		err error
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var shown string
		for c := range changes {
			switch {
			case c.Err != nil:
				lastErr.Lock()
				lastErr.err = c.Err
				lastErr.Unlock()
				if msg := c.Err.Error(); msg != shown {
					shown = msg
					tl.add("watch", "", 0, "cannot read the store: %v", c.Err)
				}
				if store.IsPermanent(c.Err) {
					fatal <- c.Err
					return
				}
				continue
			case shown != "":
				shown = ""
				tl.add("watch", "", 0, "the store answers again")
			}
			if c.Leader.LeaderID == "" {
				tl.add("watch", "", 0, "no live leader")
			} else {
				tl.add("watch", "", 0, "leader is %s (term %d)", c.Leader.LeaderID, c.Leader.Term)
			}
		}
	}()

	// next waits for the next leader, a permanent store failure, or a
	// deadline past any failover, and says which.
	patience := o.patience
	if patience == 0 {
		patience = 10*lt + 5*time.Second
	}
	next := func(what string) (win, error) {
		select {
		case wn := <-wins:
			return wn, nil
		case err := <-fatal:
			return win{}, fmt.Errorf("%s: the store refuses us, and retrying will not fix it: %w", what, err)
		case <-time.After(patience):
			lastErr.Lock()
			err := lastErr.err
			lastErr.Unlock()
			if err != nil {
				return win{}, fmt.Errorf("%s: no leader after %v; the last store error was: %w (check that the store is running and reachable at the endpoint, and the credentials)", what, patience, err)
			}
			return win{}, fmt.Errorf("%s: no leader after %v, although the store answers", what, patience)
		case <-ctx.Done():
			return win{}, ctx.Err()
		}
	}

	// Each step is timed from the event it names to the first leadership
	// that began after it: a leadership of a higher term than the one
	// crashed or resigned, won after the crash or the Resign call. A win
	// before it (under load a lease can run out before the demo acts, and
	// a candidate takes over) is never taken for the step's outcome.
	ws := &winners{wins: wins, next: next}
	if _, err := ws.live("electing the first leader"); err != nil {
		return err
	}
	time.Sleep(4 * lt)

	leader, err := ws.live("before the crash")
	if err != nil {
		return err
	}
	tl.add(leader.c.id, "crash", 0, "CRASH: process killed (store calls fail, connections reset, listener gone, no goodbye)")
	crashed := time.Now()
	leader.c.kill()
	second, err := ws.after(leader.lead.Term(), "failing over")
	if err != nil {
		return err
	}
	tl.add("demo", "", 0, "%s", stepTook("failover", "from the crash to the next leader", "the crash", leader, second, crashed, lt))
	time.Sleep(4 * lt)

	leader, err = ws.live("before the resignation")
	if err != nil {
		return err
	}
	tl.add(leader.c.id, "resign", 0, "RESIGN: releasing the lockfile")
	resigned := time.Now()
	if err := leader.lead.Resign(ctx); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	third, err := ws.after(leader.lead.Term(), "handing over")
	if err != nil {
		return err
	}
	tl.add("demo", "", 0, "%s", stepTook("handover", "from the Resign call to the next leader", "the Resign call", leader, third, resigned, lt))
	endHandover()
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

// winners follows the candidates' wins, in the order they were won.
type winners struct {
	wins   <-chan win
	next   func(what string) (win, error) // waits for the next win
	latest win                            // the last win taken from wins
}

// live returns the leadership that is live now: the latest win, if its
// leadership has not ended, or else the next one.
func (ws *winners) live(what string) (win, error) {
	for {
		for drained := false; !drained; {
			select {
			case wn := <-ws.wins:
				ws.latest = wn
			default:
				drained = true
			}
		}
		if ws.latest.lead != nil && ws.latest.lead.Context().Err() == nil {
			return ws.latest, nil
		}
		wn, err := ws.next(what)
		if err != nil {
			return win{}, err
		}
		ws.latest = wn
	}
}

// after returns the first win of a term above term: the leadership that
// followed the one of term.
func (ws *winners) after(term uint64, what string) (win, error) {
	for {
		wn, err := ws.next(what)
		if err != nil {
			return win{}, err
		}
		ws.latest = wn
		if wn.lead.Term() > term {
			return wn, nil
		}
	}
}

// stepTook says how long a step took, from at (the crash or the Resign
// call, named by event) to next's win, the leadership that followed
// old's. A next won before at is said to be so, never timed as a
// negative duration: old's lease ran out between the demo's check that
// it was live and the step (a machine too loaded for the demo's speed).
func stepTook(step, span, event string, old, next win, at time.Time, lt time.Duration) string {
	if d := next.at.Sub(at); d >= 0 {
		return fmt.Sprintf("%s took %v, %s (LeaderTimeout %v)", step, d.Round(time.Millisecond), span, lt)
	}
	return fmt.Sprintf("%s not timed: %s took over %v before %s, as %s's lease had run out (this machine is too slow for the demo's speed; try a lower -speed)",
		step, next.c.id, at.Sub(next.at).Round(time.Millisecond), event, old.c.id)
}

// openStore returns the store every candidate shares, a description, and
// how to close it.
func openStore(ctx context.Context, o *options) (store.Store, string, func(), error) {
	switch {
	case o.storeURL != "":
		// The URL names the lockfile too, in place of -key.
		st, where, key, closer, err := openURL(ctx, o.storeURL, o.pathStyle)
		if err != nil {
			return nil, "", nil, err
		}
		o.key = key
		return st, where, closer, nil
	case o.bucket != "":
		st, err := s3store.FromEnvironment(ctx, o.bucket, o.pathStyle)
		if err != nil {
			return nil, "", nil, err
		}
		return st, "S3 bucket " + o.bucket, st.CloseIdleConnections, nil
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
