//go:build cloud

package main

import (
	"context"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/storeurl"
)

// openURL opens the store a -store URL names, through store/storeurl,
// which links every backend.
func openURL(ctx context.Context, url string, pathStyle bool) (store.Store, string, string, func(), error) {
	lf, err := storeurl.Open(ctx, url, storeurl.Options{S3PathStyle: pathStyle})
	if err != nil {
		return nil, "", "", nil, err
	}
	return lf.Store, lf.URL, lf.Key, lf.Close, nil
}
