package pool

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// Adversarial review of issue 28 (branch rev28). Each test below is a
// finding: it fails on the snapshot it was written against.

// untilSlot sleeps until the wall clock reads a multiple of testFI plus
// offset (the renewals come at multiples of FrequentInterval, the looks a
// quarter interval after them).
func untilSlot(offset time.Duration) {
	now := time.Now()
	next := now.Truncate(testFI).Add(offset)
	for !next.After(now) {
		next = next.Add(testFI)
	}
	time.Sleep(next.Sub(now))
}

// TestReviewRestoredSightingIsNotAged: a session object restored to the
// exact bytes of an older version has the same sighting (ETag and
// SHA-256) as that version: on S3 (and memstore) the ETag of a single-part
// object is the MD5 of its bytes. w1 last saw w2's session at p, then its
// reads of that object failed for a while (w2 renewed all along), and the
// operator restored the version w1 last saw. w1's next read finds "the
// same sighting, unchanged since p", counts w2 dead and takes w2's shard
// over while w2's leadership is live: w2 finds out only at its next
// renewal (If-Match on its own last write fails). The package doc
// promises one live leadership "whatever is deleted or restored".
func TestReviewRestoredSightingIsNotAged(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		fp := newFaultPools(t, []string{"s0", "s1"}, func(worker, shard string) string { return worker + "/" + shard })
		fp.blindKey = "pool/sessions/w2.json"
		defer fp.stop()
		fp.start("w1")
		fp.start("w2")
		time.Sleep(3 * testLT)
		live := map[string]started{}
		for len(fp.leads) > 0 {
			s := <-fp.leads
			live[s.id] = s
		}
		var x string
		for k, s := range live {
			if strings.HasPrefix(k, "w2/") && s.l.Context().Err() == nil {
				x = strings.TrimPrefix(k, "w2/")
			}
		}
		if x == "" {
			t.Fatalf("w2 leads nothing after 3 × LeaderTimeout: %v", live)
		}
		owner := live["w2/"+x]

		// Half an interval after a renewal: w1's look (a quarter interval
		// after it) has read the object as it is now.
		untilSlot(testFI / 2)
		synctest.Wait()
		sigma, _, err := fp.mem.Get(context.Background(), "pool/sessions/w2.json")
		if err != nil {
			t.Fatal(err)
		}
		fp.stores["w1"].blind.Store(true) // w1's reads of w2's session fail for a while
		time.Sleep(2 * testLT)
		// Just after w2's renewal, before w1's next look: the operator
		// restores the version w1 saw last.
		untilSlot(testFI / 10)
		synctest.Wait()
		if owner.l.Context().Err() != nil {
			t.Fatalf("w2's leadership of %s ended before the restore: %v", x, context.Cause(owner.l.Context()))
		}
		fp.mem.Set("pool/sessions/w2.json", sigma)
		fp.stores["w1"].blind.Store(false)
		deadline := time.After(testFI)
		for {
			select {
			case s := <-fp.leads:
				if s.id == "w1/"+x && owner.l.Context().Err() == nil {
					t.Fatalf("w1 took %s at term %d while w2's leadership (term %d) was live", x, s.term, owner.term)
				}
				continue
			case <-deadline:
			}
			break
		}
	})
}

// recordingStore keeps every write that lands on the keys it watches.
type recordingStore struct {
	store.Store
	mu     sync.Mutex
	writes map[string][][]byte
}

func (r *recordingStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	tag, err := r.Store.PutIfMatch(ctx, key, data, etag)
	if err == nil {
		r.mu.Lock()
		r.writes[key] = append(r.writes[key], data)
		r.mu.Unlock()
	}
	return tag, err
}

// TestReviewOlderSessionRestoredAndRecordDeleted: w2 leads x; the
// operator deletes x's record and restores w2's session object to an
// older version of the same session (its first write, which lists no
// shard). A claimer that reads the fresh member list and every session
// finds w2's session live and not listing x, and creates x at once, at
// term 1, the term w2 leads: two live owners and a repeated term, until
// w2's next renewal fails. The package doc's one uncovered case needs the
// member list deleted too and a worker started since; here the list is
// intact and w3 has read w2's session and x's record before. (A deleted
// record is watched for LeaderTimeout only by a worker that remembers
// having seen it, and every worker forgets the shards others list.)
func TestReviewOlderSessionRestoredAndRecordDeleted(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		p1, mem, sess1, stop1 := claimer(t, "w3", []string{"w2", "w3"}, "x")
		defer stop1()
		rec := &recordingStore{Store: mem, writes: map[string][][]byte{}}
		type lead2 struct {
			term uint64
			ctx  context.Context
		}
		leads := make(chan lead2, 4)
		p2, err := New(Config{Store: rec, Prefix: "p/", ID: "w2", Shards: []string{"x"}, Logger: quiet,
			Work: func(ctx context.Context, _ string, l *s3lect.Leadership) {
				leads <- lead2{l.Term(), ctx}
				<-ctx.Done()
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx2, cancel2 := context.WithCancel(context.Background())
		done2 := make(chan struct{})
		go func() { defer close(done2); p2.Run(ctx2) }()
		defer func() { cancel2(); <-done2 }()

		var owner lead2
		select {
		case owner = <-leads:
		case <-time.After(3 * testLT):
			t.Fatal("w2 did not lead x within 3 × LeaderTimeout")
		}
		time.Sleep(testFI) // w2's renewals list x
		synctest.Wait()
		cur, _, _ := mem.Get(context.Background(), "p/sessions/w2.json")
		curRec, _ := parseSession(cur)
		if curRec.Shards["x"] != owner.term {
			t.Fatalf("w2's session does not list x at term %d: %s", owner.term, cur)
		}
		var first []byte
		rec.mu.Lock()
		for _, d := range rec.writes["p/sessions/w2.json"] {
			if r, err := parseSession(d); err == nil && r.Session == curRec.Session && r.Seq == 0 {
				first = d
			}
		}
		rec.mu.Unlock()
		if first == nil {
			t.Fatal("no first write of w2's session recorded")
		}

		// w3 has looked at x and read w2's session before: it is no worker
		// started since.
		if won := p1.st.claim(t.Context(), []string{"x"}, 1, sess1); won != 0 {
			t.Fatalf("w3 claimed x while w2 led it, before any deletion or restore")
		}
		// Its next look finds x listed by w2's live session and forgets
		// it, as every worker forgets the shards that others lead.
		time.Sleep(testFI)
		p1.st.readAround(t.Context())
		p1.st.wanted(p1.st.view(time.Now(), true), 1, time.Now())
		mem.Delete("p/shards/x.json")
		mem.Set("p/sessions/w2.json", first) // an older version of w2's live session

		won := p1.st.claim(t.Context(), []string{"x"}, 1, sess1)
		if won > 0 && owner.ctx.Err() == nil {
			t.Errorf("w3 claimed x at term %d while w2's leadership of x (term %d) was live", p1.st.mine["x"].term, owner.term)
		}
	})
}

// TestReviewCutOffRunReturnsWithinLease: a worker whose store stops
// answering (requests hang, as on a partition) is told to stop; its Run
// should return within its lease (issue 28's target: "a cut-off worker's
// Run returns within its lease"). It releases its shards one at a time,
// each with the whole retry schedule (3 × FrequentInterval + 1.1 s), then
// the session (3 × FrequentInterval).
func TestReviewCutOffRunReturnsWithinLease(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		fs := faultstore.New(mem)
		defer fs.Unstall()
		var shards []string
		for i := range 8 {
			shards = append(shards, "s"+string(rune('a'+i)))
		}
		p, err := New(Config{Store: fs, Prefix: "p/", ID: "w1", Shards: shards, Logger: quiet,
			Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.Run(ctx) }()
		time.Sleep(3 * testLT)
		if n := len(p.Leading()); n != len(shards) {
			t.Fatalf("leads %d shards after 3 × LeaderTimeout; want %d", n, len(shards))
		}
		fs.Stall()
		cancel()
		start := time.Now()
		select {
		case <-done:
		case <-time.After(20 * testLT):
		}
		if took := time.Since(start); took > testLT {
			t.Errorf("Run returned %v after its context ended with the store cut off; want within LeaderTimeout (%v)", took, testLT)
		}
		fs.Unstall()
		<-done
	})
}

// TestReviewTombstoneAgedByTheClaimersLease: a rolling change of
// configuration: w2 still runs with FrequentInterval 40 s and
// LeaderTimeout 90 s and leads x; its connection hangs just after a
// renewal (its lease runs 81 s from it).
// The operator deletes x's record and w2's session object. w1, started
// since with the default 15 s (so it never read a record stating w2's
// ttl), buries w2's absent object and ages the tombstone by its own
// LeaderTimeout alone, then creates x while w2's leadership is live: the
// only objects that stated w2's ttl are gone. The package doc: one live
// leadership whatever is deleted, and "a short lease never cuts a long
// one short".
func TestReviewTombstoneAgedByTheClaimersLease(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		type lead = reviewLead
		tp := &timedPool{t: t, leads: make(chan lead, 8)}
		leads, start := tp.leads, tp.start
		fs2 := faultstore.New(mem)
		defer func() {
			fs2.Unstall()
			tp.stop()
		}()
		const fi2, lt2 = 40 * time.Second, 90 * time.Second // w2's configuration, before the change
		start("w2", fs2, fi2, lt2)
		var owner lead
		select {
		case owner = <-leads:
		case <-time.After(3 * lt2):
			t.Fatal("w2 did not lead x")
		}
		time.Sleep(2 * fi2)
		now := time.Now() // just after w2's renewal, due at multiples of fi2
		time.Sleep(now.Truncate(fi2).Add(fi2 + time.Second).Sub(now))
		synctest.Wait()
		t.Logf("%v: w2 cut off; x's record and w2's session deleted", time.Now().Format("04:05.000"))
		fs2.Stall() // w2's requests hang from now on (it sees nobody, hands nothing over): its lease runs out 81 s after that renewal
		mem.Delete("p/shards/x.json")
		mem.Delete("p/sessions/w2.json")
		start("w1", mem, testFI, testLT)
		deadline := time.After(lt2)
		for {
			select {
			case l := <-leads:
				t.Logf("%v: %s leads x at term %d; w2 live %v (cause %v)", time.Now().Format("04:05.000"), l.id, l.term, owner.ctx.Err() == nil, context.Cause(owner.ctx))
				if l.id == "w1" && owner.ctx.Err() == nil {
					t.Fatalf("w1 took x at term %d while w2's leadership (term %d, LeaderTimeout 90 s) was live", l.term, owner.term)
				}
				continue
			case <-deadline:
			}
			break
		}
	})
}

// deniedStore fails every read of one key with a permanent error, as S3
// answers 403 AccessDenied to a key the worker's policy (or the object's
// encryption key) does not cover; once dead, every call fails.
type deniedStore struct {
	store.Store
	key  string
	deny atomic.Bool
	dead atomic.Bool
}

func (d *deniedStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if d.dead.Load() {
		return nil, "", errCrashed
	}
	if d.deny.Load() && key == d.key {
		return nil, "", store.Permanent(errors.New("AccessDenied"))
	}
	return d.Store.Get(ctx, key)
}

func (d *deniedStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if d.dead.Load() {
		return "", errCrashed
	}
	return d.Store.PutIfMatch(ctx, key, data, etag)
}

// warnCounter counts the log records at Warn or above.
type warnCounter struct {
	n    *atomic.Int64
	msgs *sync.Map
}

func (w warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.n.Add(1)
	w.msgs.Store(r.Message, true)
	return nil
}
func (w warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnCounter) WithGroup(string) slog.Handler      { return w }

// TestReviewUnreadableMemberBlocksEveryClaim: the member list names w0, a
// worker that left long ago (its session object released). Once w1 cannot
// read w0's session object (a permanent error: a policy or an encryption
// key that does not cover it), every claim waits for a clearance that
// never comes: when w2 dies, its shards stay unled for ever, and the pool
// logs nothing at Warn or above about why. The package doc: "When a
// worker dies the survivors take its shards over"; the member list never
// shrinks, so one such object stops every failover of the pool.
func TestReviewUnreadableMemberBlocksEveryClaim(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		mem.Set("p/members.json", encode(membersRecord{Pool: formatVersion, Workers: []string{"w0"}}))
		mem.Set("p/sessions/w0.json", encode(sessionRecord{Pool: formatVersion, Worker: "w0", Session: "00", TTL: ttlMillis(testLT), Released: true}))
		shards := []string{"a", "b", "c", "d"}
		warns := warnCounter{n: &atomic.Int64{}, msgs: &sync.Map{}}
		stores := map[string]*deniedStore{}
		pools := map[string]*Pool{}
		ctx, cancel := context.WithCancel(context.Background())
		var dones []chan struct{}
		defer func() {
			cancel()
			for _, d := range dones {
				<-d
			}
		}()
		for _, id := range []string{"w1", "w2"} {
			st := &deniedStore{Store: mem, key: "p/sessions/w0.json"}
			log := quiet
			if id == "w1" {
				log = slog.New(warns)
			}
			p, err := New(Config{Store: st, Prefix: "p/", ID: id, Shards: shards, Logger: log,
				Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			stores[id], pools[id] = st, p
			done := make(chan struct{})
			go func() { defer close(done); p.Run(ctx) }()
			dones = append(dones, done)
		}
		time.Sleep(4 * testLT)
		if n1, n2 := len(pools["w1"].Leading()), len(pools["w2"].Leading()); n1 != 2 || n2 != 2 {
			t.Fatalf("after 4 × LeaderTimeout w1 leads %d shards and w2 %d; want 2 each", n1, n2)
		}
		stores["w1"].deny.Store(true)
		stores["w2"].dead.Store(true) // w2 crashes
		warns.n.Store(0)
		time.Sleep(10 * testLT)
		if got := pools["w1"].Leading(); len(got) != len(shards) {
			var logged []string
			warns.msgs.Range(func(k, _ any) bool { logged = append(logged, k.(string)); return true })
			t.Errorf("10 × LeaderTimeout after w2 died, w1 leads %v of %v; %d records at Warn or above (%q)", got, shards, warns.n.Load(), logged)
		}
	})
}

// simAnyOp lifts the limits operatorEvents puts on the operator (a shard
// record deleted or restored only while its owner's session lists it, a
// session object only while its record holds every term it lists, never
// shard records and the member list in one world): the package doc
// promises one live leadership "whatever is deleted or restored", so
// TestShardSimulation then checks that alone (not terms).
var simAnyOp = flag.Bool("sim.anyop", false, "TestShardSimulation: the operator deletes and restores pool objects without the limits kept for the term check; only two live owners are checked")

// TestReviewRestoredSightingAfterARenewal: the same finding as
// TestReviewRestoredSightingIsNotAged, with no failed read: w1 reads w2's
// session σ; w2 renews it (σ'); the operator restores σ; w2 is then cut
// off (its requests hang) and its lease runs 0.9 × LeaderTimeout from
// the send of σ'. w1's reads keep finding σ, "unchanged since" before
// σ' was written, and w1 takes the shard over LeaderTimeout after its
// first sight of σ: before w2's lease from σ' ends. So a fix that ages
// a sighting anew after a failed read is not enough: a sighting needs an
// identity per write that a restore does not copy. Not covered (the
// package doc says so): the test checks the bound that does hold.
func TestReviewRestoredSightingAfterARenewal(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		fs2, leads, owner, stop := restorePair(t, mem, mem)
		defer stop()
		untilSlot(testFI / 2) // after w1's look at the quarter interval
		synctest.Wait()
		sigma, _, _ := mem.Get(context.Background(), "p/sessions/w2.json")
		untilSlot(testFI / 10) // w2 has renewed: σ'
		synctest.Wait()
		if now, _, _ := mem.Get(context.Background(), "p/sessions/w2.json"); string(now) == string(sigma) {
			t.Fatal("w2 did not renew its session")
		}
		mem.Set("p/sessions/w2.json", sigma)
		fs2.Stall()
		// The limit the package doc states: content-hash ETags give the
		// restored bytes the ETag they had, and w1 cannot tell σ from σ
		// restored. What holds: w1 waits a lease from its first sight of σ,
		// so the overlap is at most the time from that sight to σ''s send
		// (one renewal interval) less the margin. And w2, stalled, is dead
		// to w1 after that lease: w1 takes the shard over.
		if !restoreOverlap(t, leads, owner, 2*testLT) {
			t.Errorf("w1 did not take %s over within 2 × LeaderTimeout of w2's stall", owner.shard)
		}
	})
}

// restoreLead is a Work call of a pool runPairWorker runs.
type restoreLead struct {
	id, shard string
	term      uint64
	ctx       context.Context
}

// restorePair runs two workers over shards s0 and s1 under "p/" on mem:
// w1 through w1st, w2 through a faultstore it returns (to stall it), until
// w2 leads a shard (owner). Every Work call is sent on leads; stop ends
// both workers and waits for them.
func restorePair(t *testing.T, mem *memstore.Store, w1st store.Store) (w2 *faultstore.Store, leads chan restoreLead, owner restoreLead, stop func()) {
	leads = make(chan restoreLead, 16)
	w2 = faultstore.New(mem)
	stop1 := runPairWorker(t, "w1", w1st, leads)
	stop2 := runPairWorker(t, "w2", w2, leads)
	stop = func() {
		w2.Unstall()
		stop1()
		stop2()
	}
	time.Sleep(3 * testLT)
	for len(leads) > 0 {
		if l := <-leads; l.id == "w2" && l.ctx.Err() == nil {
			owner = l
		}
	}
	if owner.ctx == nil {
		stop()
		t.Fatal("w2 leads nothing after 3 × LeaderTimeout")
	}
	return w2, leads, owner, stop
}

// runPairWorker runs a pool as id over st, on shards s0 and s1 under
// "p/", sending every Work call on leads; stop ends it and waits for Run.
func runPairWorker(t *testing.T, id string, st store.Store, leads chan<- restoreLead) (stop func()) {
	p, err := New(Config{Store: st, Prefix: "p/", ID: id, Shards: []string{"s0", "s1"}, Logger: quiet,
		Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
			leads <- restoreLead{id, shard, l.Term(), ctx}
			<-ctx.Done()
		}})
	if err != nil {
		t.Fatal(err)
	}
	return runUntilStopped(p)
}

// restoreOverlap watches leads for up to d for w1 taking owner's shard,
// and fails when it does so while owner's leadership is live for longer
// than the exact restore's bound (docs/pool-protocol.md, "What is not
// covered"): a FrequentInterval less the margin. It reports whether w1
// took the shard.
func restoreOverlap(t *testing.T, leads chan restoreLead, owner restoreLead, d time.Duration) (taken bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l := <-leads:
			if l.id != "w1" || l.shard != owner.shard {
				continue
			}
			if owner.ctx.Err() == nil {
				took := time.Now()
				<-owner.ctx.Done()
				overlap := time.Since(took)
				t.Logf("w1 took %s at term %d while w2's leadership (term %d) was live, for %v", l.shard, l.term, owner.term, overlap)
				if limit := testFI - testLT/10; overlap > limit {
					t.Errorf("the two leaderships overlapped %v; want at most a FrequentInterval less the margin (%v)", overlap, limit)
				}
			}
			return true
		case <-deadline:
			return false
		}
	}
}

// TestReviewRestoresAreNotATwin: one process runs as w1; no other does.
// The operator restores its session object twice, each time to a version
// written by an earlier incarnation of w1 (a restart in between, as after
// two incidents restored from backups). The second restore makes Run
// return ErrDuplicateID, which Run's doc reserves for "another process
// running as the same worker": the worker stops and its shards go to
// the others (or, alone, stay unled until it is restarted).
func TestReviewRestoresAreNotATwin(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		rec := &recordingStore{Store: mem, writes: map[string][][]byte{}}
		run := func() (stop func() error) {
			p, err := New(Config{Store: rec, Prefix: "p/", ID: "w1", Shards: []string{"a"}, Logger: quiet,
				Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			return func() error { cancel(); return <-done }
		}
		// liveVersion returns a live (not released) version of a session of
		// w1 other than those in seen.
		liveVersion := func(seen map[string]bool) ([]byte, string) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, d := range rec.writes["p/sessions/w1.json"] {
				if r, err := parseSession(d); err == nil && !r.Released && r.Seq > 0 && !seen[r.Session] {
					return d, r.Session
				}
			}
			return nil, ""
		}
		seen := map[string]bool{}
		var old [][]byte
		for range 2 { // two earlier incarnations
			stop := run()
			time.Sleep(2 * testLT)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			d, s := liveVersion(seen)
			seen[s] = true
			old = append(old, d)
		}
		stop := run()
		time.Sleep(2 * testLT)
		for _, d := range old {
			mem.Set("p/sessions/w1.json", d)
			time.Sleep(2 * testLT)
		}
		if err := stop(); errors.Is(err, ErrDuplicateID) {
			t.Errorf("a lone worker's Run() = %v after two restores of its session object", err)
		}
	})
}

// TestReviewReleasedRecordOfAnEarlierSession: w2 left the pool once (its
// session object written released) and came back; its new session S2
// leads a shard whose record names S2. The operator restores w2's session
// object to the released version of the earlier session. clearance
// returns "clear" for any released session record before it compares the
// session the record names with the one the object holds: w1 counts w2
// gone and takes its shard at its next look, while S2's leadership is
// live until w2's next renewal fails. A released record proves only that
// the session it names leads nothing.
func TestReviewReleasedRecordOfAnEarlierSession(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		rec := &recordingStore{Store: mem, writes: map[string][][]byte{}}
		leads := make(chan restoreLead, 16)
		run := func(id string) (stop func()) { return runPairWorker(t, id, rec, leads) }
		stop1 := run("w1")
		defer stop1()
		stop2 := run("w2")
		time.Sleep(3 * testLT)
		stop2() // w2 leaves: its session object is written released
		var released []byte
		rec.mu.Lock()
		for _, d := range rec.writes["p/sessions/w2.json"] {
			if r, err := parseSession(d); err == nil && r.Released {
				released = d
			}
		}
		rec.mu.Unlock()
		if released == nil {
			t.Fatal("w2 left without writing its session released")
		}
		stop2 = run("w2") // and comes back
		defer stop2()
		time.Sleep(4 * testLT)
		var owner restoreLead
		for len(leads) > 0 {
			if l := <-leads; l.id == "w2" && l.ctx.Err() == nil {
				owner = l
			}
		}
		if owner.ctx == nil {
			t.Fatal("w2 leads nothing 4 × LeaderTimeout after it came back")
		}
		untilSlot(testFI / 10) // just after w2's renewal
		synctest.Wait()
		mem.Set("p/sessions/w2.json", released)
		deadline := time.After(testFI)
		for {
			select {
			case l := <-leads:
				if l.id == "w1" && l.shard == owner.shard && owner.ctx.Err() == nil {
					t.Fatalf("w1 took %s at term %d while w2's leadership (term %d) was live", l.shard, l.term, owner.term)
				}
				continue
			case <-deadline:
			}
			break
		}
	})
}

// TestReviewPrunedLongLeaseMember: as TestReviewTombstoneAgedByTheClaimersLease
// (w2 at FrequentInterval 40 s and LeaderTimeout 90 s leads x and is cut
// off; x's record and w2's session object are deleted; w1, at the default
// 15 s, starts since), then w0 starts 35 s after the deletions. Where the
// member list states each member's ttl, w1 waits w2's 90 s; but if w1 takes
// w2 off the member list once w2's tombstone has stood w1's own lease
// (and the list's ttl with it), w0 never learns that w2 exists: it
// creates x while w2's lease (81 s from its last renewal) runs.
func TestReviewPrunedLongLeaseMember(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		type lead = reviewLead
		tp := &timedPool{t: t, leads: make(chan lead, 8)}
		leads, start := tp.leads, tp.start
		fs2 := faultstore.New(mem)
		defer func() {
			fs2.Unstall()
			tp.stop()
		}()
		const fi2, lt2 = 40 * time.Second, 90 * time.Second
		start("w2", fs2, fi2, lt2)
		var owner lead
		select {
		case owner = <-leads:
		case <-time.After(3 * lt2):
			t.Fatal("w2 did not lead x")
		}
		time.Sleep(2 * fi2)
		now := time.Now()
		time.Sleep(now.Truncate(fi2).Add(fi2 + time.Second).Sub(now))
		synctest.Wait()
		fs2.Stall()
		mem.Delete("p/shards/x.json")
		mem.Delete("p/sessions/w2.json")
		t0 := time.Now()
		start("w1", mem, testFI, testLT)
		time.Sleep(35 * time.Second)
		members, _, _ := mem.Get(context.Background(), "p/members.json")
		t.Logf("member list 35 s after the deletions: %s", members)
		start("w0", mem, testFI, testLT)
		deadline := time.After(lt2)
		for {
			select {
			case l := <-leads:
				if l.id != "w2" && owner.ctx.Err() == nil {
					t.Fatalf("%s took x at term %d, %v after the deletions, while w2's leadership (term %d, LeaderTimeout 90 s) was live", l.id, l.term, time.Since(t0), owner.term)
				}
				continue
			case <-deadline:
			}
			break
		}
	})
}

// reviewLead is a shard leadership a worker of a timedPool reported.
type reviewLead struct {
	id   string
	term uint64
	ctx  context.Context
}

// timedPool starts workers of a one-shard pool ("x" under "p/"), each with
// timings of its own, that report their leaderships on leads; stop
// cancels every worker and waits for its Run to return.
type timedPool struct {
	t       *testing.T
	leads   chan reviewLead
	cancels []context.CancelFunc
	dones   []chan struct{}
}

func (tp *timedPool) start(id string, st store.Store, fi, lt time.Duration) {
	p, err := New(Config{Store: st, Prefix: "p/", ID: id, Shards: []string{"x"}, Logger: quiet,
		FrequentInterval: fi, LeaderTimeout: lt,
		Work: func(ctx context.Context, _ string, l *s3lect.Leadership) {
			tp.leads <- reviewLead{id, l.Term(), ctx}
			<-ctx.Done()
		}})
	if err != nil {
		tp.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	tp.cancels, tp.dones = append(tp.cancels, cancel), append(tp.dones, done)
}

func (tp *timedPool) stop() {
	for _, c := range tp.cancels {
		c()
	}
	for _, d := range tp.dones {
		<-d
	}
}

// readAround reads the member list and the session objects a look reads
// (lookSessions), as a look does before it decides.
func (s *loopState) readAround(ctx context.Context) {
	s.ctx = ctx
	s.observe()
	s.tk = tick{}
	s.runEffects(s.readMembers(nil, true, s.p.now(), func(c *core, now time.Time) []effect {
		return c.readSessions(nil, c.lookSessions(), now, func(*core, map[string]time.Time, time.Time) []effect { return nil })
	}))
}
