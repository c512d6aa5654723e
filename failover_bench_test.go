package s3lect

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/s3store"
)

// Timings for failover measurements: the defaults scaled down 25 times.
const (
	foScale = 25
	foFI    = DefaultFrequentInterval / foScale
	foII    = DefaultInfrequentInterval / foScale
	foLT    = DefaultLeaderTimeout / foScale
)

type foMode struct {
	name     string
	peer     bool
	longPoll bool
}

var foModes = []foMode{{"storage", false, false}, {"peer", true, false}, {"peer + long-poll", true, true}}

// BenchmarkFailover measures crash-failover and graceful-handover times
// for each mode, over 20 groups of three electors at once, on memstore
// with 5 ms of latency per call and, when the environment names one (as
// bash .ci/run does), on MinIO. It prints a table; the times are at 1/25 of
// the default intervals, so they are also given as a fraction of
// LeaderTimeout.
//
//	go test -run XXX -bench Failover -benchtime 1x .
func BenchmarkFailover(b *testing.B) {
	pki := newTestPKI(b)
	stores := []struct {
		name string
		new  func(b *testing.B) func() store.Store
	}{
		{"memstore, 5 ms latency", func(*testing.B) func() store.Store {
			mem := memstore.New()
			return func() store.Store { fs := newFaultStore(mem); fs.latency = 5 * time.Millisecond; return fs }
		}},
	}
	if os.Getenv("S3LECT_TEST_S3_ENDPOINT") != "" {
		stores = append(stores, struct {
			name string
			new  func(b *testing.B) func() store.Store
		}{"MinIO", func(b *testing.B) func() store.Store {
			bucket := s3test.Bucket(b)
			client := s3test.NewClient(b, nil, "", "")
			return func() store.Store { return s3store.New(client, bucket) }
		}})
	}
	type row struct {
		store, mode, event string
		times              []time.Duration
	}
	var rows []row
	for range b.N {
		rows = rows[:0]
		for _, st := range stores {
			newStore := st.new(b)
			for _, m := range foModes {
				for _, crash := range []bool{true, false} {
					event := "graceful handover"
					if crash {
						event = "crash failover"
					}
					rows = append(rows, row{st.name, m.name, event, foTrials(b, pki, newStore, m, crash, 20)})
				}
			}
		}
	}
	fmt.Printf("\nFailover at 1/%d of the default intervals (FrequentInterval %v, InfrequentInterval %v, LeaderTimeout %v), 20 trials each:\n\n",
		foScale, foFI, foII, foLT)
	fmt.Println("| store | mode | event | p50 | max | p50 / LeaderTimeout | max / LeaderTimeout |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		slices.Sort(r.times)
		p50, mx := r.times[len(r.times)/2], r.times[len(r.times)-1]
		fmt.Printf("| %s | %s | %s | %v | %v | %.2f | %.2f |\n", r.store, r.mode, r.event,
			p50.Round(time.Millisecond), mx.Round(time.Millisecond), float64(p50)/float64(foLT), float64(mx)/float64(foLT))
	}
}

// foTrials runs n groups at once and returns, for each, the time from the
// leader's crash (or resignation) to the next leader's Campaign returning.
func foTrials(b *testing.B, pki *testPKI, newStore func() store.Store, m foMode, crash bool, n int) []time.Duration {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		times []time.Duration
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := foTrial(pki, newStore, m, crash, fmt.Sprintf("failover/%s-%v-%d-%d.json", m.name, crash, i, time.Now().UnixNano()))
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			times = append(times, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(times) == 0 {
		b.Fatal("no trial finished")
	}
	return times
}

func foTrial(pki *testPKI, newStore func() store.Store, m foMode, crash bool, key string) (time.Duration, error) {
	type member struct {
		e    *Elector
		cut  *faultStore
		stop context.CancelFunc
		done chan struct{}
	}
	wins := make(chan *Leadership, 3)
	owner := map[*Leadership]*member{}
	var mu sync.Mutex
	var members []*member
	defer func() {
		for _, mb := range members {
			mb.e.Close()
			mb.stop()
			<-mb.done
		}
	}()
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		mb := &member{cut: newFaultStore(newStore()), done: make(chan struct{})}
		e, err := New(ElectorConfig{Store: mb.cut, LockfilePath: key, ServerID: fmt.Sprint("m", i), ServerAddr: ln.Addr().String(),
			FrequentInterval: foFI, InfrequentInterval: foII, LeaderTimeout: foLT,
			PeerMode: m.peer, PeerTLS: peerTLSIf(m.peer, pki), PeerTimeout: foLT / 2, Logger: quietLogger})
		if err != nil {
			return 0, err
		}
		e.longPoll = m.longPoll
		mb.e = e
		ctx, cancel := context.WithCancel(context.Background())
		mb.stop = cancel
		go func() { defer close(mb.done); ServePeers(ctx, ln, e.PeerHandler(), pki.serverTLS()) }()
		members = append(members, mb)
		go func() {
			if l, err := e.Campaign(context.Background()); err == nil {
				mu.Lock()
				owner[l] = mb
				mu.Unlock()
				wins <- l
			}
		}()
	}
	first := <-wins
	time.Sleep(3*foLT + foII) // followers settle into the stable state
	// Strike at a random point of the followers' polling and the leader's
	// renewal cycles: groups started together would otherwise all be hit
	// at the same phase.
	time.Sleep(rand.N(foII))
	mu.Lock()
	leader := owner[first]
	mu.Unlock()
	start := time.Now()
	if crash {
		leader.cut.set(func(f *faultStore) { f.blackhole = true })
		leader.stop()
	} else {
		first.Resign(context.Background())
	}
	select {
	case <-wins:
		return time.Since(start), nil
	case <-time.After(20 * foLT):
		return 0, fmt.Errorf("%s: no new leader after %v", key, 20*foLT)
	}
}

func peerTLSIf(peer bool, pki *testPKI) *tls.Config {
	if !peer {
		return nil
	}
	return pki.clientTLS()
}
