package azblobstore_test

import (
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/s3lect/s3lect/internal/emulator"
)

// testContainer is the container each test creates on its own Azurite.
const testContainer = "s3lect-test"

// azurite starts Azurite, creates testContainer on it and returns the
// connection string.
func azurite(t *testing.T) string {
	t.Helper()
	conn := emulator.Azurite(t)
	if _, err := newClient(t, conn, testContainer, nil).Create(t.Context(), nil); err != nil {
		t.Fatalf("create container %s: %v", testContainer, err)
	}
	return conn
}

// newClient returns a client on the container name, with an HTTP client of
// its own whose idle connections are closed when the test ends. A non-nil
// wrap wraps its transport.
func newClient(t *testing.T, conn, name string, wrap func(http.RoundTripper) http.RoundTripper) *container.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(rt)
	}
	c, err := container.NewClientFromConnectionString(conn, name, &container.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: &http.Client{Transport: rt}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
