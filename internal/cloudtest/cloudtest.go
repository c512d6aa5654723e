// Package cloudtest gives the tests of the tools that open stores by URL
// (store/storeurl, the command, the demo) a GCS bucket or an Azure
// container on the emulators (internal/emulator), with the environment
// set the way a user's would be. It is a module of its own because it
// needs the Azure SDK, which the root module must never require.
package cloudtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/s3lect/s3lect/internal/emulator"
)

// GCS starts fake-gcs-server with an empty bucket named bucket, and sets
// STORAGE_EMULATOR_HOST for the rest of the test (child processes
// included), so that gs://bucket/... URLs reach it.
func GCS(t *testing.T, bucket string) {
	t.Helper()
	base := emulator.FakeGCS(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(base+"/storage/v1/b?project=s3lect-test", "application/json",
		strings.NewReader(`{"name":"`+bucket+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create bucket %s on fake-gcs-server: %s", bucket, resp.Status)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(base, "http://"))
}

// Azure starts Azurite with an empty container named name, and sets
// AZURE_STORAGE_CONNECTION_STRING for the rest of the test (child
// processes included), so that azblob://name/... URLs reach it.
func Azure(t *testing.T, name string) {
	t.Helper()
	conn := emulator.Azurite(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	c, err := container.NewClientFromConnectionString(conn, name, &container.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: &http.Client{Transport: tr}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(t.Context(), nil); err != nil {
		t.Fatalf("create container %s on Azurite: %v", name, err)
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
}
