package s3lect

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// probe calls h as a liveness probe would and returns the status and body.
func probe(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// stuckStore is a store whose calls, once wedge is called, block until
// unwedge, whatever their context says: a call
// wedged in a driver that ignores cancellation.
type stuckStore struct {
	store.Store
	mu   sync.Mutex
	gate chan struct{} // nil: calls pass
}

func (s *stuckStore) wait() {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
	}
}

func (s *stuckStore) wedge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

func (s *stuckStore) unwedge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.gate = nil
}

func (s *stuckStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.wait()
	return s.Store.Get(ctx, key)
}

func (s *stuckStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.wait()
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

func TestHealthLeaderAndFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, a, _ := soleLeader(t)
		b := newNode(t, mem, "b")
		b.e.Changes()
		unstarted := newNode(t, mem, "c")
		h := HealthHandler(a.e, b.e, unstarted.e)
		for range 10 {
			if code, body := probe(t, h); code != http.StatusOK || body != "ok" {
				t.Fatalf("probe = %d %q; want 200 ok", code, body)
			}
			time.Sleep(testFI)
		}
		if unstarted.e.Stats().Mode != "" {
			t.Errorf("the probe started an elector: Mode = %q", unstarted.e.Stats().Mode)
		}
	})
}

// A leader whose store hangs (honouring cancellation) steps down by
// itself: it is not stuck, and restarting it would not help.
func TestHealthHangingStoreLeaderStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a, w := soleLeader(t)
		h := HealthHandler(a.e)
		time.Sleep(testFI / 2)
		a.fs.set(func(f *faultStore) { f.blackhole = true })
		for range 4 * int(testLT+a.e.releaseBudget()) / int(testFI/2) {
			if code, body := probe(t, h); code != http.StatusOK {
				t.Fatalf("probe at %v after the store hung = %d %q; want 200", time.Since(w.at), code, body)
			}
			time.Sleep(testFI / 2)
		}
		if w.l.Context().Err() == nil {
			t.Fatal("leadership still live on a hanging store")
		}
	})
}

// A leader whose store call never returns, even when cancelled, cannot
// finish its leadership: the probe fails once its last renewal is older
// than the lease and the release allow, not before.
func TestHealthStuckLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _, _ := soleLeader(t)
		ss := &stuckStore{Store: mem}
		e := newTestElector(t, testConfig(ss, "s"))
		mem.Delete(testKey)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l, err := e.Campaign(ctx)
		if err != nil {
			t.Fatalf("Campaign() error = %v", err)
		}
		h := HealthHandler(e)
		time.Sleep(testFI / 2)
		last := e.Stats().LastRenewal
		ss.wedge()
		defer ss.unwedge()
		limit := testLT + e.releaseBudget()
		for time.Since(last) <= limit {
			if code, body := probe(t, h); code != http.StatusOK {
				t.Fatalf("probe %v after the last renewal = %d %q; want 200 until %v", time.Since(last), code, body, limit)
			}
			time.Sleep(testFI / 4)
		}
		if l.Context().Err() == nil {
			t.Error("leadership context still live past its lease")
		}
		code, body := probe(t, h)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "stuck leader") {
			t.Errorf("probe %v after the last renewal = %d %q; want 503 naming a stuck leader", time.Since(last), code, body)
		}
	})
}

// blockingHandler is a slog handler that blocks while its gate is shut: a
// log sink that stopped draining.
type blockingHandler struct {
	slog.Handler
	gate chan struct{}
}

func (h blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	<-h.gate
	return h.Handler.Handle(ctx, r)
}

func (h blockingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return blockingHandler{h.Handler.WithAttrs(as), h.gate}
}

func (h blockingHandler) WithGroup(name string) slog.Handler {
	return blockingHandler{h.Handler.WithGroup(name), h.gate}
}

func TestHealthLoopNotAnswering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _, _ := soleLeader(t)
		fs := newFaultStore(mem)
		gate := make(chan struct{})
		cfg := testConfig(fs, "w")
		cfg.Logger = slog.New(blockingHandler{slog.NewTextHandler(io.Discard, nil), gate})
		e := newTestElector(t, cfg)
		defer close(gate)
		e.Changes()
		h := HealthHandler(e)
		synctest.Wait()
		if code, body := probe(t, h); code != http.StatusOK {
			t.Fatalf("probe of a watcher = %d %q; want 200", code, body)
		}
		fs.set(func(f *faultStore) { f.failAll = true }) // its next read fails, and the loop blocks logging it
		time.Sleep(testII + 2*time.Second)
		code, body := probe(t, h)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer") {
			t.Errorf("probe of a blocked loop = %d %q; want 503 naming the run loop", code, body)
		}
	})
}
