package azblobstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/azblobstore"
	"github.com/s3lect/s3lect/store/storetest"
)

func TestConformanceOnAzurite(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	client := newClient(t, conn, testContainer, nil)
	storetest.Run(t, func(t *testing.T) store.Store {
		st := azblobstore.New(client)
		azblobstore.SetListPage(st, storetest.ListKeys/3) // ListManyKeys crosses pages
		return st
	})
}

func TestConditionalWriteCheckRunsBeforeFirstWrite(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	st := azblobstore.New(newClient(t, conn, testContainer, nil))
	key := "leader/check.json"
	if _, _, err := st.Get(t.Context(), key+".s3lect-probe"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(probe) before any write = %v; want ErrNotFound", err)
	}
	if _, err := st.PutIfMatch(t.Context(), key, []byte(`{"leaderID":"a"}`), ""); err != nil {
		t.Fatalf("PutIfMatch(create) = %v", err)
	}
	probe, _, err := st.Get(t.Context(), key+".s3lect-probe")
	if err != nil {
		t.Fatalf("Get(probe) after the first write = %v; want the probe the check wrote", err)
	}
	// The check's last step replaces the probe naming its right ETag.
	if !bytes.Contains(probe, []byte(`"step":"right ETag"`)) {
		t.Errorf("probe = %s; want the check's last step, a replace naming the right ETag", probe)
	}
}

func TestPermanentErrorsOnAzurite(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	cases := []struct {
		name   string
		st     *azblobstore.Store
		naming []string // what the error must name
	}{
		{"MissingContainer", azblobstore.New(newClient(t, conn, "s3lect-missing", nil)),
			[]string{"ContainerNotFound", "s3lect-missing", "az storage container create"}},
		{"WrongKey", azblobstore.New(newClient(t, wrongKey(conn), testContainer, nil)),
			[]string{"account key"}},
		{"InvalidContainerName", azblobstore.New(newClient(t, conn, "Not_A_Container", nil)),
			[]string{"Not_A_Container"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"Get", func() error { _, _, err := tc.st.Get(t.Context(), "leader/x.json"); return err }},
				{"Put", func() error { _, err := tc.st.PutIfMatch(t.Context(), "leader/x.json", []byte("{}"), ""); return err }},
				{"List", func() error { _, err := tc.st.List(t.Context(), "leader/x.json"); return err }},
			} {
				err := op.call()
				if !store.IsPermanent(err) {
					t.Errorf("%s error = %v; want a permanent error", op.name, err)
					continue
				}
				t.Logf("%s: %v", op.name, err)
				for _, s := range append(tc.naming, "leader/x.json") {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%s error = %q; want it to name %q", op.name, err, s)
					}
				}
			}
		})
	}
}

// wrongKey returns conn with another (well-formed) account key.
func wrongKey(conn string) string {
	parts := strings.Split(conn, ";")
	for i, p := range parts {
		if strings.HasPrefix(p, "AccountKey=") {
			parts[i] = "AccountKey=" + "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
		}
	}
	return strings.Join(parts, ";")
}

// TestListPagesOnAzurite lists in pages, counting the requests (one per
// page, none retried inside the SDK), with ETags quoted as Get returns
// them although Azure lists them bare.
func TestListPagesOnAzurite(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	var lists atomic.Int32
	client := newClient(t, conn, testContainer, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("comp") == "list" {
				lists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	st := azblobstore.New(client)
	azblobstore.SetListPage(st, 4)
	want := make([]store.Entry, 10)
	for i := range want {
		key := fmt.Sprintf("pages/%02d", i)
		etag, err := st.PutIfMatch(t.Context(), key, []byte(`{}`), "")
		if err != nil {
			t.Fatal(err)
		}
		want[i] = store.Entry{Key: key, ETag: etag}
	}
	lists.Store(0)
	got, err := st.List(t.Context(), "pages/")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List(pages/) = %v, %v; want %v", got, err, want)
	}
	if n := lists.Load(); n != 3 {
		t.Errorf("List() of 10 blobs in pages of 4 sent %d requests; want 3", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
