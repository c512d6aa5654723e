//go:build cloud

package main

import (
	"strings"
	"testing"

	"github.com/s3lect/s3lect/internal/cloudtest"
)

// The demo built with the tag cloud elects on any store URL; .ci/run runs
// these with -tags cloud.

func TestDemoOnGCS(t *testing.T) {
	cloudtest.GCS(t, "demo")
	out := runDemo(t, options{storeURL: "gs://demo/leader/demo.json"})
	if !strings.Contains(out, "gs://demo/leader/demo.json") {
		t.Errorf("demo did not say it ran on gs://demo/leader/demo.json:\n%s", out)
	}
}

func TestDemoOnAzure(t *testing.T) {
	cloudtest.Azure(t, "demo")
	out := runDemo(t, options{storeURL: "azblob://demo/leader/demo.json"})
	if !strings.Contains(out, "azblob://demo/leader/demo.json") {
		t.Errorf("demo did not say it ran on azblob://demo/leader/demo.json:\n%s", out)
	}
}
