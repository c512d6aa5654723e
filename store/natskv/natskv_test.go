package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/natskv"
	"github.com/s3lect/s3lect/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// natsServer is a real nats-server process (the pinned binary .ci/run
// installs; S3LECT_TEST_NATS_SERVER names it) with JetStream, on a loopback
// port, storing into a temporary directory with every write synced before
// it is acknowledged (sync_interval: always).
type natsServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
}

func startNATS(t testing.TB) *natsServer {
	t.Helper()
	bin := os.Getenv("S3LECT_TEST_NATS_SERVER")
	if bin == "" {
		s3test.Need(t, "no nats-server: run `bash .ci/run`, which installs the pinned nats-server, or `go install github.com/nats-io/nats-server/v2@v2.14.5` and set S3LECT_TEST_NATS_SERVER to the binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ns := &natsServer{t: t, bin: bin, dir: t.TempDir(), port: port}
	conf := filepath.Join(ns.dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", port, filepath.Join(ns.dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ns.start()
	t.Cleanup(ns.stop)
	return ns
}

// start runs the server and waits until it accepts connections.
func (ns *natsServer) start() {
	ns.t.Helper()
	cmd := exec.Command(ns.bin, "-c", filepath.Join(ns.dir, "nats.conf"))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		ns.t.Fatalf("nats-server: %v", err)
	}
	ns.cmd = cmd
	for range 100 {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ns.port))
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	ns.t.Fatalf("nats-server did not accept connections on 127.0.0.1:%d within 10s", ns.port)
}

// stop kills the server, as a crash would: no goodbye to its clients.
func (ns *natsServer) stop() {
	if ns.cmd != nil {
		ns.cmd.Process.Kill()
		ns.cmd.Wait()
		ns.cmd = nil
	}
}

// bucket connects a new client to the server and opens (creating if need
// be) the ELECTIONS bucket. The connection closes when the test ends.
func (ns *natsServer) bucket(t testing.TB) (jetstream.KeyValue, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", ns.port),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "ELECTIONS"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return kv, nc
}

func TestConformance(t *testing.T) {
	ns := startNATS(t)
	kv, _ := ns.bucket(t)
	storetest.Run(t, func(*testing.T) store.Store { return natskv.New(kv) })
}

func TestKeyMapping(t *testing.T) {
	cases := []struct{ path, key string }{
		{"leader/my-group.json", "leader/my-group=2Ejson"},
		{"shards/17.json", "shards/17=2Ejson"},
		{"a b:c*d>e=f", "a=20b=3Ac=2Ad=3Ee=3Df"},
		{".hidden.", "=2Ehidden=2E"},
		{"ünï", "=C3=BCn=C3=AF"},
	}
	for _, tc := range cases {
		if got := natskv.Key(tc.path); got != tc.key {
			t.Errorf("Key(%q) = %q; want %q", tc.path, got, tc.key)
		}
		if back, err := natskv.Path(tc.key); err != nil || back != tc.path {
			t.Errorf("Path(%q) = %q, %v; want %q", tc.key, back, err, tc.path)
		}
	}
	for _, bad := range []string{"x=", "x=4", "x=ZZ"} {
		if _, err := natskv.Path(bad); err == nil {
			t.Errorf("Path(%q) = nil error; want one", bad)
		}
	}
	// Every mapped path is a valid key: a store round trip works.
	ns := startNATS(t)
	kv, _ := ns.bucket(t)
	st := natskv.New(kv)
	for _, tc := range cases {
		if _, err := st.PutIfMatch(t.Context(), tc.path, []byte("{}"), ""); err != nil {
			t.Errorf("PutIfMatch(%q) = %v", tc.path, err)
		}
	}
	if _, err := st.PutIfMatch(t.Context(), "k", []byte("{}"), "not-a-revision"); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("PutIfMatch with a foreign etag = %v; want ErrPreconditionFailed", err)
	}
}

var quiet = slog.New(slog.DiscardHandler)

func config(kv jetstream.KeyValue, key, id string) s3lect.ElectorConfig {
	return s3lect.ElectorConfig{
		Store: natskv.New(kv), LockfilePath: key, ServerID: id,
		FrequentInterval: 200 * time.Millisecond, InfrequentInterval: 600 * time.Millisecond, LeaderTimeout: time.Second,
		Logger: quiet,
	}
}

// span is one leadership as seen from outside, on this process's clock.
type span struct {
	id         string
	term       uint64
	start, end time.Time
}

type recorder struct {
	mu    sync.Mutex
	spans []*span
	wins  chan *span
}

// campaignLoop campaigns with e until ctx ends, recording each leadership.
func (r *recorder) campaignLoop(ctx context.Context, e *s3lect.Elector, id string, done *sync.WaitGroup) {
	done.Add(1)
	go func() {
		defer done.Done()
		for ctx.Err() == nil {
			lead, err := e.Campaign(ctx)
			if err != nil {
				return
			}
			s := &span{id: id, term: lead.Term(), start: time.Now()}
			r.mu.Lock()
			r.spans = append(r.spans, s)
			r.mu.Unlock()
			r.wins <- s
			<-lead.Context().Done()
			r.mu.Lock()
			s.end = time.Now()
			r.mu.Unlock()
		}
	}()
}

func (r *recorder) next(t *testing.T) *span {
	t.Helper()
	select {
	case s := <-r.wins:
		return s
	case <-time.After(30 * time.Second): // a liveness bound
		t.Fatal("no leader within 30s")
		return nil
	}
}

// check fails on overlapping leaderships or terms that do not rise.
func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	spans := slices.Clone(r.spans)
	slices.SortFunc(spans, func(a, b *span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		if prev.end.IsZero() || prev.end.After(cur.start) {
			t.Errorf("%s term %d overlaps %s term %d", prev.id, prev.term, cur.id, cur.term)
		}
		if cur.term <= prev.term {
			t.Errorf("term went from %d to %d", prev.term, cur.term)
		}
	}
}

// electAll starts electors a, b and c, each on its own connection to ns,
// campaigning in a loop on key; they stop when the test ends.
func electAll(t *testing.T, ns *natsServer, key string) (*recorder, map[string]*s3lect.Elector, map[string]*nats.Conn) {
	t.Helper()
	rec := &recorder{wins: make(chan *span, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	electors := map[string]*s3lect.Elector{}
	conns := map[string]*nats.Conn{}
	for _, id := range []string{"a", "b", "c"} {
		kv, nc := ns.bucket(t)
		e, err := s3lect.New(config(kv, key, id))
		if err != nil {
			t.Fatal(err)
		}
		electors[id], conns[id] = e, nc
		rec.campaignLoop(ctx, e, id, &loops)
	}
	t.Cleanup(func() {
		cancel()
		for _, e := range electors {
			e.Close()
		}
		loops.Wait()
	})
	return rec, electors, conns
}

func TestElectionOnNATS(t *testing.T) {
	t.Parallel() // a nats-server of its own: side by side with the other elections
	rec, electors, conns := electAll(t, startNATS(t), "leader/nats-e2e.json")
	first := rec.next(t)
	time.Sleep(2 * time.Second)

	// Resign: the next leader has the next term.
	lead := first
	electors[lead.id].Close() // Close resigns, releasing the lockfile
	second := rec.next(t)
	// Terms rise but need not be consecutive: a takeover raises the term
	// object before it writes the lockfile, and one whose lockfile write
	// fails or is answered too late (a loaded machine) has spent its term.
	if second.term <= first.term {
		t.Errorf("term after resign = %d; want above %d", second.term, first.term)
	}
	time.Sleep(2 * time.Second)

	// Crash: the leader's connection dies and it never resigns.
	conns[second.id].Close()
	third := rec.next(t)
	if third.term <= second.term {
		t.Errorf("term after crash = %d; want above %d", third.term, second.term)
	}
	if third.id == second.id {
		t.Errorf("%s led again after its connection was closed", third.id)
	}
	rec.check(t)
}

func TestServerRestartUnderElection(t *testing.T) {
	t.Parallel() // a nats-server of its own: side by side with the other elections
	ns := startNATS(t)
	rec, _, _ := electAll(t, ns, "leader/restart.json")
	first := rec.next(t)
	time.Sleep(2 * time.Second)

	ns.stop() // longer than a lease: the leader must step down
	time.Sleep(2 * time.Second)
	rec.mu.Lock()
	stepped := !first.end.IsZero()
	rec.mu.Unlock()
	if !stepped {
		t.Error("the leader kept its leadership through a 2s outage of a 1s lease")
	}
	ns.start() // same port, same data: the clients reconnect

	deadline := time.Now().Add(30 * time.Second)
	for {
		rec.mu.Lock()
		last := rec.spans[len(rec.spans)-1]
		recovered := last.start.After(first.start) && last.end.IsZero()
		rec.mu.Unlock()
		if recovered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader within 30s of the server's restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	rec.check(t)
}

// copyDir copies the tree at src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", src, dst, err)
	}
}

// TestRestoreLosesAcknowledgedWrites breaks the store contract the way an
// operator can: nats-server is killed, and restarted from an older copy of
// its store directory, so writes it acknowledged are gone and revisions
// already handed out are handed out again, for other bytes. The election
// must still never have two leaders at once, and never grant a term twice.
func TestRestoreLosesAcknowledgedWrites(t *testing.T) {
	t.Parallel() // a nats-server of its own: side by side with the other elections
	ns := startNATS(t)
	rec, _, conns := electAll(t, ns, "leader/restore.json")
	first := rec.next(t)
	time.Sleep(1500 * time.Millisecond) // renewals

	// The backup: a copy taken while the server is down.
	ns.stop()
	backup := t.TempDir()
	copyDir(t, filepath.Join(ns.dir, "js"), backup)
	ns.start()

	// Progress the backup will not have: renewals and a takeover.
	time.Sleep(2 * time.Second)
	rec.mu.Lock()
	leader := rec.spans[len(rec.spans)-1]
	rec.mu.Unlock()
	conns[leader.id].Close() // crash the current leader
	rec.next(t)
	time.Sleep(2 * time.Second)

	// Crash the server and restore the older state.
	ns.stop()
	if err := os.RemoveAll(filepath.Join(ns.dir, "js")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, filepath.Join(ns.dir, "js"))
	ns.start()
	time.Sleep(5 * time.Second) // the electors meet the older state

	rec.check(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	terms := map[uint64]string{}
	for _, s := range rec.spans {
		if who, dup := terms[s.term]; dup {
			t.Errorf("term %d granted twice: to %s and to %s", s.term, who, s.id)
		}
		terms[s.term] = s.id
	}
	for _, s := range rec.spans {
		t.Logf("%s term %d from %s to %s", s.id, s.term, s.start.Format("15:04:05.000"), s.end.Format("15:04:05.000"))
	}
	_ = first
}

// warnings records the "risk" attribute of every warning logged.
type warnings struct {
	slog.Handler
	mu    sync.Mutex
	risks []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "risk" {
			w.mu.Lock()
			w.risks = append(w.risks, a.Value.String())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func TestWarnsOnceAboutRiskySettings(t *testing.T) {
	ns := startNATS(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", ns.port))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  jetstream.KeyValueConfig
		want []string
	}{
		{jetstream.KeyValueConfig{Bucket: "SAFE"}, nil},
		{jetstream.KeyValueConfig{Bucket: "RISKY", Storage: jetstream.MemoryStorage, TTL: time.Hour}, []string{"memory storage", "bucket TTL"}},
	} {
		kv, err := js.CreateOrUpdateKeyValue(t.Context(), tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := &warnings{}
		st := natskv.New(kv, natskv.WithLogger(slog.New(w)))
		etag := ""
		for i := range 3 {
			if etag, err = st.PutIfMatch(t.Context(), "leader/x.json", fmt.Appendf(nil, `{"n":%d}`, i), etag); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(w.risks, tc.want) {
			t.Errorf("bucket %s: warnings %q; want %q, once each", tc.cfg.Bucket, w.risks, tc.want)
		}
	}
}

// TestListOnNATS checks what the conformance suite cannot: keys in the
// bucket that no path maps to, deleted and purged keys, listings in the
// order of paths (not of NATS keys), more keys than the watch's buffer
// holds (256), and listings cut short by their context, which must leave
// no goroutine behind (goleak, in TestMain).
func TestListOnNATS(t *testing.T) {
	ns := startNATS(t)
	kv, _ := ns.bucket(t)
	st := natskv.New(kv)
	ctx := t.Context()
	var want []store.Entry
	for _, path := range []string{"pool/s/a0", "pool/s/a.json", "pool/s/b c", "pool/s/z"} {
		etag, err := st.PutIfMatch(ctx, path, []byte(`{}`), "")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, store.Entry{Key: path, ETag: etag})
	}
	// "a.json" sorts before "a0" as a path; its key "a=2Ejson" after "a0".
	want[0], want[1] = want[1], want[0]
	for _, path := range []string{"pool/s/gone", "pool/s/purged", "pool/t/x", "pool/sx"} {
		if _, err := st.PutIfMatch(ctx, path, []byte(`{}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, natskv.Key("pool/s/gone")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, natskv.Key("pool/s/purged")); err != nil {
		t.Fatal(err)
	}
	for _, foreign := range []string{"pool/s/raw.dot", "pool/s/x=2e"} { // no path maps to these
		if _, err := kv.Put(ctx, foreign, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.List(ctx, "pool/s/")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List(pool/s/) = %v, %v; want %v", got, err, want)
	}

	const many = 600
	for i := range many {
		if _, err := kv.Create(ctx, natskv.Key(fmt.Sprintf("many/%03d", i)), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	got, err = st.List(ctx, "many/")
	if err != nil || len(got) != many || got[0].Key != "many/000" || got[many-1].Key != fmt.Sprintf("many/%03d", many-1) {
		t.Fatalf("List(many/) = %d entries, %v; want %d, from many/000 to many/%03d", len(got), err, many, many-1)
	}
	// Deadlines that end some listings before, some during and some after
	// the watch: each gives the whole listing or the context's error.
	cut := 0
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond} {
		dctx, cancel := context.WithTimeout(ctx, d)
		got, err := st.List(dctx, "many/")
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			cut++
		case err != nil || len(got) != many:
			t.Errorf("List(many/) with a deadline of %v = %d entries, %v; want %d or DeadlineExceeded", d, len(got), err, many)
		}
	}
	t.Logf("%d of 8 listings ended by their deadline", cut)
}

// BenchmarkListOnNATS lists the 100 sessions of a pool (List), in a bucket
// of their own and in one that also holds 10,000 shard records: NATS
// cannot narrow the watch to the prefix, so a listing streams the headers
// of every key in the bucket. GetEach reads the 100 sessions one by one
// instead, as a pool does on a store without List.
//
//	S3LECT_TEST_NATS_SERVER=... go test -run XXX -bench ListOnNATS -benchtime 20x ./store/natskv
func BenchmarkListOnNATS(b *testing.B) {
	ns := startNATS(b)
	_, nc := ns.bucket(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	for _, shards := range []int{0, 10_000} {
		kv, err := js.CreateOrUpdateKeyValue(b.Context(), jetstream.KeyValueConfig{Bucket: fmt.Sprintf("POOL%d", shards)})
		if err != nil {
			b.Fatal(err)
		}
		st := natskv.New(kv)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		for i := range shards + 100 {
			key := fmt.Sprintf("pool/sessions/w%03d", i)
			if i >= 100 {
				key = fmt.Sprintf("pool/shards/%05d", i-100)
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := kv.Create(context.Background(), natskv.Key(key), []byte(`{}`)); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		b.Run(fmt.Sprintf("shards=%d/List", shards), func(b *testing.B) {
			for b.Loop() {
				got, err := st.List(b.Context(), "pool/sessions/")
				if err != nil || len(got) != 100 {
					b.Fatalf("List() = %d entries, %v; want 100", len(got), err)
				}
			}
		})
		b.Run(fmt.Sprintf("shards=%d/GetEach", shards), func(b *testing.B) {
			for b.Loop() {
				for i := range 100 {
					if _, _, err := st.Get(b.Context(), fmt.Sprintf("pool/sessions/w%03d", i)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// stuckWatches is a bucket whose first n watches never say that every key
// has arrived: the end-of-keys marker (a nil entry) is swallowed, as when
// a consumer stops delivering before its last key.
type stuckWatches struct {
	jetstream.KeyValue
	mu sync.Mutex
	n  int
}

func (s *stuckWatches) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := s.KeyValue.WatchAll(ctx, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.n == 0 {
		return w, err
	}
	s.n--
	out := make(chan jetstream.KeyValueEntry)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			select {
			case out <- e:
			case <-done:
			}
		}
	}()
	return &swallowing{KeyWatcher: w, out: out, done: done}, nil
}

type swallowing struct {
	jetstream.KeyWatcher
	out  chan jetstream.KeyValueEntry
	done chan struct{}
	once sync.Once
}

func (w *swallowing) Updates() <-chan jetstream.KeyValueEntry { return w.out }

func (w *swallowing) Stop() error {
	w.once.Do(func() { close(w.done) })
	return w.KeyWatcher.Stop()
}

func TestListGivesUpAStalledWatch(t *testing.T) {
	natskv.SetListStall(t.Cleanup, 300*time.Millisecond)
	ns := startNATS(t)
	kv, _ := ns.bucket(t)
	for _, path := range []string{"stall/a", "stall/b"} {
		if _, err := natskv.New(kv).PutIfMatch(t.Context(), path, []byte(`{}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	once := natskv.New(&stuckWatches{KeyValue: kv, n: 1})
	got, err := once.List(t.Context(), "stall/")
	if err != nil || len(got) != 2 {
		t.Fatalf("List() over one stalled watch = %v, %v; want both keys from the second watch", got, err)
	}
	twice := natskv.New(&stuckWatches{KeyValue: kv, n: 2})
	got, err = twice.List(t.Context(), "stall/")
	if err == nil || !strings.Contains(err.Error(), "delivered nothing") || !strings.Contains(err.Error(), `list "stall/"`) {
		t.Fatalf("List() over two stalled watches = %v, %v; want an error saying the watch delivered nothing, naming the listing", got, err)
	}
}
