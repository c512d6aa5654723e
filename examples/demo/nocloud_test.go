//go:build !cloud

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// The default demo links no cloud SDK: -store says how to get them.
func TestStoreNeedsTheCloudTag(t *testing.T) {
	err := run(context.Background(), options{n: 3, speed: 10, storeURL: "gs://b/k"}, &bytes.Buffer{})
	if !errors.Is(err, errNoCloud) || !strings.Contains(err.Error(), "go run -tags cloud ./examples/demo") {
		t.Errorf("run(-store, no cloud tag) = %v; want the error saying to build with -tags cloud", err)
	}
}
