//go:build gcs || cloud

package storeurl

import (
	"context"

	"github.com/s3lect/s3lect/store/gcsstore"
)

// Google Cloud Storage is built in only with the tag cloud, the one tag
// the command and the demo both use for the clouds' SDKs (gcs is its older
// name): see gcs_none.go.

// openGCS builds a Google Cloud Storage store on bucket from the
// environment (Application Default Credentials, or STORAGE_EMULATOR_HOST).
func openGCS(ctx context.Context, bucket, key, where string) (*Lockfile, error) {
	st, err := gcsstore.FromEnvironment(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return &Lockfile{Store: st, Key: key, URL: where, Close: st.CloseIdleConnections}, nil
}
