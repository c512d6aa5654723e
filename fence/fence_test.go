package fence_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

func TestNewRefusesBadArguments(t *testing.T) {
	if _, err := fence.New(memstore.New(), 0); err == nil || !strings.Contains(err.Error(), "term 0") {
		t.Errorf("New(term 0) error = %v; want one naming term 0", err)
	}
	if _, err := fence.New(nil, 1); err == nil || !strings.Contains(err.Error(), "nil store") {
		t.Errorf("New(nil store) error = %v; want one naming the nil store", err)
	}
}

func TestPutRefusesTooLarge(t *testing.T) {
	st := memstore.New()
	w, _ := fence.New(st, 1)
	err := w.Put(t.Context(), "k", make([]byte, store.MaxObjectSize))
	if !errors.Is(err, fence.ErrTooLarge) || !strings.Contains(err.Error(), "manifest") {
		t.Fatalf("Put(64 KiB) error = %v; want ErrTooLarge saying what to do", err)
	}
	if _, _, err := st.Get(t.Context(), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused Put wrote the key: %v", err)
	}
	// A large object written outside the fence is replaced by a Put, but
	// a Seal would cut it: refused.
	if _, err := st.PutIfMatch(t.Context(), "big", make([]byte, 2*store.MaxObjectSize), ""); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(t.Context(), "big"); !errors.Is(err, fence.ErrTooLarge) {
		t.Fatalf("Seal(a 128 KiB foreign object) error = %v; want ErrTooLarge", err)
	}
	if _, _, err := fence.Read(t.Context(), st, "big"); !errors.Is(err, fence.ErrTooLarge) {
		t.Fatalf("Read(a 128 KiB foreign object) error = %v; want ErrTooLarge", err)
	}
	if err := w.Put(t.Context(), "big", []byte("small")); err != nil {
		t.Fatalf("Put over a large foreign object error = %v", err)
	}
}

// TestMalformedHeaderIsNeverTermZero: an object that starts like a fence
// header but does not parse may hide a higher term: reads and writes
// refuse it, naming the problem.
func TestMalformedHeaderIsNeverTermZero(t *testing.T) {
	cases := map[string]string{
		"no line end":   "s3lect-fence/1 term=9",
		"newer format":  "s3lect-fence/2 term=9 write=x prev=- state=data\n",
		"bad term":      "s3lect-fence/1 term=nine write=0123456789abcdef0123456789abcdef prev=- state=data\n",
		"term zero":     "s3lect-fence/1 term=0 write=0123456789abcdef0123456789abcdef prev=- state=data\n",
		"short ID":      "s3lect-fence/1 term=9 write=0123 prev=- state=data\n",
		"bad state":     "s3lect-fence/1 term=9 write=0123456789abcdef0123456789abcdef prev=- state=gone\n",
		"data on grave": "s3lect-fence/1 term=9 write=0123456789abcdef0123456789abcdef prev=- state=deleted\nx",
		"fields":        "s3lect-fence/1 term=9\n",
		"too large":     "s3lect-fence/1 term=9 write=0123456789abcdef0123456789abcdef prev=- state=data\n" + strings.Repeat("x", store.MaxObjectSize),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			st := memstore.New()
			if _, err := st.PutIfMatch(t.Context(), "k", []byte(body), ""); err != nil {
				t.Fatal(err)
			}
			if _, _, err := fence.Read(t.Context(), st, "k"); err == nil || !strings.Contains(err.Error(), "refusing to guess its term") {
				t.Errorf("Read(%q) error = %v; want a refusal", body, err)
			}
			w, _ := fence.New(st, 100)
			if err := w.Put(t.Context(), "k", []byte("x")); err == nil {
				t.Errorf("Put over %q succeeded; want a refusal", body)
			}
		})
	}
}

// TestFailuresRetriedOnTheFixedSchedule: two failed attempts are retried
// after 100 ms and 1 s; a third failure ends the call.
func TestFailuresRetriedOnTheFixedSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New())
		w, _ := fence.New(fs, 1)
		start := time.Now()
		fs.FailNext(2)
		if err := w.Put(t.Context(), "k", []byte("x")); err != nil {
			t.Fatalf("Put() after two failures error = %v", err)
		}
		if d := time.Since(start); d != 1100*time.Millisecond {
			t.Fatalf("Put() after two failed reads took %v; want 1.1s (0, 100 ms, 1 s)", d)
		}
		fs.FailNext(3)
		if _, _, err := w.Get(t.Context(), "k"); !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("Get() after three failures error = %v; want the failure", err)
		}
	})
}

// hookStore runs after once, after the first write reached the store,
// and returns its error instead of the write's reply.
type hookStore struct {
	store.Store
	once  sync.Once
	after func() error
}

func (h *hookStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	first := false
	h.once.Do(func() { first = true })
	tag, err := h.Store.PutIfMatch(ctx, key, data, etag)
	if first && h.after != nil {
		return "", h.after()
	}
	return tag, err
}

// TestLostReplyThenHigherTerm: the write lands but its reply is lost, and
// before it is read back a newer leader writes: the call ends fenced,
// never retried.
func TestLostReplyThenHigherTerm(t *testing.T) {
	st := memstore.New()
	h := &hookStore{Store: st}
	h.after = func() error {
		newer, _ := fence.New(st, 5)
		if err := newer.Put(context.Background(), "k", []byte("newer")); err != nil {
			t.Errorf("newer Put() error = %v", err)
		}
		return errors.New("connection reset")
	}
	w, _ := fence.New(h, 4)
	err := w.Put(t.Context(), "k", []byte("older"))
	// The older write landed and was then replaced by the newer one, which
	// names it as prev: the reply is resolved as landed.
	if err != nil {
		t.Fatalf("Put() whose write landed before a newer one error = %v; want nil (found as the newer write's prev)", err)
	}
	data, term, _ := fence.Read(t.Context(), st, "k")
	if string(data) != "newer" || term != 5 {
		t.Fatalf("key = %q, term %d; want the newer write", data, term)
	}
}

// TestLostReplyNotGuessed: the write lands, its reply is lost, and two
// more writes of the same term (the same leader's other worker) land
// before the read back: whether ours landed cannot be told from the key,
// so the call says so instead of guessing.
func TestLostReplyNotGuessed(t *testing.T) {
	st := memstore.New()
	h := &hookStore{Store: st}
	h.after = func() error {
		other, _ := fence.New(st, 4)
		for _, v := range []string{"other 1", "other 2"} {
			if err := other.Put(context.Background(), "k", []byte(v)); err != nil {
				t.Errorf("other Put() error = %v", err)
			}
		}
		return errors.New("connection reset")
	}
	w, _ := fence.New(h, 4)
	err := w.Put(t.Context(), "k", []byte("mine"))
	if !errors.Is(err, fence.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("Put() error = %v; want outcome unknown, with the cause", err)
	}
	if data, _, _ := fence.Read(t.Context(), st, "k"); string(data) != "other 2" {
		t.Fatalf("key = %q; want the last write, not written again", data)
	}
}

// TestFailedWriteThenHigherTerm: the write fails before reaching the
// store, and a newer leader writes before the retry: fenced.
func TestFailedWriteThenHigherTerm(t *testing.T) {
	st := memstore.New()
	var once sync.Once
	w, _ := fence.New(&failFirst{Store: st, before: func() {
		once.Do(func() {
			newer, _ := fence.New(st, 5)
			_ = newer.Put(context.Background(), "k", []byte("newer"))
		})
	}}, 4)
	err := w.Put(t.Context(), "k", []byte("older"))
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Found != 5 || fe.Term != 4 {
		t.Fatalf("Put() error = %v; want fenced by term 5", err)
	}
	if data, _, _ := fence.Read(t.Context(), st, "k"); !bytes.Equal(data, []byte("newer")) {
		t.Fatalf("key = %q; want the newer write", data)
	}
}

// failFirst fails its first write before it reaches the store, after
// running before.
type failFirst struct {
	store.Store
	before func()
	done   bool
}

func (f *failFirst) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if !f.done {
		f.done = true
		f.before()
		return "", errors.New("connection refused")
	}
	return f.Store.PutIfMatch(ctx, key, data, etag)
}
