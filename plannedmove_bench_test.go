package s3lect

import (
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

var (
	moveDrain = flag.Duration("move.drain", time.Second, "BenchmarkPlannedMove: how long the leader's job takes to stop")
	moveScale = flag.Int("move.scale", 1, "BenchmarkPlannedMove: the default intervals divided by this")
)

// BenchmarkPlannedMove measures planned moves on a real S3 store (MinIO,
// as internal/s3test finds it) with real time: three electors at the
// default intervals (5 s, 30 s, 15 s; -move.scale=N divides them)
// campaign again as soon as their leadership ends, and the leader moves
// the job: announce (Leadership.Announce), stop the job (a drain of
// -move.drain, default 1 s), Resign. It reports the job's outage, from
// the end of the drain to the next leader's Campaign returning
// (ms-outage-median, ms-outage-max; the drain comes on top), the whole
// move from the call to the next leader's start (s-move-median,
// s-move-max), and the share of moves that landed on another member
// (other-%). Cases: storage mode with the announcement, storage mode
// with Resign alone (the old way), and pinned peer mode (PeerPinned, no
// certificates) with the announcement. A move that finds the leader's
// leadership ended on its own (lost to a slow store) is not counted.
// Each move at the defaults takes about a minute in storage mode:
//
//	go test -run '^$' -bench BenchmarkPlannedMove -benchtime 12x -timeout 40m .
func BenchmarkPlannedMove(b *testing.B) {
	for _, c := range []struct {
		name           string
		peer, announce bool
	}{{"storage-announce", false, true}, {"storage-resign", false, false}, {"peer-pinned-announce", true, true}} {
		b.Run(c.name, func(b *testing.B) { benchPlannedMove(b, c.peer, c.announce) })
	}
}

func benchPlannedMove(b *testing.B, peer, announce bool) {
	st := s3store.New(s3test.NewClient(b, nil, "", ""), s3test.Bucket(b))
	key := fmt.Sprintf("bench/move-%v-%v-%s.json", peer, announce, lease.NewID())
	scale := time.Duration(max(*moveScale, 1))
	wins := make(chan benchWin)
	ctx, cancel := context.WithCancel(context.Background())
	var closers []func()
	defer func() {
		cancel()
		for _, c := range closers {
			c()
		}
	}()
	for _, id := range []string{"a", "b", "c"} {
		cfg := ElectorConfig{Store: st, LockfilePath: key, ServerID: id, FrequentInterval: DefaultFrequentInterval / scale,
			InfrequentInterval: DefaultInfrequentInterval / scale, LeaderTimeout: DefaultLeaderTimeout / scale, Logger: quietLogger}
		var ln net.Listener
		if peer {
			var err error
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			cfg.PeerMode, cfg.PeerPinned, cfg.ServerAddr = true, true, ln.Addr().String()
		}
		closers = append(closers, benchCandidate(b, ctx, cfg, ln, (*Elector).PeerServerTLS, wins))
	}
	var outages, moves []time.Duration
	other := 0
	w := <-wins
	b.ResetTimer()
	for i := 0; i < b.N; {
		// Lead until every follower is stable (reads every
		// InfrequentInterval, or asks the leader), at a phase that moves
		// through the renewal cycle.
		time.Sleep(DefaultLeaderTimeout/scale + DefaultFrequentInterval/scale + time.Duration(i%7)*DefaultFrequentInterval/scale/7)
		if w.lead.Context().Err() != nil {
			// Lost on its own (a slow store): not a planned move.
			b.Logf("%s's leadership ended on its own: %v", w.id, context.Cause(w.lead.Context()))
			w = <-wins
			continue
		}
		called := time.Now()
		if announce {
			if err := w.lead.Announce(ctx, ""); err != nil {
				b.Fatalf("Announce() = %v", err)
			}
		}
		time.Sleep(*moveDrain) // the job stops
		stopped := time.Now()

		w.lead.Resign(context.Background())
		next := <-wins
		outages = append(outages, next.at.Sub(stopped))
		moves = append(moves, next.at.Sub(called))
		if next.id != w.id {
			other++
		}
		b.Logf("move %d: %s -> %s, outage after the drain %v, whole move %v", i, w.id, next.id,
			next.at.Sub(stopped).Round(time.Millisecond), next.at.Sub(called).Round(time.Millisecond))
		w = next
		i++
	}
	b.StopTimer()
	slices.Sort(outages)
	slices.Sort(moves)
	b.ReportMetric(100*float64(other)/float64(b.N), "other-%")
	b.ReportMetric(float64(outages[len(outages)/2])/float64(time.Millisecond), "ms-outage-median")
	b.ReportMetric(float64(outages[len(outages)-1])/float64(time.Millisecond), "ms-outage-max")
	b.ReportMetric(moves[len(moves)/2].Seconds(), "s-move-median")
	b.ReportMetric(moves[len(moves)-1].Seconds(), "s-move-max")
}
