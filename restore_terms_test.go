package s3lect

// Restores of the lockfile, its term object or both, against the term
// claims and the rules of docs/protocol.md, 1.1 and 2.1. Each test failed
// before those rules were built.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store/memstore"
)

// armedRestore is a store that, once armed, puts back given bytes of
// given keys right before its next read of the lockfile: an operator's
// restore (S3 versioning's CopyObject of an old version) timed just
// before a follower reads.
type armedRestore struct {
	*memstore.Store
	mu       sync.Mutex
	put      map[string][]byte // key -> bytes to put back, once
	onRest   func()            // called right after the restore
	restored bool
}

func (s *armedRestore) arm(put map[string][]byte, on func()) {
	s.mu.Lock()
	s.put, s.onRest = put, on
	s.mu.Unlock()
}

func (s *armedRestore) before(ctx context.Context, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.put == nil || key != testKey {
		return
	}
	for k, data := range s.put {
		_, etag, err := s.Store.Get(ctx, k)
		if err != nil {
			panic(err)
		}
		if _, err := s.Store.PutIfMatch(ctx, k, data, etag); err != nil {
			panic(err)
		}
	}
	s.put, s.restored = nil, true
	if s.onRest != nil {
		s.onRest()
	}
}

func (s *armedRestore) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.before(ctx, key)
	return s.Store.Get(ctx, key)
}

func (s *armedRestore) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	s.before(ctx, key)
	return s.Store.GetSighting(ctx, key)
}

// cuttable is a store that can be cut off: every call fails from then on.
type cuttable struct {
	*memstore.Store
	cut atomic.Bool
}

var errCut = errors.New("cut off the store")

func (s *cuttable) Get(ctx context.Context, key string) ([]byte, string, error) {
	if s.cut.Load() {
		return nil, "", errCut
	}
	return s.Store.Get(ctx, key)
}

func (s *cuttable) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	if s.cut.Load() {
		return nil, "", "", errCut
	}
	return s.Store.GetSighting(ctx, key)
}

func (s *cuttable) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if s.cut.Load() {
		return "", errCut
	}
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

// restoredRelease runs the scenario: a leads (term 1) and resigns, which
// writes its release; b leads (term 2); c campaigns and becomes a stable
// follower. Two minutes later an operator puts back a's release (and,
// with termToo, the term object as it stood then) right before c's next
// read, and with cutB cuts b off the store at that moment. It returns
// b's and c's terms and how long b's leadership was live after c won
// (0: not at all).
func restoredRelease(t *testing.T, termToo, cutB, fresh bool) (bTerm, cTerm uint64, overlap time.Duration) {
	mem := memstore.New()
	cfg := func(id string, st interface{}) ElectorConfig {
		return ElectorConfig{LockfilePath: testKey, ServerID: id, Logger: quietLogger}
	}
	ca := cfg("a", nil)
	ca.Store = mem
	a, err := New(ca)
	if err != nil {
		t.Fatal(err)
	}
	sb := &cuttable{Store: mem}
	cb := cfg("b", nil)
	cb.Store = sb
	b, err := New(cb)
	if err != nil {
		t.Fatal(err)
	}
	sc := &armedRestore{Store: mem}
	cc := cfg("c", nil)
	cc.Store = sc
	c, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	release, _, _ := mem.Get(context.Background(), testKey)
	termObj, _, _ := mem.Get(context.Background(), testKey+".term")
	lb, err := b.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bTerm = lb.Term()
	type won struct {
		term uint64
		at   time.Time
	}
	wonc := make(chan won, 1)
	if !fresh {
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			l, err := c.Campaign(ctx)
			if err != nil {
				wonc <- won{}
				return
			}
			wonc <- won{l.Term(), time.Now()}
			<-lb.Context().Done()
			l.Resign(context.Background())
		}()
	}
	time.Sleep(2 * time.Minute) // c is a stable follower
	put := map[string][]byte{testKey: release}
	if termToo {
		put[testKey+".term"] = termObj
	}
	sc.arm(put, func() {
		if cutB {
			sb.cut.Store(true)
		}
	})
	var w won
	if fresh {
		// The restore lands (at c's next read), then a member d that
		// never saw b's term starts and campaigns.
		for {
			sc.Get(context.Background(), testKey)
			sc.mu.Lock()
			done := sc.restored
			sc.mu.Unlock()
			if done {
				break
			}
		}
		cd := cfg("d", nil)
		cd.Store = mem
		d, err := New(cd)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ld, err := d.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		w = won{ld.Term(), time.Now()}
		defer ld.Resign(context.Background())
	} else {
		w = <-wonc
	}
	cTerm = w.term
	if w.at.IsZero() {
		t.Fatal("c never led")
	}
	if lb.Context().Err() == nil {
		<-lb.Context().Done()
		overlap = time.Since(w.at)
	}
	a.Close()
	b.Close()
	c.Close()
	return bTerm, cTerm, overlap
}

// TestRestoredReleaseOfAnEarlierTermIsWaitedOut: an operator puts the
// lockfile back to an earlier *release* (a vacant record with a ttl)
// while another member leads. A release is taken at once only when no
// term above its own is known to be claimed (docs/protocol.md, 2.1 and
// 4.1, T2); this one is below the term the follower saw held, so it is
// waited out like a held record, from the restore's first sight, and
// the live leader's lease has ended by then (mutation releaseatonce).
func TestRestoredReleaseOfAnEarlierTermIsWaitedOut(t *testing.T) {
	for _, cutB := range []bool{false, true} {
		name := "leader on the store"
		if cutB {
			name = "leader cut off at the restore"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bTerm, cTerm, overlap := restoredRelease(t, false, cutB, false)
				if overlap > 0 {
					t.Errorf("after a restore of an earlier release, c took over (term %d) while b's leadership (term %d) was live for %v more",
						cTerm, bTerm, overlap)
				}
				if cTerm <= bTerm {
					t.Errorf("c's term %d after b's %d", cTerm, bTerm)
				}
			})
		})
	}
}

// TestTermsNeverRepeatWhenBothObjectsAreRestored: the same, with the
// term object put back too, and a member d that never saw b's term
// campaigning after the restore. d's claim of b's term is refused
// whatever the lockfile and the term object hold (docs/protocol.md, 1.1:
// write-once term claims), so d finds the highest claim, waits out a
// lease from then, and leads above it once b's lease has ended
// (mutations noclaims, claimnowait).
func TestTermsNeverRepeatWhenBothObjectsAreRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bTerm, cTerm, overlap := restoredRelease(t, true, true, true)
		if cTerm <= bTerm {
			t.Errorf("d led at term %d after b's term %d (two leaderships, one term; live together for %v)", cTerm, bTerm, overlap)
		}
		if overlap > 0 {
			t.Errorf("d took over while b's leadership was live for %v more", overlap)
		}
	})
}

// heldPut is a store whose first write of the lockfile, once armed, waits
// (a stalled body) until released.
type heldPut struct {
	*memstore.Store
	mu      sync.Mutex
	armed   bool
	waiting chan struct{} // closed when the write waits
	release chan struct{} // close to let it land
}

func (s *heldPut) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.mu.Lock()
	hold := s.armed && key == testKey
	if hold {
		s.armed = false
	}
	s.mu.Unlock()
	if hold {
		close(s.waiting)
		<-s.release
	}
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

// TestStalledTakeoverOnARestoredRecordNeverLeadsBelowALaterTerm: the
// lockfile alone restored, the term object untouched. After a release,
// x claims term 2 and raises the term object, and its lockfile write
// (If-Match the release) stalls; y finds term 2 claimed since it saw the
// release, so it waits out a lease from then (docs/protocol.md, 1.1)
// before it leads at term 3; the operator puts the release back; x's
// write lands on it after x's lease has run out, so x does not lead on
// it, and leads later, if at all, above term 3 with y's leadership over
// (mutation claimnowait).
func TestStalledTakeoverOnARestoredRecordNeverLeadsBelowALaterTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		mk := func(id string, st interface {
			Get(context.Context, string) ([]byte, string, error)
			PutIfMatch(context.Context, string, []byte, string) (string, error)
		}) *Elector {
			e, err := New(ElectorConfig{Store: st, LockfilePath: testKey, ServerID: id, Logger: quietLogger})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			return e
		}
		a := mk("a", mem)
		la, err := a.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := la.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		release, _, _ := mem.Get(context.Background(), testKey)
		sx := &heldPut{Store: mem, armed: true, waiting: make(chan struct{}), release: make(chan struct{})}
		x := mk("x", sx)
		xw := make(chan *Leadership, 1)
		go func() {
			l, err := x.Campaign(t.Context())
			if err != nil {
				xw <- nil
				return
			}
			xw <- l
		}()
		<-sx.waiting // x raised the term object; its lockfile write stalls
		y := mk("y", mem)
		ly, err := y.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, etag, _ := mem.Get(context.Background(), testKey)
		if _, err := mem.PutIfMatch(context.Background(), testKey, release, etag); err != nil {
			t.Fatal(err)
		}
		close(sx.release)
		lx := <-xw
		if lx == nil {
			return // x lost: what the issue asks
		}
		live := ly.Context().Err() == nil
		if lx.Term() <= ly.Term() {
			t.Errorf("x leads at term %d after y's term %d (y live then: %v)", lx.Term(), ly.Term(), live)
		}
		if live {
			t.Errorf("x took over while y's leadership was live")
		}
	})
}

// stalePeerRestore runs the root review's peer-mode restore: a leads in
// peer mode, b follows by the peer. a's peer endpoint goes stale (a
// leftover process answers with the record a had written then, R), while
// a goes on renewing in the store. Right before b's next read of the
// store, an operator puts the lockfile back to R (the same bytes, so the
// same ETag, with a new sighting token), and with cutA a is cut off the
// store at that moment. It returns how long a's leadership was live after
// b won (0: not at all).
func stalePeerRestore(t *testing.T, cutA bool) time.Duration {
	mem := memstore.New()
	net := simworld.NewCalmPeerNet()
	sa := &cuttable{Store: mem}
	sb := &armedRestore{Store: mem}
	mk := func(id string, st interface {
		Get(context.Context, string) ([]byte, string, error)
		PutIfMatch(context.Context, string, []byte, string) (string, error)
	}) *Elector {
		cfg := testConfig(st, id)
		cfg.PeerMode, cfg.ServerAddr = true, id+":1"
		cfg.PeerClient = &http.Client{Transport: net}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		net.Add(cfg.ServerAddr, PeerHandler(e))
		return e
	}
	a := mk("a", sa)
	la, err := a.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := mk("b", sb)
	out := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		l, err := b.Campaign(ctx)
		if err != nil {
			out <- time.Time{}
			return
		}
		out <- time.Now()
		<-la.Context().Done()
		l.Resign(context.Background())
	}()
	time.Sleep(30 * time.Second)
	synctest.Wait()
	time.Sleep(400 * time.Millisecond) // mid-way between renewals

	data, etag, _ := mem.Get(context.Background(), testKey)
	rec, err := ParseRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(peerRecord{Record: rec, ETag: etag})
	net.Crash("a:1", body) // a leftover process keeps answering with R
	sb.arm(map[string][]byte{testKey: data}, func() {
		if cutA {
			sa.cut.Store(true)
		}
	})
	at := <-out
	if at.IsZero() {
		t.Fatal("b never led")
	}
	if la.Context().Err() != nil {
		return 0
	}
	<-la.Context().Done()
	return time.Since(at)
}

// TestStalePeerThenRestoreIsWaitedOut: a stale peer keeps b's view at
// R, and a restore of R right before b's store read returns R's ETag and
// bytes. A view heard from the peer takes no token from the store
// (docs/protocol.md, 2.1): the read is a sighting of its own, waited out
// from its return, and a's lease has ended by then (mutation peertoken).
func TestStalePeerThenRestoreIsWaitedOut(t *testing.T) {
	for _, cutA := range []bool{false, true} {
		name := "leader on the store"
		if cutA {
			name = "leader cut off at the restore"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if d := stalePeerRestore(t, cutA); d > 0 {
					t.Errorf("b took over while a's leadership was live for %v more (stale peer, then a restore of what it served)", d)
				}
			})
		})
	}
}
