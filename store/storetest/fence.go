package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// The fence's cases (package fence, docs/fencing.md) run on every backend:
// its safety rests on the backend giving every distinct body a distinct
// ETag and honouring If-Match on it, so each case is a way a stale writer
// could land if the backend did not.
var fenceCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store, key string)
}{
	{"FencePutGet", testFencePutGet},
	{"FenceLowerTermRefused", testFenceLowerTermRefused},
	{"FenceZombieAfterSeal", testFenceZombieAfterSeal},
	{"FenceZombieAfterSameBytes", testFenceZombieAfterSameBytes},
	{"FenceSealAbsent", testFenceSealAbsent},
	{"FenceDelete", testFenceDelete},
	{"FenceForeignObject", testFenceForeignObject},
	{"FenceLostReply", testFenceLostReply},
	{"FenceRacingTerms", testFenceRacingTerms},
}

func newWriter(t *testing.T, s store.Store, term uint64) *fence.Writer {
	t.Helper()
	w, err := fence.New(s, term)
	if err != nil {
		t.Fatalf("fence.New(term %d) error = %v", term, err)
	}
	return w
}

func expectFenced(t *testing.T, err error, key string, term, found uint64) {
	t.Helper()
	var fe *fence.FencedError
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("write of term %d error = %v; want ErrFenced", term, err)
	}
	if fe.Key != key || fe.Term != term || fe.Found != found {
		t.Fatalf("FencedError = %+v; want key %q, term %d, found %d", fe, key, term, found)
	}
}

func expectFenceContent(t *testing.T, s store.Store, key string, want []byte, wantTerm uint64) {
	t.Helper()
	got, term, err := fence.Read(t.Context(), s, key)
	if err != nil {
		t.Fatalf("fence.Read(%q) error = %v", key, err)
	}
	if !bytes.Equal(got, want) || term != wantTerm {
		t.Fatalf("fence.Read(%q) = %q, term %d; want %q, term %d", key, got, term, want, wantTerm)
	}
}

func testFencePutGet(t *testing.T, s store.Store, key string) {
	w := newWriter(t, s, 3)
	data := []byte("checkpoint 1\nline two\n")
	if err := w.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put() error = %v", err)
	}
	expectFenceContent(t, s, key, data, 3)
	raw, _, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(raw) error = %v", err)
	}
	header, rest, _ := bytes.Cut(raw, []byte("\n"))
	if !bytes.HasPrefix(header, []byte("s3lect-fence/1 term=3 ")) || !bytes.Equal(rest, data) {
		t.Fatalf("raw object = %q; want one header line of term 3, then the data unchanged", raw)
	}
	if err := w.Put(t.Context(), key, []byte("checkpoint 2")); err != nil {
		t.Fatalf("second Put() error = %v", err)
	}
	expectFenceContent(t, s, key, []byte("checkpoint 2"), 3)
}

func testFenceLowerTermRefused(t *testing.T, s store.Store, key string) {
	if err := newWriter(t, s, 5).Put(t.Context(), key, []byte("new")); err != nil {
		t.Fatalf("Put(term 5) error = %v", err)
	}
	expectFenced(t, newWriter(t, s, 4).Put(t.Context(), key, []byte("old")), key, 4, 5)
	expectFenced(t, newWriter(t, s, 4).Delete(t.Context(), key), key, 4, 5)
	expectFenced(t, newWriter(t, s, 4).Seal(t.Context(), key), key, 4, 5)
	expectFenceContent(t, s, key, []byte("new"), 5)
}

// pausing holds the first write made through it until release is closed,
// after telling reached: the stale leader, paused between the read of the
// key and its conditional write.
type pausing struct {
	store.Store
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func newPausing(s store.Store) *pausing {
	return &pausing{Store: s, reached: make(chan struct{}), release: make(chan struct{})}
}

func (p *pausing) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	first := false
	p.once.Do(func() { first = true })
	if first {
		close(p.reached)
		<-p.release
	}
	return p.Store.PutIfMatch(ctx, key, data, etag)
}

// zombie runs a write of term 1 that pauses after reading the key, lets
// successor act while it is paused, then resumes it and returns its
// result.
func zombie(t *testing.T, s store.Store, key string, data []byte, successor func()) error {
	t.Helper()
	p := newPausing(s)
	stale := newWriter(t, p, 1)
	done := make(chan error, 1)
	go func() { done <- stale.Put(t.Context(), key, data) }()
	<-p.reached
	successor()
	close(p.release)
	return <-done
}

// testFenceZombieAfterSeal is the danger of stores whose ETag hashes the
// body: the successor seals the key without changing its data, and the
// paused leader writes the very bytes it read. Had the seal left the ETag
// unchanged, the stale If-Match would succeed.
func testFenceZombieAfterSeal(t *testing.T, s store.Store, key string) {
	data := []byte("same bytes")
	if err := newWriter(t, s, 1).Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(term 1) error = %v", err)
	}
	err := zombie(t, s, key, data, func() {
		if err := newWriter(t, s, 2).Seal(t.Context(), key); err != nil {
			t.Errorf("Seal(term 2) error = %v", err)
		}
	})
	expectFenced(t, err, key, 1, 2)
	expectFenceContent(t, s, key, data, 2)
}

// testFenceZombieAfterSameBytes: the successor writes the same bytes the
// paused leader is about to write.
func testFenceZombieAfterSameBytes(t *testing.T, s store.Store, key string) {
	data := []byte("same bytes")
	if err := newWriter(t, s, 1).Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(term 1) error = %v", err)
	}
	err := zombie(t, s, key, data, func() {
		if err := newWriter(t, s, 2).Put(t.Context(), key, data); err != nil {
			t.Errorf("Put(term 2) error = %v", err)
		}
	})
	expectFenced(t, err, key, 1, 2)
	expectFenceContent(t, s, key, data, 2)
}

func testFenceSealAbsent(t *testing.T, s store.Store, key string) {
	err := zombie(t, s, key, []byte("late"), func() {
		if err := newWriter(t, s, 2).Seal(t.Context(), key); err != nil {
			t.Errorf("Seal(term 2, absent key) error = %v", err)
		}
	})
	expectFenced(t, err, key, 1, 2)
	if _, term, err := fence.Read(t.Context(), s, key); !errors.Is(err, store.ErrNotFound) || term != 2 {
		t.Fatalf("fence.Read(sealed absent key) = term %d, %v; want term 2, ErrNotFound", term, err)
	}
	// Sealing again at the same term writes nothing.
	_, before, _ := s.Get(t.Context(), key)
	if err := newWriter(t, s, 2).Seal(t.Context(), key); err != nil {
		t.Fatalf("second Seal(term 2) error = %v", err)
	}
	if _, after, _ := s.Get(t.Context(), key); after != before {
		t.Fatalf("second Seal(term 2) rewrote the key: ETag %s -> %s", before, after)
	}
}

func testFenceDelete(t *testing.T, s store.Store, key string) {
	if err := newWriter(t, s, 1).Put(t.Context(), key, []byte("v1")); err != nil {
		t.Fatalf("Put(term 1) error = %v", err)
	}
	if err := newWriter(t, s, 2).Delete(t.Context(), key); err != nil {
		t.Fatalf("Delete(term 2) error = %v", err)
	}
	if _, term, err := fence.Read(t.Context(), s, key); !errors.Is(err, store.ErrNotFound) || term != 2 {
		t.Fatalf("fence.Read(deleted) = term %d, %v; want term 2, ErrNotFound", term, err)
	}
	expectFenced(t, newWriter(t, s, 1).Put(t.Context(), key, []byte("zombie")), key, 1, 2)
	if err := newWriter(t, s, 3).Put(t.Context(), key, []byte("v3")); err != nil {
		t.Fatalf("Put(term 3) after delete error = %v", err)
	}
	expectFenceContent(t, s, key, []byte("v3"), 3)
}

func testFenceForeignObject(t *testing.T, s store.Store, key string) {
	foreign := []byte(`{"written":"by another tool"}`)
	mustCreate(t, s, key, foreign)
	expectFenceContent(t, s, key, foreign, 0)
	if err := newWriter(t, s, 4).Seal(t.Context(), key); err != nil {
		t.Fatalf("Seal(term 4) of a foreign object error = %v", err)
	}
	expectFenceContent(t, s, key, foreign, 4)
	expectFenced(t, newWriter(t, s, 3).Put(t.Context(), key, []byte("x")), key, 3, 4)
}

// testFenceLostReply: the store takes the write but the reply is lost; the
// writer resolves it by reading back, and does not write twice.
func testFenceLostReply(t *testing.T, s store.Store, key string) {
	fs := faultstore.New(s)
	w := newWriter(t, fs, 7)
	fs.LoseReplies(1)
	if err := w.Put(t.Context(), key, []byte("once")); err != nil {
		t.Fatalf("Put() with its reply lost error = %v; want nil (resolved by reading back)", err)
	}
	_, etag, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	expectFenceContent(t, s, key, []byte("once"), 7)
	// A lost reply on a write over an existing version (an If-Match write).
	fs.LoseReplies(1)
	if err := w.Put(t.Context(), key, []byte("twice")); err != nil {
		t.Fatalf("second Put() with its reply lost error = %v", err)
	}
	if _, e2, _ := s.Get(t.Context(), key); e2 == etag {
		t.Fatalf("second Put() left the ETag at %s", etag)
	}
	expectFenceContent(t, s, key, []byte("twice"), 7)
}

// testFenceRacingTerms: writers of terms 1 to 8 race on one key. The
// highest always lands, and the key ends at its term.
func testFenceRacingTerms(t *testing.T, s store.Store, key string) {
	const n = 8
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for term := uint64(1); term <= n; term++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := fence.New(s, term)
			if err == nil {
				<-start
				err = w.Put(t.Context(), key, fmt.Appendf(nil, "term %d", term))
			}
			errs[term] = err
		}()
	}
	close(start)
	wg.Wait()
	for term, err := range errs[1:] {
		if err != nil && !errors.Is(err, fence.ErrFenced) {
			t.Errorf("Put(term %d) error = %v; want nil or ErrFenced", term+1, err)
		}
	}
	if errs[n] != nil {
		t.Fatalf("Put(term %d), the highest, error = %v; want nil", n, errs[n])
	}
	expectFenceContent(t, s, key, fmt.Appendf(nil, "term %d", n), n)
}
