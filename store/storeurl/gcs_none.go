//go:build !(gcs || cloud)

package storeurl

import (
	"context"
	"fmt"
)

// openGCS refuses: Google Cloud Storage is built in only with the tag cloud
// (or its older name gcs), since Google's client weighs more than the rest of a
// program that links every other backend.
func openGCS(context.Context, string, string, string) (*Lockfile, error) {
	return nil, fmt.Errorf("%w: this build leaves Google Cloud Storage out: Google's client would add about 45 MB; build with -tags cloud for gs:// URLs (go install -tags cloud github.com/s3lect/s3lect/cmd/s3lect@latest)", ErrBadURL)
}
