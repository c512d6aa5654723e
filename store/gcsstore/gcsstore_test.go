package gcsstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/condcheck"
	"github.com/s3lect/s3lect/internal/emulator"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/gcsstore"
	"github.com/s3lect/s3lect/store/storetest"
)

// endpoint starts a fake-gcs-server for the test and returns its base URL.
func endpoint(t *testing.T) string {
	t.Helper()
	return emulator.FakeGCS(t)
}

// newClient returns a client of the emulator at base whose requests go
// through rt (http.DefaultTransport's clone if nil). Idle connections are
// closed when the test ends.
func newClient(t *testing.T, base string, rt http.RoundTripper) *storage.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	if rt == nil {
		rt = tr
	}
	client, err := storage.NewClient(t.Context(), option.WithEndpoint(base+"/storage/v1/"),
		option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// newBucket creates a bucket with a fresh name on the emulator at base.
func newBucket(t *testing.T, base string) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := "s3lect-" + hex.EncodeToString(b)
	if err := newClient(t, base, nil).Bucket(name).Create(context.Background(), "s3lect-test", nil); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

func TestConformance(t *testing.T) {
	base := endpoint(t)
	bucket := newBucket(t, base)
	storetest.Run(t, func(t *testing.T) store.Store {
		st := gcsstore.New(newClient(t, base, nil), bucket)
		gcsstore.SetListPage(st, storetest.ListKeys/3) // ListManyKeys crosses pages
		return st
	})
}

func TestElection(t *testing.T) {
	base := endpoint(t)
	bucket := newBucket(t, base)
	storetest.Election(t, func(t *testing.T) store.Store {
		return gcsstore.New(newClient(t, base, nil), bucket)
	})
}

func TestFirstWriteChecksConditionalWrites(t *testing.T) {
	base := endpoint(t)
	bucket := newBucket(t, base)
	st := gcsstore.New(newClient(t, base, nil), bucket)
	if _, err := st.PutIfMatch(t.Context(), "lock.json", []byte(`{"n":1}`), ""); err != nil {
		t.Fatalf("first PutIfMatch() = %v", err)
	}
	data, _, err := st.Get(t.Context(), "lock.json"+condcheck.ProbeSuffix)
	if err != nil || !strings.Contains(string(data), `"step":"right ETag"`) {
		t.Fatalf("probe = %q, %v; want the check's last step written next to the lockfile", data, err)
	}
}

func TestGenerationIsTheETag(t *testing.T) {
	base := endpoint(t)
	bucket := newBucket(t, base)
	client := newClient(t, base, nil)
	st := gcsstore.New(client, bucket)
	tag, err := st.PutIfMatch(t.Context(), "gen.json", []byte(`{"n":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := client.Bucket(bucket).Object("gen.json").Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := attrs.Generation; tag == "" || tag != strconv.FormatInt(want, 10) {
		t.Errorf("PutIfMatch() ETag = %q; want the object's generation %d", tag, want)
	}
	if attrs.CacheControl != "no-store" {
		t.Errorf("lockfile Cache-Control = %q; want no-store, so that no cache serves a stale record", attrs.CacheControl)
	}
	for _, bad := range []string{"not-a-number", "-5", "0"} {
		if _, err := st.PutIfMatch(t.Context(), "gen.json", []byte(`{"n":2}`), bad); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Errorf("PutIfMatch(ETag %q) = %v; want ErrPreconditionFailed", bad, err)
		}
	}
}

func TestCampaignReportsAMissingBucket(t *testing.T) {
	base := endpoint(t)
	st := gcsstore.New(newClient(t, base, nil), "s3lect-no-such-bucket")
	err := campaign(t, st)
	for _, want := range []string{"gs://s3lect-no-such-bucket/", "does not exist", "gcloud storage buckets create"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Campaign() error %q does not say %q", err, want)
		}
	}
}

// campaign runs Campaign on st and returns its error, failing the test
// unless it is permanent: a store that refuses for good must not be
// retried forever.
func campaign(t *testing.T, st store.Store) error {
	t.Helper()
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: "leader/perm.json", ServerID: "a",
		FrequentInterval: 300 * time.Millisecond, InfrequentInterval: 900 * time.Millisecond, LeaderTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a liveness bound, not a speed limit
	defer cancel()
	_, err = e.Campaign(ctx)
	if err == nil || !store.IsPermanent(err) || !strings.Contains(err.Error(), "leader/perm.json") {
		t.Fatalf("Campaign() = %v; want a permanent error naming the lockfile", err)
	}
	return err
}

// fakeGCSError answers every request with a JSON API error of status
// code: the emulator checks no credentials, so denials come from here.
func fakeGCSError(t *testing.T, code int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(`{"error":{"code":` + strconv.Itoa(code) + `,"message":"refused by the test","errors":[{"reason":"refused"}]}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCampaignReportsRefusedCredentials(t *testing.T) {
	for _, tc := range []struct {
		code int
		want string
	}{
		{http.StatusUnauthorized, "credentials were rejected"},
		{http.StatusForbidden, "roles/storage.objectUser"},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			base := fakeGCSError(t, tc.code)
			err := campaign(t, gcsstore.New(newClient(t, base, nil), "bucket"))
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Campaign() error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestFromEnvironmentUsesTheEmulatorHost(t *testing.T) {
	base := endpoint(t)
	bucket := newBucket(t, base)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(base, "http://"))
	st, err := gcsstore.FromEnvironment(t.Context(), bucket)
	if err != nil {
		t.Fatalf("FromEnvironment() = %v", err)
	}
	defer st.CloseIdleConnections()
	if _, err := st.PutIfMatch(t.Context(), "env.json", []byte(`{"n":1}`), ""); err != nil {
		t.Fatalf("PutIfMatch() on the emulator = %v", err)
	}
	if data, _, err := gcsstore.New(newClient(t, base, nil), bucket).Get(t.Context(), "env.json"); err != nil || string(data) != `{"n":1}` {
		t.Errorf("Get() through another client = %q, %v; want the object FromEnvironment's store wrote", data, err)
	}
}

// The client's own retries are off: a write answered 503 is sent once,
// and the failure reaches s3lect's retry policy as a transient error.
func TestClientRetriesAreOff(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":503,"message":"try later"}}`))
	}))
	defer srv.Close()
	st := gcsstore.New(newClient(t, srv.URL, nil), "bucket")
	// A bound on the client's retries, had it any (they back off for
	// up to half a minute): not a speed limit.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := st.PutIfMatch(ctx, "lock.json", []byte(`{}`), "")
	if err == nil || store.IsPermanent(err) || errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("PutIfMatch() answered 503 = %v; want a transient error", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("PutIfMatch() sent %d requests; want 1 (no retry inside the client)", n)
	}
	requests.Store(0)
	if _, _, err := st.Get(ctx, "lock.json"); err == nil || store.IsPermanent(err) {
		t.Errorf("Get() answered 503 = %v; want a transient error", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("Get() sent %d requests; want 1 (no retry inside the client)", n)
	}
}

// A read on a missing bucket is not "no lockfile": watchers (Lockfile,
// Observe, s3lect status) get the permanent error naming the fix, while a
// missing object in a bucket that exists stays ErrNotFound.
func TestGetTellsMissingBucketFromMissingObject(t *testing.T) {
	base := endpoint(t)
	client := newClient(t, base, nil)
	_, _, err := gcsstore.New(client, "s3lect-no-such-bucket").Get(t.Context(), "leader/x.json")
	if !store.IsPermanent(err) || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "gcloud storage buckets create gs://s3lect-no-such-bucket") {
		t.Errorf("Get() on a missing bucket = %v; want a permanent error naming the bucket's fix, not ErrNotFound", err)
	}
	st := gcsstore.New(client, newBucket(t, base))
	for range 2 { // the second read trusts the listing of the first
		if _, _, err := st.Get(t.Context(), "leader/absent.json"); !errors.Is(err, store.ErrNotFound) || store.IsPermanent(err) {
			t.Errorf("Get() of a missing object = %v; want ErrNotFound", err)
		}
	}
}

// TestListOnFakeGCS lists in pages (counting the requests: one per page,
// none retried inside the client), and maps the listing's failures: a
// missing bucket and a denial are permanent and name their fix, a 503 is
// transient.
func TestListOnFakeGCS(t *testing.T) {
	base := endpoint(t)
	bucket := newBucket(t, base)
	var lists atomic.Int32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	client := newClient(t, base, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/b/"+bucket+"/o") {
			lists.Add(1)
		}
		return tr.RoundTrip(r)
	}))
	st := gcsstore.New(client, bucket)
	gcsstore.SetListPage(st, 4)
	for i := range 10 {
		if _, err := st.PutIfMatch(t.Context(), "pages/"+strconv.Itoa(i), []byte(`{}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	lists.Store(0)
	got, err := st.List(t.Context(), "pages/")
	if err != nil || len(got) != 10 {
		t.Fatalf("List(pages/) = %v, %v; want 10 entries", got, err)
	}
	if n := lists.Load(); n != 3 {
		t.Errorf("List() of 10 objects in pages of 4 sent %d requests; want 3", n)
	}

	_, err = gcsstore.New(newClient(t, base, nil), "s3lect-no-such-bucket").List(t.Context(), "pages/")
	if !store.IsPermanent(err) || !strings.Contains(err.Error(), "gcloud storage buckets create") {
		t.Errorf("List() on a missing bucket = %v; want a permanent error naming the fix", err)
	}
	_, err = gcsstore.New(newClient(t, fakeGCSError(t, http.StatusForbidden), nil), "bucket").List(t.Context(), "pages/")
	if !store.IsPermanent(err) || !strings.Contains(err.Error(), "storage.objects.list") {
		t.Errorf("List() denied = %v; want a permanent error naming storage.objects.list", err)
	}
	_, err = gcsstore.New(newClient(t, fakeGCSError(t, http.StatusServiceUnavailable), nil), "bucket").List(t.Context(), "pages/")
	if err == nil || store.IsPermanent(err) {
		t.Errorf("List() answered 503 = %v; want a transient error", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
