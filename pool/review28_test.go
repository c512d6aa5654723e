package pool

import (
	"context"
	"errors"
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
// member list deleted too; here it is intact.
func TestReviewOlderSessionRestoredAndRecordDeleted(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		p1, mem, sess1, stop1 := claimer(t, "w1", []string{"w1", "w2"}, "x")
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

		mem.Delete("p/shards/x.json")
		mem.Set("p/sessions/w2.json", first) // an older version of w2's live session

		won := p1.st.claim(t.Context(), []string{"x"}, 1, sess1)
		if won > 0 && owner.ctx.Err() == nil {
			t.Errorf("w1 claimed x at term %d while w2's leadership of x (term %d) was live", p1.st.mine["x"].term, owner.term)
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
		type lead struct {
			id   string
			term uint64
			ctx  context.Context
		}
		leads := make(chan lead, 8)
		var cancels []context.CancelFunc
		var dones []chan struct{}
		start := func(id string, st store.Store, fi, lt time.Duration) {
			p, err := New(Config{Store: st, Prefix: "p/", ID: id, Shards: []string{"x"}, Logger: quiet,
				FrequentInterval: fi, LeaderTimeout: lt,
				Work: func(ctx context.Context, _ string, l *s3lect.Leadership) {
					leads <- lead{id, l.Term(), ctx}
					<-ctx.Done()
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); p.Run(ctx) }()
			cancels, dones = append(cancels, cancel), append(dones, done)
		}
		fs2 := faultstore.New(mem)
		defer func() {
			fs2.Unstall()
			for _, c := range cancels {
				c()
			}
			for _, d := range dones {
				<-d
			}
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
