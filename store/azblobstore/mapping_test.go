package azblobstore_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/azblobstore"
)

// A lease on the lockfile makes every write fail with 412 LeaseIdMissing.
// That is not a lost race: the Store reports it as permanent, saying how
// to break the lease.
func TestLeasedLockfileIsPermanentOnAzurite(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	client := newClient(t, conn, testContainer, nil)
	st := azblobstore.New(client)
	key := "leader/leased.json"
	etag, err := st.PutIfMatch(t.Context(), key, []byte(`{"n":1}`), "")
	if err != nil {
		t.Fatalf("PutIfMatch(create) = %v", err)
	}
	lc, err := lease.NewBlobClient(client.NewBlobClient(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(t.Context(), -1, nil); err != nil {
		t.Fatalf("AcquireLease() = %v", err)
	}
	_, err = st.PutIfMatch(t.Context(), key, []byte(`{"n":2}`), etag)
	if !store.IsPermanent(err) || errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch(leased blob) = %v; want a permanent error, not a precondition failure", err)
	}
	if !strings.Contains(err.Error(), "lease break") {
		t.Errorf("PutIfMatch(leased blob) error %q does not say how to break the lease", err)
	}
	t.Logf("%v", err)
}

// fakeAzure answers every request with one error, and counts requests.
type fakeAzure struct {
	status   int
	code     string
	requests atomic.Int32
}

func (f *fakeAzure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.code != "" {
		w.Header().Set("x-ms-error-code", f.code)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(f.status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>fake</Message></Error>`, f.code)
}

// Error answers Azurite cannot be made to give, on a fake server on
// loopback. The client keeps the SDK's default retry options: the Store
// must still send each request once.
func TestErrorMapping(t *testing.T) {
	cases := []struct {
		method, code string
		status       int
		want         string // "permanent", "transient", "notfound" or "precondition"
		naming       string
	}{
		{"GET", "BlobNotFound", 404, "notfound", ""},
		{"GET", "ContainerNotFound", 404, "permanent", "az storage container create"},
		{"GET", "AuthenticationFailed", 403, "permanent", "account key"},
		{"GET", "AuthorizationPermissionMismatch", 403, "permanent", "Storage Blob Data Contributor"},
		{"GET", "InsufficientAccountPermissions", 403, "permanent", "Storage Blob Data Contributor"},
		{"GET", "KeyBasedAuthenticationNotPermitted", 403, "permanent", "AZURE_STORAGE_ACCOUNT"},
		{"GET", "SomethingNew", 403, "permanent", "Storage Blob Data Contributor"},
		{"GET", "OutOfRangeInput", 400, "permanent", "LockfilePath"},
		{"GET", "ServerBusy", 503, "transient", ""},
		{"GET", "InternalError", 500, "transient", ""},
		{"GET", "", 429, "transient", ""},
		{"PUT", "ContainerNotFound", 404, "permanent", "az storage container create"},
		{"PUT", "LeaseIdMissing", 412, "permanent", "lease break"},
		{"PUT", "BlobImmutableDueToPolicy", 409, "permanent", "immutability"},
		{"PUT", "AuthorizationFailure", 403, "permanent", "firewall"},
		{"PUT", "ServerBusy", 503, "transient", ""},
		{"PUT", "OperationTimedOut", 500, "transient", ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+"/"+tc.code+"/"+fmt.Sprint(tc.status), func(t *testing.T) {
			f := &fakeAzure{status: tc.status, code: tc.code}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			tr := http.DefaultTransport.(*http.Transport).Clone()
			t.Cleanup(tr.CloseIdleConnections)
			client, err := container.NewClientWithNoCredential(srv.URL+"/devstoreaccount1/elections", &container.ClientOptions{
				ClientOptions: policy.ClientOptions{Transport: &http.Client{Transport: tr},
					Retry: policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}},
			})
			if err != nil {
				t.Fatal(err)
			}
			st := azblobstore.New(client)
			if tc.method == "GET" {
				_, _, err = st.Get(t.Context(), "leader/x.json")
			} else {
				_, err = st.PutIfMatch(t.Context(), "leader/x.json", []byte("{}"), "")
			}
			var got string
			switch {
			case err == nil:
				t.Fatal("no error; want one")
			case store.IsPermanent(err):
				got = "permanent"
			case errors.Is(err, store.ErrNotFound):
				got = "notfound"
			case errors.Is(err, store.ErrPreconditionFailed):
				got = "precondition"
			default:
				got = "transient"
			}
			if got != tc.want {
				t.Errorf("error = %v; want a %s error", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.naming) {
				t.Errorf("error %q does not name %q", err, tc.naming)
			}
			if n := f.requests.Load(); n != 1 {
				t.Errorf("the Store sent %d requests; want 1 (the SDK's retries off)", n)
			}
		})
	}
}
