//go:build !(gcs || cloud)

package main

import (
	"strings"
	"testing"
)

// TestGCSLeftOut: a binary built without the tag cloud (or gcs) refuses gs:// at
// once, saying how to build it in.
func TestGCSLeftOut(t *testing.T) {
	out, err := runBin("status", "-store", "gs://elections/leader/job.json")
	ee, _ := err.(interface{ ExitCode() int })
	if ee == nil || ee.ExitCode() != exitUsage || !strings.Contains(out, "-tags cloud") {
		t.Errorf("s3lect status gs://...: %v\n%s\nwant status %d saying to build with -tags cloud", err, out, exitUsage)
	}
}
