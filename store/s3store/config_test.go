package s3store_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// TestLoadConfigHoldsSDKWarnings: with no credentials and a metadata
// endpoint that refuses tokens, the SDK warns "falling back to IMDSv1"
// while it looks for a role. LoadConfig's error naming what to set is
// then all that is said: the SDK's warning is not written before it.
// With credentials, the SDK's lines are written as usual.
func TestLoadConfigHoldsSDKWarnings(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusForbidden) // no token: the SDK falls back to IMDSv1, and says so
			return
		}
		w.WriteHeader(http.StatusNotFound) // no role
	}))
	defer imds.Close()
	s3test.NoCredentials(t)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	var log bytes.Buffer
	s3store.SetSDKLog(t, &log)
	_, err := s3store.LoadConfig(t.Context())
	if !errors.Is(err, s3store.ErrNoCredentials) {
		t.Fatalf("LoadConfig() = %v; want ErrNoCredentials", err)
	}
	if log.Len() != 0 {
		t.Errorf("the SDK wrote before the no-credentials error:\n%s", log.String())
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if _, err := s3store.LoadConfig(t.Context()); err != nil {
		t.Fatalf("LoadConfig() with credentials = %v", err)
	}
	if strings.Contains(log.String(), "IMDSv1") {
		t.Errorf("SDK log with credentials from the environment:\n%s\nwant no metadata lookup", log.String())
	}
}
