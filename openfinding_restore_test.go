//go:build s3lect_openfindings

// Open findings of the third adversarial review of the root election
// after issue 43's restore work (docs/findings-restores.md). Each test asserts
// the safe outcome and FAILS on the code it was written against; they are
// built only with -tags s3lect_openfindings:
//
//	go test -tags s3lect_openfindings -run 'TestRestoreOfAShorterLease|TestTermsNeverRepeatAfterAVersion2|TestSafetySimulationRestorer|TestSafetySimulationRestoresUnderMixed' -v .

package s3lect

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store/memstore"
)

// partitioned is a store that can be cut off by a partition: from then on
// every call hangs until its context ends (no reply, as a dropped route
// gives), rather than failing at once.
type partitioned struct {
	*memstore.Store
	cut atomic.Bool
}

func (s *partitioned) hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *partitioned) Get(ctx context.Context, key string) ([]byte, string, error) {
	if s.cut.Load() {
		return nil, "", s.hang(ctx)
	}
	return s.Store.Get(ctx, key)
}

func (s *partitioned) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	if s.cut.Load() {
		return nil, "", "", s.hang(ctx)
	}
	return s.Store.GetSighting(ctx, key)
}

func (s *partitioned) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if s.cut.Load() {
		return "", s.hang(ctx)
	}
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

// restoreUnderLongerLease runs the scenario of a rolling LeaderTimeout
// change: a (LeaderTimeout 15 s) leads at term 1 and writes its release
// (or, with held, is left holding: its record is kept as the operator's
// backup while it leads); b, already rolled onto LeaderTimeout bLT, leads
// at term 2; c (15 s) campaigns and becomes a stable follower, so it has
// seen term 2 and b's record (ttl bLT). Two minutes later an operator
// puts back a's record of term 1 (ttl 15 s) right before c's next read
// and b is cut off the store at that moment. It returns b's and c's terms
// and how long b's leadership stayed live after c won (0: not at all).
func restoreUnderLongerLease(t *testing.T, bLT time.Duration, held bool) (bTerm, cTerm uint64, overlap time.Duration) {
	mem := memstore.New()
	cfg := func(id string) ElectorConfig {
		return ElectorConfig{LockfilePath: testKey, ServerID: id, Logger: quietLogger}
	}
	ca := cfg("a")
	ca.Store = mem
	a, err := New(ca)
	if err != nil {
		t.Fatal(err)
	}
	sb := &partitioned{Store: mem}
	cb := cfg("b")
	cb.Store = sb
	cb.LeaderTimeout = bLT
	b, err := New(cb)
	if err != nil {
		t.Fatal(err)
	}
	sc := &armedRestore{Store: mem}
	cc := cfg("c")
	cc.Store = sc
	c, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var backup []byte
	if held {
		time.Sleep(20 * time.Second) // a renews a few times
		backup, _, _ = mem.Get(context.Background(), testKey)
	}
	if err := la.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !held {
		backup, _, _ = mem.Get(context.Background(), testKey)
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
	time.Sleep(2 * time.Minute) // c is a stable follower that has read b's term-2 record
	var restoredAt time.Time
	sc.arm(map[string][]byte{testKey: backup}, func() { restoredAt = time.Now(); sb.cut.Store(true) })
	w := <-wonc
	t.Logf("restored %s; c led at term %d %v after the restore", backup, w.term, w.at.Sub(restoredAt))
	cTerm = w.term
	if w.at.IsZero() {
		t.Fatal("c never led")
	}
	if lb.Context().Err() == nil {
		<-lb.Context().Done()
		overlap = time.Since(w.at)
	}
	t.Logf("b's leadership ended %v after the restore: %v", time.Since(restoredAt), context.Cause(lb.Context()))
	a.Close()
	b.Close()
	c.Close()
	return bTerm, cTerm, overlap
}

// TestRestoreOfAShorterLeaseIsWaitedOutForTheLongerLeaseLive: a rolling
// change of LeaderTimeout (15 s -> 30 s) and a restore. The live leader b
// (term 2) has a 30 s lease; the operator puts the lockfile back to a
// record of term 1 written under the old 15 s LeaderTimeout (a's release,
// or a's held record), and b is cut off the store at that moment. c
// (LeaderTimeout 15 s) already knew term 2, so section 1.1's "term claimed
// since first seen" rule does not fire, and section 2.1 waits the restored
// record out "like a held record" for the lease it states (15 s), not the
// 30 s lease of the claimed term above it that the term object and the
// claim of term 2 both state. c leads at term 3 about 15 s after the
// restore while b's lease runs on for about 15 s more.
//
// Schedule (synctest, defaults except b's LeaderTimeout 30 s):
//
//	t=0      a leads term 1 (ttl 15000); [held: renews 20 s, record kept]; a resigns
//	         b campaigns, leads term 2 (ttl 30000); c campaigns, stable follower
//	t≈2m15s  operator puts a's term-1 record back just before c's read; b's
//	         store calls hang from then on (a partition: no reply, no error)
//	+15 s    c leads at term 3 (it waited lease.Wait(15 s, 15000) from its
//	         first sight of the restore; term read h=2 = what it knew: no restart)
//	+20.8 s  b's context ends (its last renewal's send + 30 s - 3 s margin)
//	         -> two live leaders for 5.79 s (both sub-cases)
//
// Suggested fix: a view whose term is below a term known to be claimed is
// waited out for the longest lease known to be stated on the lockfile
// (sh.maxTTL, kept from claims, the term object and records seen), not the
// restored record's own ttl; or the claim's ttl is remembered with the
// term (v.claimed carries its ttl).
func TestRestoreOfAShorterLeaseIsWaitedOutForTheLongerLeaseLive(t *testing.T) {
	for _, bLT := range []time.Duration{30 * time.Second, 18 * time.Second} {
		for _, held := range []bool{false, true} {
			name := fmt.Sprintf("b's LeaderTimeout %v, release of term 1 restored", bLT)
			if held {
				name = fmt.Sprintf("b's LeaderTimeout %v, held record of term 1 restored", bLT)
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					bTerm, cTerm, overlap := restoreUnderLongerLease(t, bLT, held)
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

// TestSafetySimulationRestoresUnderMixedAndRollingLeases: the restorer
// variant (sim_restore_test.go) in worlds whose nodes run different
// LeaderTimeouts (each within 20% of the seed's: mixedlease) or change
// them one by one mid-run (rolling); the restorer's own variant runs one
// configuration for all nodes. restorermixed failed 8 of 4,000 seeds in
// 1,000-4,999 (1583, 2222, 2557, ...): the ones worked through are
// protocol.md 2.1's limit (b) with the leader cut off, as in the test
// below, not the shorter-ttl restore above. Replay a seed with
// -sim.seed=N. Runs 200 seeds per variant by default (about a minute).
func TestSafetySimulationRestoresUnderMixedAndRollingLeases(t *testing.T) {
	defer setMutation(t)()
	for _, v := range []simVariant{
		{name: "restorermixed", restore: true, mixed: true},
		{name: "restorerrolling", restore: true, rolling: true},
	} {
		t.Run(v.name, func(t *testing.T) {
			simworld.Seeds(t, v.name, func(t *testing.T, seed int64) map[string]int { return simulate(t, seed, v) })
		})
	}
}

// TestTermsNeverRepeatAfterAVersion2TakeoverAndARestoreOfBothObjects: a
// mixed group with a version 2 writer (records with term, lease and held,
// no ttl; it neither creates claims nor raises the term object, protocol.md
// 1.2). Its takeover uses a term nobody claimed, so the claims are no
// longer contiguous above it: the next version 3 takeover claims the term
// after it and leaves a gap. An operator then puts back both objects as
// they were before the version 2 takeover, and a fresh member d claims the
// gap's term, which is free, and leads below the live leader's term at
// once: two live leaders and a lower term. protocol.md 1.2 and
// operations.md say terms stay unique and rising across the writes of
// version 2, and 1.1's "claims are contiguous, below, so this is exact"
// assumes every term was claimed.
//
// Schedule (synctest, defaults):
//
//	a (v3) leads term 1 (claim 1, term object 1) and resigns: backup of
//	  lockfile (a's release) and term object (term 1) taken here
//	a version 2 writer takes the release over at term 2 (no claim, term
//	  object untouched) and releases it (no ttl)
//	b (v3) waits that release out like a held record (no ttl), term read
//	  h = 1, claims 3 (no claim 2 exists) and leads at term 3
//	operator puts back both backups; b's store calls hang from then on
//	fresh d: a's release of term 1 (claimed = term = 1) is taken at once,
//	  term read h = 1, claim 2 is created (free), d leads at term 2
//	  while b is live at term 3
//
// Suggested fix: a takeover over a record whose term has no claim (or
// whose term exceeds the term object's) creates the claims it skips, or
// claims only the next term after the term object's and refuses (waits
// out) a view above it; or the docs state version 2 writers in the group
// as a limit of 1.1 under restores.
func TestTermsNeverRepeatAfterAVersion2TakeoverAndARestoreOfBothObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New()
		cfg := func(id string) ElectorConfig {
			return ElectorConfig{LockfilePath: testKey, ServerID: id, Logger: quietLogger}
		}
		ca := cfg("a")
		ca.Store = mem
		a, err := New(ca)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		la, err := a.Campaign(t.Context())
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

		sb := &partitioned{Store: mem}
		cb := cfg("b")
		cb.Store = sb
		b, err := New(cb)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		lb, err := b.Campaign(t.Context())
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

		cd := cfg("d")
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
		wonAt := time.Now()
		t.Logf("b leads at term %d; d led at term %d %v after the restore", lb.Term(), ld.Term(), wonAt.Sub(restoredAt))
		if ld.Term() <= lb.Term() {
			t.Errorf("d led at term %d after b's term %d", ld.Term(), lb.Term())
		}
		if lb.Context().Err() == nil {
			<-lb.Context().Done()
			t.Errorf("two live leaders: d led while b's leadership was live for %v more", time.Since(wonAt))
		}
		ld.Resign(ctx)
	})
}

// TestSafetySimulationRestorerPutsBackAnUnreadRenewalOfACutOffLeader replays
// the restorer variant's failing seeds: 1647 (in CI's own range, 0-1,999:
// .ci/run's 2,000 seeds fail), and 9 of 5,000 in 30,000-34,999. Each is
// two live leaders, 4 to 619 ms,
// after the operator put back an older version of the live leader's own
// record (same leader, term and lease) that the follower had not read,
// with the leader cut off at the restore: protocol.md 2.1's limit (b),
// which the docs state and the simulation's checker does not excuse.
// Seed 30377, for one: n1 leads term 1 (LeaderTimeout 860 ms,
// FrequentInterval 200 ms); at 0.656 s its record of held 200 (stamped
// 0.241 s) is put back and n1 is cut off; n2 counts 3.2's bound from that
// "later send" and leads at 1.407 s, 751 ms after the restore; n1's lease
// from its last renewal runs to 1.411 s. Replay one with
//
//	go test -run 'TestSafetySimulation$/restorer' -sim.seed=30377 -v .
func TestSafetySimulationRestorerPutsBackAnUnreadRenewalOfACutOffLeader(t *testing.T) {
	defer setMutation(t)()
	v := simVariant{name: "restorer", restore: true}
	for _, seed := range []int64{1647, 30377, 30603, 30695, 30990, 32749, 33369, 34272, 34532, 34716} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { simulate(t, seed, v) })
		})
	}
}
