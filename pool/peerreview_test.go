package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// The tests of this file come from an adversarial review of peer mode
// (each found a fault that the code has since been mended for; each
// fails with its rule mutated away, as its comment says).

// slowStore delays every call of one worker's store by d each way: a
// worker farther from the store (another zone), or one whose recent
// renewal was slow.
type slowStore struct {
	store.Store
	d time.Duration
}

func (s slowStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	time.Sleep(s.d)
	defer time.Sleep(s.d)
	return s.Store.Get(ctx, key)
}

func (s slowStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	time.Sleep(s.d)
	defer time.Sleep(s.d)
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

func (s slowStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	time.Sleep(s.d)
	defer time.Sleep(s.d)
	return s.Store.(store.Lister).List(ctx, prefix)
}

// TestPeerSlowWorkerCostsNoListings: a settled pool of 4 in peer mode
// where one worker's store calls take 160 ms each way (a renewal's round
// trip of 320 ms, a store in another zone). Its watch offset is
// FrequentInterval/16 + 2 × 320 ms = 952 ms after the slot, the others'
// 312 ms, past the FrequentInterval/8 (625 ms) the hub holds their
// requests: their digests name it by its report of the round before
// (recent), so they list the store once per InfrequentInterval all the
// same. (-sim.mutate=peerthisround: they list at every tick.)
func TestPeerSlowWorkerCostsNoListings(t *testing.T) {
	defer setMutation(t)()
	for _, d := range []time.Duration{0, 160 * time.Millisecond} {
		t.Run(fmt.Sprintf("d=%v", d), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, 0, 40)
				g.net = simworld.NewCalmPeerNet()
				g.wrap = func(id string, st store.Store) store.Store {
					if id == "w4" && d > 0 {
						return slowStore{st, d}
					}
					return st
				}
				for _, id := range []string{"w1", "w2", "w3", "w4"} {
					g.add(id)
				}
				defer g.stop()
				time.Sleep(6 * testLT)
				if c := g.counts(); !within(c, g.ids(nil), 10, 10, 40) {
					t.Fatalf("after 6 leases: %s; want 10 each", spread(c))
				}
				before := map[string]uint64{}
				for _, w := range g.workers {
					before[w.id] = w.p.Stats().Lists
				}
				const intervals = 48
				time.Sleep(intervals * testFI)
				var msg string
				bad := false
				for _, w := range g.workers {
					n := w.p.Stats().Lists - before[w.id]
					msg += fmt.Sprintf("%s:%d ", w.id, n)
					if n > intervals/peerIIFactor+1 {
						bad = true
					}
				}
				t.Logf("listings over %d intervals: %s", intervals, msg)
				if bad {
					t.Errorf("listings over %d intervals: %s; want at most %d each (one per InfrequentInterval)", intervals, msg, intervals/peerIIFactor+1)
				}
				g.check(t)
			})
		})
	}
}

// seqStore gives every write a revision number of its key as its ETag
// ("1", "2"...), as stores whose ETag is a revision do (natskv's is the
// stream's sequence): two contents never share an ETag, as package store
// requires, but the next ETag can be told in advance.
type seqStore struct {
	mem *memstore.Store
	mu  sync.Mutex
	cur map[string]seqTag
}

type seqTag struct {
	md5 string
	seq uint64
}

func newSeqStore() *seqStore { return &seqStore{mem: memstore.New(), cur: map[string]seqTag{}} }

func (s *seqStore) tag(key, md5 string) string {
	if c, ok := s.cur[key]; ok && c.md5 == md5 {
		return strconv.FormatUint(c.seq, 10)
	}
	return "unknown"
}

func (s *seqStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, md5, err := s.mem.Get(ctx, key)
	if err != nil {
		return nil, "", err
	}
	return data, s.tag(key, md5), nil
}

func (s *seqStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	over := ""
	if etag != "" {
		c, ok := s.cur[key]
		if !ok || strconv.FormatUint(c.seq, 10) != etag {
			return "", fmt.Errorf("seqstore: %s is not at %s: %w", key, etag, store.ErrPreconditionFailed)
		}
		over = c.md5
	}
	md5, err := s.mem.PutIfMatch(ctx, key, data, over)
	if err != nil {
		return "", err
	}
	c := s.cur[key]
	s.cur[key] = seqTag{md5: md5, seq: c.seq + 1}
	return strconv.FormatUint(c.seq+1, 10), nil
}

func (s *seqStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	es, err := s.mem.List(ctx, prefix)
	for i := range es {
		es[i].ETag = s.tag(es[i].Key, es[i].ETag)
	}
	return es, err
}

// seq returns key's current revision.
func (s *seqStore) seq(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur[key].seq
}

// foretellingHub is w1's PeerHandler made to lie to one asker about one
// victim: once on, it names for the victim the revision its session
// object will reach three renewals later, and keeps naming it until the
// object has passed it. The lie names no write that has landed: the doc
// says such an ETag "matches no read"; here it matches the read a lease
// later.
type foretellingHub struct {
	h      http.Handler
	st     *seqStore
	to     string // the asker lied to
	victim string
	on     atomic.Bool
	mu     sync.Mutex
	named  uint64
	lies   int
}

func (f *foretellingHub) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	var d digest
	if rec.Code != http.StatusOK || !f.on.Load() || req.URL.Query().Get("worker") != f.to || json.Unmarshal(rec.Body.Bytes(), &d) != nil || d.Sessions[f.victim].ETag == "" {
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	f.mu.Lock()
	cur := f.st.seq("pool/sessions/" + f.victim + ".json")
	if f.named <= cur {
		f.named = cur + 3
	}
	d.Sessions[f.victim] = peerSession{ETag: strconv.FormatUint(f.named, 10), Sum: d.Sessions[f.victim].Sum}
	f.lies++
	f.mu.Unlock()
	w.Write(encode(d))
}

// TestPeerForetoldETagTakesNothingOver: on a store whose ETags are
// revisions, a hub names for a live worker (w2) the revision its session
// object will reach three renewals on. A digest names the write's content
// too, and a read ages from the digest only when it returns those bytes:
// the write that later gets that ETag is aged from its own read, and w3
// takes none of w2's shards. (-sim.mutate=peernosum: w3 finds the write
// "first seen" a lease before it was sent and claims w2's shards while w2
// leads them.)
func TestPeerForetoldETagTakesNothingOver(t *testing.T) {
	defer setMutation(t)()
	for _, lie := range []bool{false, true} {
		t.Run(fmt.Sprintf("lie=%v", lie), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { foretold(t, lie) })
		})
	}
}

func foretold(t *testing.T, lie bool) {
	{
		st := newSeqStore()
		g := newGroup(t, 0, 30)
		g.mem = st
		g.net, g.ii = simworld.NewCalmPeerNet(), 300*time.Second
		for _, id := range []string{"w1", "w2", "w3"} {
			g.add(id)
		}
		defer g.stop()
		liar := &foretellingHub{h: PeerHandler(g.workers[0].p), st: st, to: "w3", victim: "w2"}
		g.net.Add("w1:443", liar)
		time.Sleep(6 * testLT)
		if c := g.counts(); !within(c, g.ids(nil), 10, 10, 30) {
			t.Fatalf("before the lie: %s; want 10 each", spread(c))
		}
		liar.on.Store(lie)
		time.Sleep(3 * testLT)
		liar.on.Store(false)
		time.Sleep(testLT)
		liar.mu.Lock()
		t.Logf("lies told: %d; counts now %s", liar.lies, spread(g.counts()))
		liar.mu.Unlock()
		g.check(t)
	}
}

// flood sends n made-up worker reports to the hub's handler h, in batches
// of batch, a little more than half an interval apart (so that a digest
// carries at most one batch), and refreshes them before the hub drops
// them (two leases), until stop.
func flood(h http.Handler, n, batch int, stop *atomic.Bool) {
	for round := 0; !stop.Load(); round++ {
		for i := 0; i < n && !stop.Load(); i += batch {
			for j := i; j < min(i+batch, n); j++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", PeerPath+"?prefix=pool/&wait=0s&worker="+fmt.Sprintf("fake%05d", j)+"&etag=x&sum="+strings.Repeat("0", 32), nil))
			}
			time.Sleep(testFI/2 + time.Millisecond)
		}
	}
}

// TestPeerFakeReportsShutNobodyOut: anyone who can reach a hub's
// PeerHandler can report, here for 300 made-up worker IDs, refreshed
// within two leases. The hub takes at most maxStrangers reports from
// workers it neither counts live nor finds in the member list, so a
// worker that joins during the flood is heard, and the digests name it;
// and no worker keeps anything of the made-up IDs (applyDigest takes in
// members and workers it has read only).
func TestPeerFakeReportsShutNobodyOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 0, 40)
		g.net = simworld.NewCalmPeerNet()
		for _, id := range []string{"w1", "w2", "w3"} {
			g.add(id)
		}
		defer g.stop()
		time.Sleep(4 * testLT)
		stop := &atomic.Bool{}
		done := make(chan struct{})
		go func() { defer close(done); flood(PeerHandler(g.workers[0].p), 300, 300, stop) }()
		time.Sleep(5*testFI + testFI/2) // the reports are full
		g.add("w4")
		time.Sleep(2 * testLT)
		if c := g.counts(); !within(c, []string{"w1", "w2", "w3", "w4"}, 10, 10, 40) {
			t.Fatalf("2 leases after w4 joined: %s; want 10 each", spread(c))
		}
		before := map[string]uint64{}
		for _, w := range g.workers {
			before[w.id] = w.p.Stats().Lists
		}
		const intervals = 6
		time.Sleep(intervals * testFI)
		stop.Store(true)
		<-done
		g.stop()
		if n := len(g.workers[1].p.st.peers); n > 3 {
			t.Errorf("w2 keeps %d peer views; want 3 (the other workers)", n)
		}
		msg, bad := "", false
		for _, w := range g.workers {
			n := w.p.Stats().Lists - before[w.id]
			msg += fmt.Sprintf("%s:%d ", w.id, n)
			bad = bad || n > intervals/peerIIFactor+1
		}
		t.Logf("listings over %d intervals of the flood: %s", intervals, msg)
		if bad {
			t.Errorf("listings over %d intervals: %s; want at most %d each (one per InfrequentInterval)", intervals, msg, intervals/peerIIFactor+1)
		}
		g.check(t)
	})
}

// TestPeerHandlerTwoPoolsOnePrefix: two pools with one Prefix (two
// buckets, the same layout) cannot be told apart by a request, and
// PeerHandler refuses them, naming the Prefix, as http.ServeMux refuses a
// pattern registered twice.
func TestPeerHandlerTwoPoolsOnePrefix(t *testing.T) {
	mk := func() *Pool {
		p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: "w1", Shards: []string{"a"}, Logger: quiet,
			Work: func(context.Context, string, *s3lect.Leadership) {}, PeerMode: true, ServerAddr: "w1:443"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk(), mk()
	panicked := func() (v any) {
		defer func() { v = recover() }()
		PeerHandler(a, b)
		return nil
	}()
	if s, _ := panicked.(string); !strings.Contains(s, `Prefix "p/"`) {
		t.Errorf("PeerHandler(a, b) with one Prefix: panic %v; want one naming the Prefix", panicked)
	}
}

// spikeStore delays every call by *d each way, d read at each call.
type spikeStore struct {
	store.Store
	d *atomic.Int64
}

func (s spikeStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	d := time.Duration(s.d.Load())
	time.Sleep(d)
	defer time.Sleep(d)
	return s.Store.Get(ctx, key)
}

func (s spikeStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	d := time.Duration(s.d.Load())
	time.Sleep(d)
	defer time.Sleep(d)
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

func (s spikeStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	d := time.Duration(s.d.Load())
	time.Sleep(d)
	defer time.Sleep(d)
	return s.Store.(store.Lister).List(ctx, prefix)
}

// TestPeerOneSlowRenewalCostsNoListings: one renewal of one worker of 10
// that takes 1 s (a store's tail latency) raises its recent round trip,
// so its watch offset, for about nine intervals (it shrinks by an eighth
// a renewal); all that while its reports come after the hub has answered
// the others, which name it by its report of the round before and list
// the store no more than once per InfrequentInterval.
// (-sim.mutate=peerthisround: they list at every tick, about 54 listings
// more.)
func TestPeerOneSlowRenewalCostsNoListings(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		spike := &atomic.Int64{}
		g := newGroup(t, 0, 40)
		g.net = simworld.NewCalmPeerNet()
		g.wrap = func(id string, st store.Store) store.Store {
			if id == "w10" {
				return spikeStore{st, spike}
			}
			return st
		}
		for i := range 10 {
			g.add(fmt.Sprintf("w%02d", i+1))
		}
		defer g.stop()
		time.Sleep(6 * testLT)
		// Aligned on a slot, a little before the renewals.
		time.Sleep(time.Until(time.Now().Truncate(testFI).Add(testFI - testFI/100)))
		before := map[string]uint64{}
		for _, w := range g.workers {
			before[w.id] = w.p.Stats().Lists
		}
		spike.Store(int64(500 * time.Millisecond))
		time.Sleep(testFI / 2)
		spike.Store(0)
		const intervals = 18
		time.Sleep(intervals*testFI - testFI/2)
		msg, extra := "", 0
		for _, w := range g.workers {
			n := int(w.p.Stats().Lists - before[w.id])
			msg += fmt.Sprintf("%s:%d ", w.id, n)
			extra += max(n-(intervals/peerIIFactor+1), 0)
		}
		t.Logf("listings over %d intervals after one slow renewal of w10: %s", intervals, msg)
		if extra > 0 {
			t.Errorf("one renewal of 1 s cost %d listings beyond one per InfrequentInterval (%s)", extra, msg)
		}
		g.check(t)
	})
}
