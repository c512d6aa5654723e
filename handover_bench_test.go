package s3lect

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// BenchmarkHandover measures graceful handovers on a real S3 store (MinIO,
// as internal/s3test finds it), in storage and in peer mode, at the
// default intervals divided by 25 with InfrequentInterval =
// FrequentInterval (200 ms, 200 ms, 600 ms): three electors campaign
// again as soon as their leadership ends (the README's loop), and the
// leader resigns. It reports the share of handovers that land on another
// member (other-%) and the time from Resign to the next Campaign's
// return (ms-median, ms-max):
//
//	go test -run '^$' -bench BenchmarkHandover -benchtime 50x .
func BenchmarkHandover(b *testing.B) {
	for _, peer := range []bool{false, true} {
		b.Run(map[bool]string{false: "storage", true: "peer"}[peer], func(b *testing.B) {
			benchHandover(b, peer)
		})
	}
}

func benchHandover(b *testing.B, peer bool) {
	st := s3store.New(s3test.NewClient(b, nil, "", ""), s3test.Bucket(b))
	key := "bench/handover-" + map[bool]string{false: "storage", true: "peer"}[peer] + "-" + lease.NewID() + ".json"
	pki, err := devtls.New()
	if err != nil {
		b.Fatal(err)
	}
	type win struct {
		id   string
		lead *Leadership
		at   time.Time
	}
	wins := make(chan win)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var closers []func()
	defer func() {
		cancel()
		for _, c := range closers {
			c()
		}
	}()
	for _, id := range []string{"a", "b", "c"} {
		cfg := ElectorConfig{Store: st, LockfilePath: key, ServerID: id, FrequentInterval: 200 * time.Millisecond,
			InfrequentInterval: 200 * time.Millisecond, LeaderTimeout: 600 * time.Millisecond, Logger: quietLogger}
		var ln net.Listener
		if peer {
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			cfg.PeerMode, cfg.ServerAddr, cfg.PeerTLS = true, ln.Addr().String(), pki.ClientTLS()
		}
		e, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		served := make(chan struct{})
		if peer {
			go func() { defer close(served); ServePeers(ctx, ln, PeerHandler(e), pki.ServerTLS()) }()
		} else {
			close(served)
		}
		closers = append(closers, func() { e.Close(); <-served })
		go func() {
			for {
				l, err := e.Campaign(ctx)
				if err != nil {
					return
				}
				select {
				case wins <- win{id, l, time.Now()}:
				case <-ctx.Done():
					return
				}
				<-l.Context().Done()
			}
		}()
	}
	var (
		took  []time.Duration
		other int
	)
	w := <-wins
	b.ResetTimer()
	for i := range b.N {
		// Lead for a while, at a phase that moves through the renewal cycle.
		time.Sleep(time.Second + time.Duration(i%7)*200*time.Millisecond/7)
		begun := time.Now()
		w.lead.Resign(context.Background())
		next := <-wins
		took = append(took, next.at.Sub(begun))
		if next.id != w.id {
			other++
		}
		w = next
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(100*float64(other)/float64(b.N), "other-%")
	b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "ms-median")
	b.ReportMetric(float64(took[len(took)-1])/float64(time.Millisecond), "ms-max")
}
