package s3lect

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// BenchmarkHandover measures graceful handovers on a real S3 store (MinIO,
// as internal/s3test finds it), in storage and in peer mode, at the
// default intervals divided by 25 with InfrequentInterval =
// FrequentInterval (200 ms, 200 ms, 600 ms): three electors campaign
// again as soon as their leadership ends (the README's loop), and the
// leader resigns. It reports the share of handovers that land on another
// member (other-%), the time from Resign to the next Campaign's return
// (ms-median, ms-max), and the median of each phase of it (ms-release:
// Resign to the release's acknowledgement; ms-wait: from there to the
// send of the read that found it; ms-read, ms-termget, ms-termput,
// ms-claim: that read and the takeover's store calls; ms-tail: from the
// claim's acknowledgement to Campaign's return):
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
	calls := &callLog{}
	st := s3store.New(s3test.NewClient(b, nil, "", ""), s3test.Bucket(b))
	key := "bench/handover-" + map[bool]string{false: "storage", true: "peer"}[peer] + "-" + lease.NewID() + ".json"
	pki, err := devtls.New()
	if err != nil {
		b.Fatal(err)
	}
	wins := make(chan benchWin)
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
		cfg := ElectorConfig{Store: timedStore{st, id, calls}, LockfilePath: key, ServerID: id, FrequentInterval: 200 * time.Millisecond,
			InfrequentInterval: 200 * time.Millisecond, LeaderTimeout: 600 * time.Millisecond, Logger: quietLogger}
		var ln net.Listener
		if peer {
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			cfg.PeerMode, cfg.ServerAddr, cfg.PeerTLS = true, ln.Addr().String(), pki.ClientTLS()
		}
		closers = append(closers, benchCandidate(b, ctx, cfg, ln, func(*Elector) *tls.Config { return pki.ServerTLS() }, wins))
	}
	var (
		took   []time.Duration
		other  int
		phases = map[string][]time.Duration{}
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
		for name, d := range calls.phases(w.id, next.id, key, begun, next.at) {
			phases[name] = append(phases[name], d)
		}
		w = next
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(100*float64(other)/float64(b.N), "other-%")
	b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "ms-median")
	b.ReportMetric(float64(took[len(took)-1])/float64(time.Millisecond), "ms-max")
	for name, ds := range phases {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), "ms-"+name)
	}
}

// timedStore records every call an elector makes to the store it wraps,
// for the phases of a handover.
type timedStore struct {
	store.Store
	id  string
	log *callLog
}

func (s timedStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	sent := time.Now()
	data, etag, err := s.Store.Get(ctx, key)
	s.log.add(timedCall{s.id, "get", key, data, etag, err, sent, time.Now()})
	return data, etag, err
}

func (s timedStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	sent := time.Now()
	got, err := s.Store.PutIfMatch(ctx, key, data, etag)
	s.log.add(timedCall{s.id, "put", key, data, got, err, sent, time.Now()})
	return got, err
}

type timedCall struct {
	id, op, key string
	data        []byte
	etag        string // returned
	err         error
	sent, back  time.Time
}

type callLog struct {
	mu    sync.Mutex
	calls []timedCall
}

func (l *callLog) add(c timedCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

// phases splits the handover from from to to, Resign at begun and the next
// Campaign's return at won, into the calls it took (see BenchmarkHandover);
// it returns nothing for a handover whose calls it cannot find (a peer
// answer brought the release, or the resigner took it back).
func (l *callLog) phases(from, to, key string, begun, won time.Time) map[string]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rel, read *timedCall
	out := map[string]time.Duration{}
	for i := range l.calls {
		c := &l.calls[i]
		if c.sent.Before(begun) || c.back.After(won) || c.err != nil {
			continue
		}
		switch {
		case rel == nil && c.id == from && c.op == "put" && c.key == key && bytes.Contains(c.data, []byte(`"lastUpdated":"0001-01-01T00:00:00Z"`)):
			rel = c
			out["release"] = c.back.Sub(begun)
		case rel != nil && read == nil && c.id == to && c.op == "get" && c.key == key && c.etag == rel.etag:
			read = c
			out["wait"] = c.sent.Sub(rel.back)
			out["read"] = c.back.Sub(c.sent)
		case read != nil && c.id == to && strings.HasSuffix(c.key, ".term"):
			out["term"+c.op] = c.back.Sub(c.sent)
		case read != nil && c.id == to && c.op == "put" && c.key == key:
			out["claim"] = c.back.Sub(c.sent)
			out["tail"] = won.Sub(c.back)
		}
	}
	l.calls = l.calls[:0]
	if read == nil {
		return nil
	}
	return out
}

// benchWin is a Campaign's win in a benchmark's group: who, the
// leadership, and when Campaign returned it.
type benchWin struct {
	id   string
	lead *Leadership
	at   time.Time
}

// benchCandidate starts an elector of cfg that campaigns until ctx ends
// and sends each win on wins, serving its peers on ln (if not nil) with
// serverTLS. It returns the function that closes it.
func benchCandidate(b *testing.B, ctx context.Context, cfg ElectorConfig, ln net.Listener, serverTLS func(*Elector) *tls.Config, wins chan<- benchWin) (closeIt func()) {
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	if ln != nil {
		go func() { defer close(served); ServePeers(ctx, ln, PeerHandler(e), serverTLS(e)) }()
	} else {
		close(served)
	}
	go func() {
		for {
			l, err := e.Campaign(ctx)
			if err != nil {
				return
			}
			select {
			case wins <- benchWin{cfg.ServerID, l, time.Now()}:
			case <-ctx.Done():
				return
			}
			<-l.Context().Done()
		}
	}()
	return func() { e.Close(); <-served }
}
