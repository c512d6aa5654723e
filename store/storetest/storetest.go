// Package storetest is the conformance suite for store.Store backends.
//
// A backend's tests call Run with a constructor; every backend that s3lect
// ships passes it, and a third-party backend should too before it is trusted
// with an election.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/s3lect/s3lect/store"
)

// Run checks that stores made by newStore follow the store.Store contract,
// and that package fence's guarantee holds on them (fence.go: the cases
// named Fence*). Each subtest uses keys of its own, so newStore may return
// the same backing bucket every time.
//
// On a store that implements store.Lister, the cases named List* check
// its listings (list.go); on one that does not, they are skipped.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.Store, key string)
	}{
		{"Absent", testAbsent},
		{"CreateThenGet", testCreateThenGet},
		{"CreateWhenPresent", testCreateWhenPresent},
		{"StaleETag", testStaleETag},
		{"DistinctETags", testDistinctETags},
		{"ConcurrentCreators", testConcurrentCreators},
		{"ConcurrentUpdaters", testConcurrentUpdaters},
		{"LargeObject", testLargeObject},
		{"CancelledContext", testCancelledContext},
	}
	cases = append(cases, fenceCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			key := "storetest/" + strings.ReplaceAll(t.Name(), "/", "-") + ".json"
			tc.fn(t, s, key)
		})
	}
	for _, tc := range listCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			l, ok := s.(store.Lister)
			if !ok {
				t.Skipf("%T does not implement store.Lister (optional)", s)
			}
			prefix := "storetest/" + strings.ReplaceAll(t.Name(), "/", "-") + "/"
			tc.fn(t, s, l, prefix)
		})
	}
	t.Run("SightingChangesOnRestore", func(t *testing.T) {
		s := newStore(t)
		sg, ok := s.(store.Sighter)
		if !ok {
			t.Skipf("%T does not implement store.Sighter (optional: a restore of exact earlier bytes then looks unchanged to a reader; docs/stores.md)", s)
		}
		testSightingChangesOnRestore(t, s, sg, "storetest/"+strings.ReplaceAll(t.Name(), "/", "-")+".json")
	})
}

func testAbsent(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	if _, _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(absent) error = %v; want ErrNotFound", err)
	}
	if _, err := s.PutIfMatch(ctx, key, []byte(`{"a":1}`), `"0123456789abcdef0123456789abcdef"`); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch(absent, some etag) error = %v; want ErrPreconditionFailed", err)
	}
	if _, _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after failed If-Match put error = %v; want ErrNotFound (nothing written)", err)
	}
}

func testCreateThenGet(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	data := []byte(`{"leaderID":"a"}`)
	etag, err := s.PutIfMatch(ctx, key, data, "")
	if err != nil {
		t.Fatalf("PutIfMatch(create) error = %v", err)
	}
	if etag == "" {
		t.Fatal("PutIfMatch(create) returned an empty ETag")
	}
	got, gotETag, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	if !bytes.Equal(got, data) || gotETag != etag {
		t.Fatalf("Get() = %q, %s; want %q, %s", got, gotETag, data, etag)
	}
}

func testCreateWhenPresent(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	first := mustCreate(t, s, key, []byte(`{"n":1}`))
	if _, err := s.PutIfMatch(ctx, key, []byte(`{"n":2}`), ""); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("second create error = %v; want ErrPreconditionFailed", err)
	}
	expectContent(t, s, key, []byte(`{"n":1}`), first)
}

func testStaleETag(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	e1 := mustCreate(t, s, key, []byte(`{"n":1}`))
	e2, err := s.PutIfMatch(ctx, key, []byte(`{"n":2}`), e1)
	if err != nil {
		t.Fatalf("PutIfMatch(current etag) error = %v", err)
	}
	if _, err := s.PutIfMatch(ctx, key, []byte(`{"n":3}`), e1); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch(stale etag) error = %v; want ErrPreconditionFailed", err)
	}
	expectContent(t, s, key, []byte(`{"n":2}`), e2)
}

func testDistinctETags(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	seen := map[string]int{}
	etag := ""
	for i := range 10 {
		var err error
		etag, err = s.PutIfMatch(ctx, key, fmt.Appendf(nil, `{"n":%d}`, i), etag)
		if err != nil {
			t.Fatalf("write %d: PutIfMatch() error = %v", i, err)
		}
		if j, dup := seen[etag]; dup {
			t.Fatalf("write %d returned ETag %s, already returned by write %d", i, etag, j)
		}
		seen[etag] = i
	}
}

// race runs n writers at once, each calling put, and returns how many
// succeeded. Any error other than a precondition failure fails the test.
func race(t *testing.T, n int, put func(i int) error) int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		wins  int
		errs  []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := put(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrPreconditionFailed):
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("racing writers failed: %v", errors.Join(errs...))
	}
	return wins
}

func testConcurrentCreators(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	wins := race(t, 8, func(i int) error {
		_, err := s.PutIfMatch(ctx, key, fmt.Appendf(nil, `{"writer":%d}`, i), "")
		return err
	})
	if wins != 1 {
		t.Fatalf("8 racing creators: %d won; want exactly 1", wins)
	}
}

func testConcurrentUpdaters(t *testing.T, s store.Store, key string) {
	ctx := t.Context()
	base := mustCreate(t, s, key, []byte(`{"writer":"base"}`))
	wins := race(t, 8, func(i int) error {
		_, err := s.PutIfMatch(ctx, key, fmt.Appendf(nil, `{"writer":%d}`, i), base)
		return err
	})
	if wins != 1 {
		t.Fatalf("8 racing If-Match writers: %d won; want exactly 1", wins)
	}
}

func testLargeObject(t *testing.T, s store.Store, key string) {
	big := bytes.Repeat([]byte("x"), 2*store.MaxObjectSize)
	mustCreate(t, s, key, big)
	got, _, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(large object) error = %v; want the content or its first MaxObjectSize+1 bytes", err)
	}
	if len(got) <= store.MaxObjectSize || !bytes.HasPrefix(big, got) {
		t.Fatalf("Get(large object) returned %d bytes; want a prefix of the object longer than %d", len(got), store.MaxObjectSize)
	}
}

func testCancelledContext(t *testing.T, s store.Store, key string) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Get(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(cancelled ctx) error = %v; want context.Canceled", err)
	}
	if _, err := s.PutIfMatch(ctx, key, []byte(`{}`), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("PutIfMatch(cancelled ctx) error = %v; want context.Canceled", err)
	}
	if _, _, err := s.Get(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after cancelled create error = %v; want ErrNotFound", err)
	}
}

func mustCreate(t *testing.T, s store.Store, key string, data []byte) string {
	t.Helper()
	etag, err := s.PutIfMatch(t.Context(), key, data, "")
	if err != nil {
		t.Fatalf("create %q: PutIfMatch() error = %v", key, err)
	}
	return etag
}

func expectContent(t *testing.T, s store.Store, key string, want []byte, wantETag string) {
	t.Helper()
	got, etag, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) error = %v", key, err)
	}
	if !bytes.Equal(got, want) || etag != wantETag {
		t.Fatalf("Get(%q) = %q, %s; want %q, %s", key, got, etag, want, wantETag)
	}
}
