package azblobstore_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/azblobstore"
)

func TestFromEnvironmentConnectionString(t *testing.T) {
	conn := azurite(t)
	t.Setenv(azblobstore.EnvConnectionString, conn)
	t.Setenv(azblobstore.EnvAccount, "ignoredwhenconnset")
	st, err := azblobstore.FromEnvironment(t.Context(), testContainer)
	if err != nil {
		t.Fatalf("FromEnvironment() = %v", err)
	}
	t.Cleanup(st.CloseIdleConnections)
	data := []byte(`{"leaderID":"a"}`)
	etag, err := st.PutIfMatch(t.Context(), "leader/env.json", data, "")
	if err != nil {
		t.Fatalf("PutIfMatch(create) = %v", err)
	}
	got, gotETag, err := st.Get(t.Context(), "leader/env.json")
	if err != nil || !bytes.Equal(got, data) || gotETag != etag {
		t.Fatalf("Get() = %q, %s, %v; want %q, %s", got, gotETag, err, data, etag)
	}
}

func TestFromEnvironmentNeedsOneVariable(t *testing.T) {
	t.Setenv(azblobstore.EnvConnectionString, "")
	t.Setenv(azblobstore.EnvAccount, "")
	_, err := azblobstore.FromEnvironment(t.Context(), "elections")
	if err == nil {
		t.Fatal("FromEnvironment() with neither variable set succeeded; want an error naming both")
	}
	for _, name := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("FromEnvironment() error %q does not name %s", err, name)
		}
	}
}

func TestFromEnvironmentRefusesBadValues(t *testing.T) {
	cases := []struct {
		name, conn, account, container, naming string
	}{
		{"BadConnectionString", "not a connection string", "", "elections", "AZURE_STORAGE_CONNECTION_STRING"},
		{"BadAccountName", "", "Not_An_Account", "elections", "Not_An_Account"},
		{"NoContainer", "", "s3lectacct", "", "container"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(azblobstore.EnvConnectionString, tc.conn)
			t.Setenv(azblobstore.EnvAccount, tc.account)
			st, err := azblobstore.FromEnvironment(t.Context(), tc.container)
			if err == nil {
				st.CloseIdleConnections()
				t.Fatal("FromEnvironment() succeeded; want an error")
			}
			if !strings.Contains(err.Error(), tc.naming) {
				t.Errorf("FromEnvironment() error %q does not name %q", err, tc.naming)
			}
		})
	}
}

// With AZURE_STORAGE_ACCOUNT alone the Store reaches the account's public
// endpoint with a Microsoft Entra token. Here no credential can get one
// (only the Azure CLI is tried, and it is not on PATH), so the Store fails
// before it sends a request. The first failures are retried (an identity
// endpoint may not be ready yet); after a minute of them the error turns
// permanent (TestTokenFailuresAreWeatherUntilTheyLast).
func TestFromEnvironmentAccountWithoutCredential(t *testing.T) {
	t.Setenv(azblobstore.EnvConnectionString, "")
	t.Setenv(azblobstore.EnvAccount, "s3lectacct")
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "AzureCLICredential")
	t.Setenv("PATH", t.TempDir())
	st, err := azblobstore.FromEnvironment(t.Context(), "elections")
	if err != nil {
		t.Fatalf("FromEnvironment() = %v", err)
	}
	t.Cleanup(st.CloseIdleConnections)
	if got, want := azblobstore.URL(st), "https://s3lectacct.blob.core.windows.net/elections"; got != want {
		t.Errorf("container URL = %s; want %s", got, want)
	}
	_, _, err = st.Get(t.Context(), "leader/x.json")
	if err == nil || store.IsPermanent(err) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get() without a usable credential, at once = %v; want a transient error", err)
	}
	for _, s := range []string{"azblob://elections/leader/x.json", "AzureCLICredential"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Get() error %q does not name %q", err, s)
		}
	}
}

// A credential that has never given a token and keeps failing for a
// minute is missing (the error is permanent); before that minute, or once
// it has given a token, its failures are weather that s3lect retries.
func TestTokenFailuresAreWeatherUntilTheyLast(t *testing.T) {
	if azblobstore.TokenMarksFailures(0, 30*time.Second) {
		t.Error("a credential failing for 30s since its first try: marked as missing; want retried (an identity endpoint not ready yet)")
	}
	if !azblobstore.TokenMarksFailures(0, time.Minute) {
		t.Error("a credential failing for a minute without ever giving a token: not marked as missing; want a permanent error")
	}
	if azblobstore.TokenMarksFailures(1, time.Hour) {
		t.Error("a credential that gave a token once: failure marked as missing credentials; want it retried")
	}
}
