//go:build gcs

package main

import (
	"testing"

	"github.com/s3lect/s3lect/internal/cloudtest"
)

// Google Cloud Storage is built into s3lect only with the tag gcs:
// .ci/run runs this file's test with -tags gcs, and TestMain then installs
// the binary with that tag.
func init() { installTags = "gcs" }

// TestGCSStore runs s3lect on Google Cloud Storage: a real
// fake-gcs-server (the pinned binary .ci/run installs) on loopback,
// reached through STORAGE_EMULATOR_HOST as a user would point the client
// at it.
func TestGCSStore(t *testing.T) {
	cloudtest.GCS(t, "elections")
	cloudElection(t, "gs://elections/leader/job.json", "gs://no-such-bucket/leader/job.json", "gcloud storage buckets create gs://no-such-bucket")
}
