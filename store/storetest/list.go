package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// ListKeys is how many objects the case ListManyKeys lists. A backend
// whose listings come in pages runs the suite with pages smaller than
// this, so that the case follows its continuation from page to page.
const ListKeys = 25

// The listing cases run on a store that implements store.Lister, and are
// skipped, saying so, on one that does not (listing is optional). Each
// lists a prefix of its own, "storetest/<its test's name>/".
var listCases = []struct {
	name string
	fn   func(t *testing.T, s store.Store, l store.Lister, prefix string)
}{
	{"ListUnderPrefix", testListUnderPrefix},
	{"ListFollowsReplace", testListFollowsReplace},
	{"ListManyKeys", testListManyKeys},
	{"ListEmpty", testListEmpty},
	{"ListCancelledContext", testListCancelledContext},
}

// listSettle bounds how long a listing may lag behind the writes it must
// show. The contract lets a listing lag (it is a hint); every backend
// s3lect ships lists consistently, and a lag is logged.
const listSettle = 10 * time.Second

// listUntil lists prefix until done accepts the listing or listSettle
// passes; it returns the last listing and whether done accepted it. A
// listing done rejects must pass ok (a lagging listing may show an older
// state, never a wrong one); ok failing fails the test at once.
func listUntil(t *testing.T, l store.Lister, prefix string, ok, done func([]store.Entry) error) []store.Entry {
	t.Helper()
	start := time.Now()
	for try := 1; ; try++ {
		got, err := l.List(t.Context(), prefix)
		if err != nil {
			t.Fatalf("List(%q) error = %v", prefix, err)
		}
		if err := ok(got); err != nil {
			t.Fatalf("List(%q) = %v: %v", prefix, got, err)
		}
		err = done(got)
		if err == nil {
			if try > 1 {
				t.Logf("List(%q) lagged: it showed the writes after %v, at listing %d", prefix, time.Since(start).Round(time.Millisecond), try)
			}
			return got
		}
		if time.Since(start) > listSettle {
			t.Fatalf("List(%q) = %v after %v: %v", prefix, got, listSettle, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sameEntries reports how got differs from want (the same keys, in the
// same order, with the same ETags), or nil.
func sameEntries(got, want []store.Entry) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("want %v", want)
	}
	return nil
}

// sortedUnder checks that a listing is in key order and holds only keys
// under prefix.
func sortedUnder(prefix string) func([]store.Entry) error {
	return func(got []store.Entry) error {
		for i, e := range got {
			if !strings.HasPrefix(e.Key, prefix) {
				return fmt.Errorf("key %q is not under the prefix", e.Key)
			}
			if i > 0 && got[i-1].Key >= e.Key {
				return fmt.Errorf("keys %q and %q are out of order or repeated", got[i-1].Key, e.Key)
			}
		}
		return nil
	}
}

func testListUnderPrefix(t *testing.T, s store.Store, l store.Lister, prefix string) {
	// Written out of order, with neighbours that share the prefix but for
	// its slash. (Not the prefix without its slash as a key: MinIO cannot
	// hold an object and a prefix of the same name.)
	var want []store.Entry
	for _, name := range []string{"b", "a", "c/d", "a-b"} {
		key := prefix + name
		want = append(want, store.Entry{Key: key, ETag: mustCreate(t, s, key, []byte(`{"n":"`+name+`"}`))})
	}
	base := strings.TrimSuffix(prefix, "/")
	for _, key := range []string{base + "x", base + "-", base + ".json", base + "0/a"} {
		mustCreate(t, s, key, []byte(`{"neighbour":true}`))
	}
	slices.SortFunc(want, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	got := listUntil(t, l, prefix, sortedUnder(prefix), func(got []store.Entry) error { return sameEntries(got, want) })
	for _, e := range got {
		_, etag, err := s.Get(t.Context(), e.Key)
		if err != nil {
			t.Fatalf("Get(%q) error = %v", e.Key, err)
		}
		if etag != e.ETag {
			t.Errorf("List(%q) gave %q the ETag %s; Get gives %s", prefix, e.Key, e.ETag, etag)
		}
	}
}

func testListFollowsReplace(t *testing.T, s store.Store, l store.Lister, prefix string) {
	key := prefix + "obj.json"
	e1 := mustCreate(t, s, key, []byte(`{"n":1}`))
	listUntil(t, l, prefix, sortedUnder(prefix), func(got []store.Entry) error {
		return sameEntries(got, []store.Entry{{Key: key, ETag: e1}})
	})
	etag := e1
	for n := 2; n <= 3; n++ {
		prev := etag
		var err error
		etag, err = s.PutIfMatch(t.Context(), key, fmt.Appendf(nil, `{"n":%d}`, n), prev)
		if err != nil {
			t.Fatalf("replace %d: PutIfMatch() error = %v", n, err)
		}
		_, getETag, err := s.Get(t.Context(), key)
		if err != nil || getETag != etag {
			t.Fatalf("Get(%q) = %s, %v; want the replace's ETag %s", key, getETag, err, etag)
		}
		// Lagging, the listing may show the previous ETag; never another.
		listUntil(t, l, prefix, func(got []store.Entry) error {
			if len(got) != 1 || got[0].Key != key || (got[0].ETag != prev && got[0].ETag != etag) {
				return fmt.Errorf("want %q with ETag %s (or, lagging, %s)", key, etag, prev)
			}
			return nil
		}, func(got []store.Entry) error {
			return sameEntries(got, []store.Entry{{Key: key, ETag: etag}})
		})
	}
}

func testListManyKeys(t *testing.T, s store.Store, l store.Lister, prefix string) {
	want := make([]store.Entry, ListKeys)
	errs := make([]error, ListKeys)
	var wg sync.WaitGroup
	for i := range ListKeys {
		wg.Go(func() { // all at once, so that the keys land in no particular order
			key := fmt.Sprintf("%sk%03d", prefix, i)
			etag, err := s.PutIfMatch(t.Context(), key, fmt.Appendf(nil, `{"k":%d}`, i), "")
			want[i], errs[i] = store.Entry{Key: key, ETag: etag}, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("creating %d keys: %v", ListKeys, err)
	}
	listUntil(t, l, prefix, sortedUnder(prefix), func(got []store.Entry) error {
		if len(got) != len(want) {
			return fmt.Errorf("%d entries; want %d", len(got), len(want))
		}
		return sameEntries(got, want)
	})
}

func testListEmpty(t *testing.T, s store.Store, l store.Lister, prefix string) {
	// Nothing under the prefix, but keys that extend it without its slash.
	base := strings.TrimSuffix(prefix, "/")
	mustCreate(t, s, base+"x", []byte(`{"neighbour":true}`))
	mustCreate(t, s, base+".json", []byte(`{"neighbour":true}`))
	got, err := l.List(t.Context(), prefix)
	if err != nil || len(got) != 0 {
		t.Fatalf("List(%q) with nothing under it = %v, %v; want no entries and no error", prefix, got, err)
	}
}

func testListCancelledContext(t *testing.T, s store.Store, l store.Lister, prefix string) {
	mustCreate(t, s, prefix+"a", []byte(`{}`))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := l.List(ctx, prefix); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled ctx) = %v, %v; want an error wrapping context.Canceled", got, err)
	}
}
