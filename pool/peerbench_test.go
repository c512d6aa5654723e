package pool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// BenchmarkCrashFailover measures, in real time on loopback, how long a
// crashed worker's shards take to be led again (in LeaderTimeouts), in
// storage and in peer mode: 3 workers over 12 shards, FrequentInterval
// 200 ms, LeaderTimeout 1 s; the crash is a worker whose store calls all
// fail from one moment (it then reports nothing either), at five phases
// of the renewal cycle a fifth of a FrequentInterval apart. It reports the
// median of the 5 crashes. A machine under load slows it.
//
//	go test ./pool -run '^$' -bench BenchmarkCrashFailover -benchtime 1x
func BenchmarkCrashFailover(b *testing.B) {
	for _, peer := range []bool{false, true} {
		b.Run(fmt.Sprintf("peer=%v", peer), func(b *testing.B) {
			for range b.N {
				var lts []float64
				for run := range 5 {
					lts = append(lts, crashOnce(b, peer, run, false, false))
				}
				slices.Sort(lts)
				b.ReportMetric(lts[len(lts)/2], "LT-median")
				b.ReportMetric(lts[len(lts)-1], "LT-max")
			}
		})
	}
}

// BenchmarkLeaveHandover is BenchmarkCrashFailover with a worker whose
// Run ends (its Work returns at once) instead of a crash: how long until
// its shards are led elsewhere, in FrequentIntervals (the target: within
// its drain time, here 0, plus one FrequentInterval).
//
//	go test ./pool -run '^$' -bench BenchmarkLeaveHandover -benchtime 1x
func BenchmarkLeaveHandover(b *testing.B) {
	for _, peer := range []bool{false, true} {
		b.Run(fmt.Sprintf("peer=%v", peer), func(b *testing.B) {
			for range b.N {
				var fis []float64
				for run := range 5 {
					fis = append(fis, crashOnce(b, peer, run, true, false)*5) // LT = 5 FI
				}
				slices.Sort(fis)
				b.ReportMetric(fis[len(fis)/2], "FI-median")
				b.ReportMetric(fis[len(fis)-1], "FI-max")
			}
		})
	}
}

// BenchmarkCoordinatorCrash is BenchmarkCrashFailover with the
// coordinator crashed: how long until its own shards are led elsewhere
// (the target: within 2 × LeaderTimeout).
//
//	go test ./pool -run '^$' -bench BenchmarkCoordinatorCrash -benchtime 1x
func BenchmarkCoordinatorCrash(b *testing.B) {
	for _, peer := range []bool{false, true} {
		b.Run(fmt.Sprintf("peer=%v", peer), func(b *testing.B) {
			for range b.N {
				var lts []float64
				for run := range 5 {
					lts = append(lts, crashOnce(b, peer, run, false, true))
				}
				slices.Sort(lts)
				b.ReportMetric(lts[len(lts)/2], "LT-median")
				b.ReportMetric(lts[len(lts)-1], "LT-max")
			}
		})
	}
}

// crashOnce crashes (or, with leave, stops) a worker, the coordinator
// with coordinator, else one that does not coordinate, and returns how
// long until its shards were led again, in LeaderTimeouts.
func crashOnce(b *testing.B, peer bool, run int, leave, coordinator bool) float64 {
	const fi, lt = 200 * time.Millisecond, time.Second
	shared := memstore.New()
	var shards []string
	for i := range 12 {
		shards = append(shards, fmt.Sprintf("shard-%02d", i))
	}
	var pools []*Pool
	var srvs []*httptest.Server // peer mode: each worker's PeerHandler
	var stores []*grayStore
	var stops []context.CancelFunc
	var errs []chan error
	for i := range 3 {
		gs := &grayStore{Store: shared}
		cfg := Config{Store: gs, Prefix: fmt.Sprintf("pools/bench%d/", run), ID: fmt.Sprintf("w%d", i), Shards: shards,
			FrequentInterval: fi, LeaderTimeout: lt, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) { <-ctx.Done() }}
		var srv *httptest.Server
		if peer {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv = httptest.NewUnstartedServer(nil)
			srv.Listener = ln
			cfg.PeerMode, cfg.PeerPinned, cfg.ServerAddr = true, true, ln.Addr().String()
		}
		p, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if srv != nil {
			srv.Config.Handler, srv.TLS = PeerHandler(p), p.PeerServerTLS()
			srv.StartTLS()
			defer srv.Close()
			srvs = append(srvs, srv)
		}
		ctx, stop := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		pools, stores, stops, errs = append(pools, p), append(stores, gs), append(stops, stop), append(errs, errc)
	}
	defer func() {
		for i := range pools {
			stores[i].mode.Store(0)
			stops[i]()
			<-errs[i]
		}
	}()
	ledBy := func(live []int) int {
		by := map[string]bool{}
		for _, i := range live {
			for _, s := range pools[i].Leading() {
				by[s] = true
			}
		}
		return len(by)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ledBy([]int{0, 1, 2}) < 12 || pools[0].coordinating.Load() == pools[1].coordinating.Load() && pools[1].coordinating.Load() == pools[2].coordinating.Load() {
		if time.Now().After(deadline) {
			b.Fatal("no spread in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3*fi + time.Duration(run)*fi/5) // settled; each run crashes at another phase of the renewals
	victim := 0
	for pools[victim].coordinating.Load() != coordinator {
		victim++
	}
	var live []int
	for i := range pools {
		if i != victim {
			live = append(live, i)
		}
	}
	crash := time.Now()
	if leave {
		stops[victim]()
	} else {
		stores[victim].mode.Store(2)
		if peer {
			// A killed process serves nothing either: its peer server's
			// connections reset, and new ones are refused.
			srvs[victim].CloseClientConnections()
			srvs[victim].Listener.Close()
		}
	}
	var elected time.Duration
	for ledBy(live) < 12 {
		if elected == 0 && coordinator && slices.ContainsFunc(live, func(i int) bool { return pools[i].coordinating.Load() }) {
			elected = time.Since(crash)
			b.Logf("a new coordinator %.2f × LeaderTimeout after the crash", float64(elected)/float64(lt))
		}
		if time.Since(crash) > 30*time.Second {
			b.Fatal("the crashed worker's shards not led again in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return float64(time.Since(crash)) / float64(lt)
}
