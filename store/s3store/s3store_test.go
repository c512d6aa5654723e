package s3store_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
	"github.com/s3lect/s3lect/store/storetest"
)

func TestConformanceOnS3(t *testing.T) {
	client := s3test.NewClient(t, nil, "", "")
	bucket := s3test.Bucket(t)
	log := notesLogger(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		st := s3store.New(client, bucket, s3store.WithLogger(log))
		s3store.SetListPage(st, storetest.ListKeys/3) // ListManyKeys crosses pages
		return st
	})
}

func TestPermanentErrorsOnMinIO(t *testing.T) {
	bucket := s3test.Bucket(t)
	cases := []struct {
		name   string
		st     store.Store
		naming string // what the error must name
	}{
		{"NoSuchBucket", s3store.New(s3test.NewClient(t, nil, "", ""), "s3lect-no-such-bucket"), "NoSuchBucket"},
		{"UnknownAccessKey", s3store.New(s3test.NewClient(t, nil, "nobody", "wrong-secret"), bucket), "InvalidAccessKeyId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"Get", func() error { _, _, err := tc.st.Get(t.Context(), "leader/x.json"); return err }},
				{"Put", func() error { _, err := tc.st.PutIfMatch(t.Context(), "leader/x.json", []byte("{}"), ""); return err }},
				{"List", func() error { _, err := tc.st.(store.Lister).List(t.Context(), "leader/x.json"); return err }},
			} {
				err := op.call()
				if !store.IsPermanent(err) {
					t.Errorf("%s error = %v; want a permanent error", op.name, err)
				}
				if err != nil && (!strings.Contains(err.Error(), tc.naming) || !strings.Contains(err.Error(), "leader/x.json")) {
					t.Errorf("%s error = %q; want it to name %s and the key", op.name, err, tc.naming)
				}
			}
		})
	}
}

// fakeS3 is a minimal S3 endpoint on loopback for behaviour MinIO cannot
// be made to show: a store that ignores conditional headers, and chosen
// error codes.
type fakeS3 struct {
	mu          sync.Mutex
	objects     map[string][]byte
	conditional bool              // honour If-None-Match / If-Match
	fail        map[string][2]any // method -> {status, code}: answer every such request with this error
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.fail[r.Method]; ok {
		writeError(w, e[0].(int), e[1].(string))
		return
	}
	key := r.URL.Path
	cur, exists := f.objects[key]
	etag := func(b []byte) string { s := md5.Sum(b); return `"` + hex.EncodeToString(s[:]) + `"` }
	switch r.Method {
	case http.MethodGet:
		if !exists {
			writeError(w, 404, "NoSuchKey")
			return
		}
		w.Header().Set("ETag", etag(cur))
		w.Write(cur)
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		if f.conditional {
			if inm := r.Header.Get("If-None-Match"); inm == "*" && exists {
				writeError(w, 412, "PreconditionFailed")
				return
			}
			if im := r.Header.Get("If-Match"); im != "" && (!exists || im != etag(cur)) {
				writeError(w, 412, "PreconditionFailed")
				return
			}
		}
		f.objects[key] = body
		w.Header().Set("ETag", etag(body))
	default:
		writeError(w, 405, "MethodNotAllowed")
	}
}

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>fake</Message></Error>`, code)
}

// objectsOnly hides a store's List, for the fakes that serve no listings.
type objectsOnly struct{ store.Store }

func newFake(t *testing.T, f *fakeS3) *s3store.Store {
	t.Helper()
	if f.objects == nil {
		f.objects = map[string][]byte{}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return s3store.New(s3test.ClientFor(t, srv.URL, nil, "fake", "fake"), "bucket")
}

func TestRefusesStoreWithoutConditionalWrites(t *testing.T) {
	f := &fakeS3{conditional: false}
	st := newFake(t, f)
	_, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"leaderID":"a"}`), "")
	if !errors.Is(err, store.ErrNoConditionalWrites) || !store.IsPermanent(err) {
		t.Fatalf("PutIfMatch() error = %v; want a permanent ErrNoConditionalWrites", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.objects["/bucket/leader/x.json"]; ok {
		t.Error("the lockfile was written on a store that ignores conditional writes")
	}
}

func TestFakeHonouringConditionalsPassesConformance(t *testing.T) {
	// The fake serves objects, not listings: its store's List is hidden
	// (listing is tested on MinIO).
	storetest.Run(t, func(t *testing.T) store.Store { return objectsOnly{newFake(t, &fakeS3{conditional: true})} })
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		method, code string
		status       int
		want         func(error) bool
		wantDesc     string
	}{
		{"PUT", "PreconditionFailed", 412, isPrecondition, "ErrPreconditionFailed"},
		{"PUT", "ConditionalRequestConflict", 409, isPrecondition, "ErrPreconditionFailed"},
		{"GET", "NoSuchKey", 404, func(err error) bool { return errors.Is(err, store.ErrNotFound) }, "ErrNotFound"},
		{"GET", "NoSuchBucket", 404, store.IsPermanent, "permanent"},
		// Without s3:ListBucket a missing key reads as AccessDenied: taken
		// as absent until a create proves the object exists.
		{"GET", "AccessDenied", 403, func(err error) bool { return errors.Is(err, store.ErrNotFound) }, "ErrNotFound"},
		{"PUT", "AccessDenied", 403, store.IsPermanent, "permanent"},
		{"GET", "SignatureDoesNotMatch", 403, store.IsPermanent, "permanent"},
		{"PUT", "NotImplemented", 501, store.IsPermanent, "permanent"},
		{"GET", "InternalError", 500, transient, "transient"},
		{"PUT", "SlowDown", 503, transient, "transient"},
		{"GET", "ServiceUnavailable", 503, transient, "transient"},
	}
	for _, tc := range cases {
		t.Run(tc.method+"/"+tc.code, func(t *testing.T) {
			f := &fakeS3{conditional: true}
			st := newFake(t, f)
			warm := ""
			if tc.method == "PUT" { // pass the conditional-write check first
				var err error
				if warm, err = st.PutIfMatch(t.Context(), "leader/x.json", []byte("{}"), ""); err != nil {
					t.Fatal(err)
				}
			}
			f.mu.Lock()
			f.fail = map[string][2]any{tc.method: {tc.status, tc.code}}
			f.mu.Unlock()
			var err error
			if tc.method == "GET" {
				_, _, err = st.Get(t.Context(), "leader/x.json")
			} else {
				_, err = st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"n":2}`), warm)
			}
			if !tc.want(err) {
				t.Errorf("error = %v; want %s", err, tc.wantDesc)
			}
		})
	}
}

func isPrecondition(err error) bool { return errors.Is(err, store.ErrPreconditionFailed) }

func transient(err error) bool {
	return err != nil && !store.IsPermanent(err) && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrPreconditionFailed)
}

func TestBoundedBodyRead(t *testing.T) {
	f := &fakeS3{conditional: true}
	st := newFake(t, f)
	f.objects["/bucket/big"] = make([]byte, 50<<20)
	data, _, err := st.Get(context.Background(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != store.MaxObjectSize+1 {
		t.Errorf("Get(50 MB object) returned %d bytes; want MaxObjectSize+1 = %d", len(data), store.MaxObjectSize+1)
	}
}

func TestClientSideErrors(t *testing.T) {
	t.Run("NoCredentials", func(t *testing.T) {
		client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"), UsePathStyle: true,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{}, errors.New("no credentials in this environment")
			})})
		_, _, err := s3store.New(client, "b").Get(t.Context(), "leader/x.json")
		if !store.IsPermanent(err) || !strings.Contains(err.Error(), "credentials") {
			t.Errorf("Get() without credentials = %v; want a permanent error about credentials", err)
		}
	})
	t.Run("ConnectionRefused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		st := s3store.New(s3test.ClientFor(t, "http://"+addr, nil, "k", "s"), "b")
		_, _, err = st.Get(t.Context(), "leader/x.json")
		if err == nil || store.IsPermanent(err) {
			t.Errorf("Get() with the server down = %v; want a transient error", err)
		}
	})
}

func TestListErrorMapping(t *testing.T) {
	cases := []struct {
		code     string
		status   int
		want     func(error) bool
		wantDesc string
		naming   string
	}{
		{"AccessDenied", 403, store.IsPermanent, "permanent", "s3:ListBucket"},
		{"NoSuchBucket", 404, store.IsPermanent, "permanent", "NoSuchBucket"},
		{"SlowDown", 503, transient, "transient", "SlowDown"},
		{"InternalError", 500, transient, "transient", "InternalError"},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			f := &fakeS3{conditional: true, objects: map[string][]byte{}, fail: map[string][2]any{"GET": {tc.status, tc.code}}}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			var requests atomic.Int32
			client := s3test.ClientFor(t, srv.URL, func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) { requests.Add(1); return rt.RoundTrip(r) })
			}, "fake", "fake")
			_, err := s3store.New(client, "bucket").List(t.Context(), "pool/sessions/")
			if !tc.want(err) || !strings.Contains(err.Error(), tc.naming) || !strings.Contains(err.Error(), "pool/sessions/") {
				t.Errorf("List() error = %v; want a %s error naming %s and the prefix", err, tc.wantDesc, tc.naming)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("List() sent %d requests; want 1 (no retry inside the SDK)", n)
			}
		})
	}
}

// TestListPagesOnMinIO lists more keys than one page of the store's own
// size holds (1,000 on S3 and MinIO), and counts the requests it took.
func TestListPagesOnMinIO(t *testing.T) {
	const n = 1001
	var lists atomic.Int32
	client := s3test.NewClient(t, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
				lists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}, "", "")
	st := s3store.New(client, s3test.Bucket(t))
	prefix := "pages/" + t.Name() + "/"
	want := make([]store.Entry, n)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			key := fmt.Sprintf("%sk%04d", prefix, i)
			etag, err := st.PutIfMatch(t.Context(), key, fmt.Appendf(nil, `{"k":%d}`, i), "")
			want[i] = store.Entry{Key: key, ETag: etag}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("creating %d keys: %v", n, err)
	}
	lists.Store(0)
	got, err := st.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List() error = %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("List() gave %d entries; want the %d created, in order, with their ETags", len(got), n)
	}
	if lists.Load() != 2 {
		t.Errorf("List() of %d keys sent %d ListObjectsV2 requests; want 2 (pages of 1,000)", n, lists.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
