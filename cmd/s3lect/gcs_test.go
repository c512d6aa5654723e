//go:build gcs || cloud

package main

import (
	"testing"

	"github.com/s3lect/s3lect/internal/cloudtest"
)

// Google Cloud Storage is built into s3lect only with the tag cloud (or
// its older name gcs, which .ci/run uses): TestMain then installs the
// binary with the tag cloud.
func init() { installTags = "cloud" }

// TestGCSStore runs s3lect on Google Cloud Storage: a real
// fake-gcs-server (the pinned binary .ci/run installs) on loopback,
// reached through STORAGE_EMULATOR_HOST as a user would point the client
// at it.
func TestGCSStore(t *testing.T) {
	cloudtest.GCS(t, "elections")
	cloudElection(t, "gs://elections/leader/job.json", "gs://no-such-bucket/leader/job.json", "gcloud storage buckets create gs://no-such-bucket")
}
