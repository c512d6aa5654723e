//go:build gcs || cloud

package storeurl_test

import (
	"testing"

	"github.com/s3lect/s3lect/internal/cloudtest"
	"github.com/s3lect/s3lect/store/storeurl"
)

// .ci/run runs this with -tags gcs: without it, gs:// is left out.

func TestOpenGCS(t *testing.T) {
	cloudtest.GCS(t, "elections")
	lf, err := storeurl.Open(t.Context(), "gs://elections/leader/job.json", storeurl.Options{})
	if err != nil {
		t.Fatalf("Open(gs://) = %v", err)
	}
	defer lf.Close()
	roundTrip(t, lf, "gs://elections/leader/job.json", "leader/job.json")
}
