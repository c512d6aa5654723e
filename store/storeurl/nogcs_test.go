//go:build !(gcs || cloud)

package storeurl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/s3lect/s3lect/store/storeurl"
)

// Without the tag cloud (or gcs), a gs:// URL is refused at once, saying how to build
// Google Cloud Storage in.
func TestGCSLeftOut(t *testing.T) {
	_, err := storeurl.Open(t.Context(), "gs://elections/leader/job.json", storeurl.Options{})
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "-tags cloud") {
		t.Errorf("Open(gs://) = %v; want ErrBadURL saying to build with -tags cloud", err)
	}
}
