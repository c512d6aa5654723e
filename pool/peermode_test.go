package pool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestPeerModeReadsNoPageWhileStable runs three workers in peer mode over
// HTTPS on loopback (a real network: not in a synctest bubble) and checks
// that every shard is led once, and that once the pool is stable a worker
// that does not coordinate reads its page far less than once an interval
// (storage mode reads it every interval): its reports tell it the page is
// unchanged. It asserts no timing, only the spread and a loose count.
// Each case takes about 4 s of real time (a cold start, then 12 intervals
// of 200 ms), nearly all of it waiting, with or without -race.
func TestPeerModeReadsNoPageWhileStable(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(fmt.Sprintf("pinned=%v", pinned), func(t *testing.T) { peerMode(t, pinned) })
	}
}

func peerMode(t *testing.T, pinned bool) {
	st := memstore.New()
	var shards []string
	for i := range 12 {
		shards = append(shards, fmt.Sprintf("shard-%02d", i))
	}
	const fi = 200 * time.Millisecond
	var pools []*Pool
	var stops []context.CancelFunc
	var errs []chan error
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(nil)
		srv.Listener = ln
		cfg := Config{Store: st, Prefix: "pools/peer/", ID: fmt.Sprintf("w%d", i), Shards: shards,
			FrequentInterval: fi, LeaderTimeout: 5 * fi, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			PeerMode: true, ServerAddr: ln.Addr().String(), PeerPinned: pinned,
			Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) { <-ctx.Done() }}
		if !pinned {
			cfg.PeerClient = httptestClient(t) // httptest's one certificate, for 127.0.0.1
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		srv.Config.Handler = PeerHandler(p)
		srv.TLS = p.PeerServerTLS() // nil unless pinned: httptest's certificate
		srv.StartTLS()
		defer srv.Close()
		ctx, stop := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		pools, stops, errs = append(pools, p), append(stops, stop), append(errs, errc)
	}
	defer func() {
		for i := range pools {
			stops[i]()
			if err := <-errs[i]; err != nil {
				t.Errorf("Run() of worker %d = %v", i, err)
			}
		}
	}()
	spread := func() bool {
		n := 0
		for _, p := range pools {
			l := len(p.Leading())
			if l != 4 {
				return false
			}
			n += l
		}
		return n == 12
	}
	deadline := time.Now().Add(30 * time.Second)
	for !spread() {
		if time.Now().After(deadline) {
			t.Fatalf("not spread 4/4/4 after 30 s: %v %v %v", pools[0].Leading(), pools[1].Leading(), pools[2].Leading())
		}
		time.Sleep(fi / 4)
	}
	// A window counts only if the pool stayed stable through it: at
	// FrequentInterval 200 ms a machine too loaded to renew in time lets a
	// session lapse and its shards move, which is no steady state. Up to
	// five windows are tried; the counts of the first stable one are
	// checked.
	const intervals = 12
	for window := 1; ; window++ {
		before := make([]Stats, len(pools))
		for i, p := range pools {
			before[i] = p.Stats()
		}
		time.Sleep(intervals * fi)
		after := make([]Stats, len(pools))
		for i, p := range pools {
			after[i] = p.Stats()
		}
		if !spread() {
			if window == 5 {
				t.Fatalf("the spread changed in each of %d windows of %d intervals: the pool never stayed stable", window, intervals)
			}
			t.Logf("window %d: the spread changed (a session lapsed on the loaded machine?); measuring again", window)
			for !spread() {
				if time.Now().After(deadline.Add(time.Duration(window) * 30 * time.Second)) {
					t.Fatalf("not spread 4/4/4 again: %v %v %v", pools[0].Leading(), pools[1].Leading(), pools[2].Leading())
				}
				time.Sleep(fi / 4)
			}
			continue
		}
		for i, p := range pools {
			gets, puts := after[i].Gets-before[i].Gets, after[i].Puts-before[i].Puts
			coordinating := p.coordinating.Load()
			t.Logf("worker %d (coordinating %v): %d GETs, %d PUTs, %d listings in %d intervals", i, coordinating, gets, puts, after[i].Lists-before[i].Lists, intervals)
			if !coordinating && gets > intervals/4 {
				t.Errorf("worker %d made %d GETs in %d intervals of a stable pool; want at most %d (peer mode reads no page while stable)", i, gets, intervals, intervals/4)
			}
		}
		return
	}
}

// httptestClient returns a client that trusts httptest's TLS certificate.
func httptestClient(t *testing.T) *http.Client {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}
