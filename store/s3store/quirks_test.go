package s3store_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
	"github.com/s3lect/s3lect/store/storetest"
)

// quirkyS3 is a loopback S3 endpoint with the quirks of real stores:
// If-Match accepted only bare (Ceph RGW) or never, losers of a conditional
// write answered 500 instead of 412 (Ceph RGW), and every request's
// headers recorded.
type quirkyS3 struct {
	mu       sync.Mutex
	objects  map[string][]byte
	bareOnly bool // If-Match must name the ETag without quotes
	noMatch  bool // If-Match never matches
	loser5xx bool // a failed condition is answered 500 InternalError
	denyPuts bool // every PUT is answered 403 AccessDenied
	headers  []http.Header
}

func (f *quirkyS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headers = append(f.headers, r.Header.Clone())
	if f.objects == nil {
		f.objects = map[string][]byte{}
	}
	key := r.URL.Path
	cur, exists := f.objects[key]
	sum := func(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }
	refuse := func() {
		if f.loser5xx {
			writeError(w, 500, "InternalError")
		} else {
			writeError(w, 412, "PreconditionFailed")
		}
	}
	switch r.Method {
	case http.MethodGet:
		if !exists {
			writeError(w, 404, "NoSuchKey")
			return
		}
		w.Header().Set("ETag", `"`+sum(cur)+`"`)
		w.Write(cur)
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		if f.denyPuts {
			writeError(w, 403, "AccessDenied")
			return
		}
		if r.Header.Get("If-None-Match") == "*" && exists {
			refuse()
			return
		}
		if im := r.Header.Get("If-Match"); im != "" {
			want := `"` + sum(cur) + `"`
			if f.bareOnly {
				want = sum(cur)
			}
			if exists && f.bareOnly && im == `"`+sum(cur)+`"` {
				writeError(w, 412, "PreconditionFailed") // Ceph refuses the quoted form
				return
			}
			if !exists || f.noMatch || im != want {
				refuse()
				return
			}
		}
		f.objects[key] = body
		w.Header().Set("ETag", `"`+sum(body)+`"`)
	default:
		writeError(w, 405, "MethodNotAllowed")
	}
}

func newQuirky(t *testing.T, f *quirkyS3, opts ...s3store.Option) *s3store.Store {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return s3store.New(s3test.ClientFor(t, srv.URL, nil, "fake", "fake"), "bucket", opts...)
}

// countingHandler counts the records logged at Warn or above.
type countingHandler struct {
	slog.Handler
	mu    sync.Mutex
	warns []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		h.warns = append(h.warns, r.Message)
		h.mu.Unlock()
	}
	return nil
}

func TestBareETagStore(t *testing.T) {
	// Ceph RGW's behaviour: quoted If-Match refused, bare accepted, race
	// losers answered 500. The whole conformance suite must pass on it.
	h := &countingHandler{}
	f := &quirkyS3{bareOnly: true, loser5xx: true}
	st := newQuirky(t, f, s3store.WithLogger(slog.New(h)))
	storetest.Run(t, func(t *testing.T) store.Store { return objectsOnly{st} })
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.warns) != 1 || !strings.Contains(h.warns[0], "bare") {
		t.Errorf("warnings = %q; want exactly one, saying ETags are sent bare", h.warns)
	}
}

func TestRaceLosersAnswered5xx(t *testing.T) {
	// Quoted ETags work here; only the 500s of the losers differ from S3.
	storetest.Run(t, func(t *testing.T) store.Store { return objectsOnly{newQuirky(t, &quirkyS3{loser5xx: true})} })
}

func TestRefusesStoreWhereIfMatchNeverMatches(t *testing.T) {
	f := &quirkyS3{noMatch: true}
	st := newQuirky(t, f)
	_, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"leaderID":"a"}`), "")
	if !errors.Is(err, store.ErrNoConditionalWrites) || !store.IsPermanent(err) {
		t.Fatalf("PutIfMatch() error = %v; want a permanent ErrNoConditionalWrites", err)
	}
	for _, s := range []string{"quoted", "bare", "bucket", "leader/x.json"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.objects["/bucket/leader/x.json"]; ok {
		t.Error("the lockfile was written on a store whose If-Match never matches")
	}
}

func TestWithHeaderOnEveryRequest(t *testing.T) {
	f := &quirkyS3{}
	st := newQuirky(t, f, s3store.WithHeader("X-Tigris-Consistent", "true"))
	etag, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"n":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(t.Context(), "leader/x.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"n":2}`), etag); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.headers) < 5 { // the check's probe writes and read, then ours
		t.Fatalf("the server saw %d requests; want the check's and ours", len(f.headers))
	}
	for i, h := range f.headers {
		if h.Get("X-Tigris-Consistent") != "true" {
			t.Errorf("request %d lacks X-Tigris-Consistent: true (headers %v)", i, h)
		}
		if !strings.Contains(strings.ToLower(h.Get("Authorization")), "x-tigris-consistent") {
			t.Errorf("request %d does not sign X-Tigris-Consistent", i)
		}
	}
}

func TestPermanentCodes(t *testing.T) {
	for _, code := range []string{"XAdminUserNotFound", "InvalidAccessKeyId", "InvalidObjectName", "XMinioInvalidObjectName", "KeyTooLongError", "NotImplemented"} {
		t.Run(code, func(t *testing.T) {
			f := &fakeS3{conditional: true, fail: map[string][2]any{"GET": {400, code}, "PUT": {400, code}}}
			st := newFake(t, f)
			_, _, gerr := st.Get(t.Context(), "leader/x.json")
			_, perr := st.PutIfMatch(t.Context(), "leader/x.json", []byte("{}"), "")
			for _, err := range []error{gerr, perr} {
				if !store.IsPermanent(err) || !strings.Contains(err.Error(), code) || !strings.Contains(err.Error(), "leader/x.json") {
					t.Errorf("error = %v; want a permanent error naming %s and the key", err, code)
				}
			}
		})
	}
}

// deny404Proxy forwards to a real S3 server and rewrites its 404 answers
// to GETs into 403 AccessDenied, as AWS answers a reader who lacks
// s3:ListBucket.
func deny404Proxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodGet && resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			body := []byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			resp.StatusCode, resp.Status = 403, "403 Forbidden"
			resp.Body = io.NopCloser(bytes.NewReader(body))
			resp.ContentLength = int64(len(body))
			resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
		}
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	rp.Transport = tr
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestWithoutListBucket(t *testing.T) {
	bucket := s3test.Bucket(t)
	ep := deny404Proxy(t, s3test.Endpoint(t))
	key := "nolist/" + t.Name() + ".json"
	newStore := func() store.Store { return s3store.New(s3test.ClientFor(t, ep, nil, "", ""), bucket) }

	// A fresh group of three elects: the 403 on the missing lockfile is
	// taken as absent, and the If-None-Match creates settle it. The losers
	// of that race read the object, now present, and follow: none fails.
	type result struct {
		lead *s3lect.Leadership
		err  error
	}
	results := make(chan result, 3)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	for _, id := range []string{"a", "a2", "a3"} {
		e, err := s3lect.New(shortConfig(newStore(), key, id))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		go func() {
			lead, err := e.Campaign(ctx)
			results <- result{lead, err}
		}()
	}
	first := <-results
	if first.err != nil {
		t.Fatalf("Campaign() on a fresh group whose missing keys read as 403 = %v; want leadership", first.err)
	}
	lead := first.lead
	if lead.Term() != 1 {
		t.Errorf("term = %d; want 1", lead.Term())
	}
	time.Sleep(time.Second) // the followers read the lockfile
	select {
	case r := <-results:
		t.Fatalf("a follower's Campaign returned %v while the leader holds; want it to keep following", r.err)
	default:
	}

	// A real denial: the object exists but this reader's GETs are all
	// refused. Its create is refused with 412, which proves it.
	st := s3store.New(s3test.ClientFor(t, ep, func(rt http.RoundTripper) http.RoundTripper {
		return denyGets{rt}
	}, "", ""), bucket)
	e2, err := s3lect.New(shortConfig(st, key, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a bound, not a speed limit
	defer cancel()
	start := time.Now()
	_, err = e2.Campaign(ctx)
	took := time.Since(start)
	if err == nil || !store.IsPermanent(err) || !strings.Contains(err.Error(), "s3:GetObject") || !strings.Contains(err.Error(), key) {
		t.Fatalf("Campaign() with reads denied on an existing lockfile = %v; want a permanent error naming s3:GetObject and the key", err)
	}
	t.Logf("the denial reached Campaign after %v", took)
	if err := lead.Resign(t.Context()); err != nil {
		t.Errorf("Resign() = %v", err)
	}
}

// denyGets answers every GET but the probe's with 403 AccessDenied, as S3
// does to a reader granted s3:GetObject on the probe only.
type denyGets struct{ rt http.RoundTripper }

func (d denyGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, ".s3lect-probe") {
		return d.rt.RoundTrip(r)
	}
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`
	return &http.Response{StatusCode: 403, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r}, nil
}

// TestDenialIsCheckedAgainAfterABackoff: an AccessDenied during the
// conditional-write check (an IAM policy briefly wrong) is not a verdict on
// the store. It is returned, without a request, until its backoff passes,
// then the check runs again; once the policy is fixed, writes succeed.
func TestDenialIsCheckedAgainAfterABackoff(t *testing.T) {
	f := &quirkyS3{denyPuts: true}
	st := newQuirky(t, f)
	requests := func() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.headers) }
	_, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"n":1}`), "")
	if !store.IsPermanent(err) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("PutIfMatch() = %v; want a permanent AccessDenied", err)
	}
	n := requests()
	f.mu.Lock()
	f.denyPuts = false // the policy is fixed
	f.mu.Unlock()
	if _, err2 := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"n":1}`), ""); err2 == nil || err2.Error() != err.Error() || requests() != n {
		t.Fatalf("PutIfMatch() within the backoff = %v after %d requests; want the remembered denial and no request", err2, requests()-n)
	}
	s3store.ExpireDenial(st)
	if _, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte(`{"n":1}`), ""); err != nil {
		t.Fatalf("PutIfMatch() after the backoff, the policy fixed = %v; want the check run again and the write done", err)
	}
}
