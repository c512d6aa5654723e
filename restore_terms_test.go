package s3lect

// Restores of the lockfile, its term object or both, against the term
// claims and the rules of docs/protocol.md, 1.1, 1.2 and 2.1. Each test failed
// before those rules were built.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
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

// cutOff is a store that can be cut off: from then on every call fails
// at once (a refused connection) or, with hang, waits until its context
// ends (a dropped route: no reply, no error).
type cutOff struct {
	*memstore.Store
	hang bool
	cut  atomic.Bool
}

var errCut = errors.New("cut off the store")

func (s *cutOff) fail(ctx context.Context) error {
	if s.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return errCut
}

func (s *cutOff) Get(ctx context.Context, key string) ([]byte, string, error) {
	if s.cut.Load() {
		return nil, "", s.fail(ctx)
	}
	return s.Store.Get(ctx, key)
}

func (s *cutOff) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	if s.cut.Load() {
		return nil, "", "", s.fail(ctx)
	}
	return s.Store.GetSighting(ctx, key)
}

func (s *cutOff) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if s.cut.Load() {
		return "", s.fail(ctx)
	}
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

// restoreElector returns a new elector of the group on st, closed when
// the test ends; lt is its LeaderTimeout (0: the default).
func restoreElector(t *testing.T, id string, st store.Store, lt time.Duration) *Elector {
	t.Helper()
	e, err := New(ElectorConfig{Store: st, LockfilePath: testKey, ServerID: id, LeaderTimeout: lt, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// restoreCase is a restore made while b leads (restoreWhileBLeads).
type restoreCase struct {
	termToo bool          // the term object is put back too
	cutB    bool          // b is cut off the store at the restore
	hang    bool          // b's calls then hang rather than fail
	fresh   bool          // a member d that never saw b's term campaigns after the restore, not c
	held    bool          // what is put back is a's held record after 20 s of renewals, not its release
	bLT     time.Duration // b's LeaderTimeout (0: the default)
}

// restoreWhileBLeads runs the scenario: a leads (term 1) and resigns,
// which writes its release; b leads (term 2); c campaigns and becomes a
// stable follower. Two minutes later an operator puts back a's record
// (and with termToo the term object as it stood then) right before c's
// next read; with cutB b is cut off the store at that moment. It returns
// b's and the winner's terms and how long b's leadership was live after
// the winner (c, or d with fresh) won (0: not at all).
func restoreWhileBLeads(t *testing.T, rc restoreCase) (bTerm, cTerm uint64, overlap time.Duration) {
	ctx := context.Background()
	mem := memstore.New()
	a := restoreElector(t, "a", mem, 0)
	sb := &cutOff{Store: mem, hang: rc.hang}
	b := restoreElector(t, "b", sb, rc.bLT)
	sc := &armedRestore{Store: mem}
	c := restoreElector(t, "c", sc, 0)
	la, err := a.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rc.held {
		time.Sleep(20 * time.Second) // a renews a few times
	}
	backup, _, _ := mem.Get(ctx, testKey)
	termObj, _, _ := mem.Get(ctx, testKey+".term")
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !rc.held {
		backup, _, _ = mem.Get(ctx, testKey)
	}
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
	if !rc.fresh {
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
	time.Sleep(2 * time.Minute) // c is a stable follower that has read b's record
	put := map[string][]byte{testKey: backup}
	if rc.termToo {
		put[testKey+".term"] = termObj
	}
	var restoredAt time.Time
	sc.arm(put, func() {
		restoredAt = time.Now()
		if rc.cutB {
			sb.cut.Store(true)
		}
	})
	var w won
	if rc.fresh {
		// The restore lands (at c's next read), then a member d that
		// never saw b's term starts and campaigns.
		for {
			sc.Get(ctx, testKey)
			sc.mu.Lock()
			done := sc.restored
			sc.mu.Unlock()
			if done {
				break
			}
		}
		d := restoreElector(t, "d", mem, 0)
		ld, err := d.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		w = won{ld.Term(), time.Now()}
		defer ld.Resign(ctx)
	} else {
		w = <-wonc
	}
	cTerm = w.term
	if w.at.IsZero() {
		t.Fatal("c never led")
	}
	t.Logf("restored %s; term %d led %v after the restore", backup, w.term, w.at.Sub(restoredAt))
	if lb.Context().Err() == nil {
		<-lb.Context().Done()
		overlap = time.Since(w.at)
	}
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
	defer setMutation(t)()
	for _, cutB := range []bool{false, true} {
		name := "leader on the store"
		if cutB {
			name = "leader cut off at the restore"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bTerm, cTerm, overlap := restoreWhileBLeads(t, restoreCase{cutB: cutB})
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
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		bTerm, cTerm, overlap := restoreWhileBLeads(t, restoreCase{termToo: true, cutB: true, fresh: true})
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
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		mk := func(id string, st store.Store) *Elector { return restoreElector(t, id, st, 0) }
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
	sa := &cutOff{Store: mem}
	sb := &armedRestore{Store: mem}
	mk := func(id string, st store.Store) *Elector {
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
	defer setMutation(t)()
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

// TestRestoreBelowAClaimedTermIsWaitedOutForTheLongestLeaseKnown: a
// rolling change of LeaderTimeout (15 s -> 30 s, or 18 s) and a restore.
// The live leader b (term 2) has the longer lease; the operator puts the
// lockfile back to a's record of term 1, written under the old 15 s (a's
// release, or a's held record), and b's calls hang from that moment. c
// (15 s) had read b's record, so the restored record is below a term it
// knows to be claimed: it is waited out for the longest lease c knows
// (docs/protocol.md, 2.1), b's, not the 15 s it states, and b's lease has
// run out by then (mutation claimownttl: two live leaders for 5.79 s at
// 30 s, 0.89 s at 18 s).
func TestRestoreBelowAClaimedTermIsWaitedOutForTheLongestLeaseKnown(t *testing.T) {
	defer setMutation(t)()
	for _, bLT := range []time.Duration{30 * time.Second, 18 * time.Second} {
		for _, held := range []bool{false, true} {
			name := fmt.Sprintf("b's LeaderTimeout %v, release of term 1 restored", bLT)
			if held {
				name = fmt.Sprintf("b's LeaderTimeout %v, held record of term 1 restored", bLT)
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					bTerm, cTerm, overlap := restoreWhileBLeads(t, restoreCase{cutB: true, hang: true, held: held, bLT: bLT})
					if overlap > 0 {
						t.Errorf("two live leaders: c led at term %d while b's leadership (term %d, %v lease) was live for %v more",
							cTerm, bTerm, bLT, overlap)
					}
					if cTerm <= bTerm {
						t.Errorf("c's term %d after b's %d", cTerm, bTerm)
					}
				})
			})
		}
	}
}

// TestTermsNeverRepeatAfterAVersion2TakeoverAndARestoreOfBothObjects: a
// mixed group with a version 2 writer, which neither claims its terms
// nor raises the term object (docs/protocol.md, 1.2). a (term 1)
// resigns, and the operator's backups of both objects are taken; the
// version 2 writer takes over at term 2 and releases; b waits that
// release out and, before claiming term 3, claims term 2 for the version
// 2 writer. The operator puts both backups back and b's calls hang from
// then. A fresh member d takes a's release at once, but its claim of
// term 2 is refused, so it finds b's claim of 3, waits out a lease and
// leads above b once b's lease has ended (mutation nogapclaims: d led at
// term 2 beside b at 3, for 11 s).
func TestTermsNeverRepeatAfterAVersion2TakeoverAndARestoreOfBothObjects(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New()
		la, err := restoreElector(t, "a", mem, 0).Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		lockBackup, etag, _ := mem.Get(ctx, testKey)
		termBackup, _, _ := mem.Get(ctx, testKey+".term")

		// The version 2 writer: takeover at term 2, then its release.
		held := []byte(`{"leaderID":"v2","leaderAddr":"","lastUpdated":"2000-01-01T00:00:01Z","term":2,"lease":"00000000000000f2","held":0}`)
		if etag, err = mem.PutIfMatch(ctx, testKey, held, etag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		released := []byte(`{"leaderID":"v2","leaderAddr":"","lastUpdated":"0001-01-01T00:00:00Z","term":2,"lease":"00000000000000f2","held":1000}`)
		if _, err = mem.PutIfMatch(ctx, testKey, released, etag); err != nil {
			t.Fatal(err)
		}

		sb := &cutOff{Store: mem, hang: true}
		lb, err := restoreElector(t, "b", sb, 0).Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute + 2500*time.Millisecond) // b renews; the restore falls between two renewals
		for key, data := range map[string][]byte{testKey: lockBackup, testKey + ".term": termBackup} {
			_, cur, _ := mem.Get(ctx, key)
			if _, err := mem.PutIfMatch(ctx, key, data, cur); err != nil {
				t.Fatal(err)
			}
		}
		sb.cut.Store(true)
		restoredAt := time.Now()

		ld, err := restoreElector(t, "d", mem, 0).Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer ld.Resign(ctx)
		wonAt := time.Now()
		t.Logf("b leads at term %d; d led at term %d %v after the restore", lb.Term(), ld.Term(), wonAt.Sub(restoredAt))
		if ld.Term() <= lb.Term() {
			t.Errorf("d led at term %d after b's term %d", ld.Term(), lb.Term())
		}
		if lb.Context().Err() == nil {
			<-lb.Context().Done()
			t.Errorf("two live leaders: d led while b's leadership was live for %v more", time.Since(wonAt))
		}
	})
}
