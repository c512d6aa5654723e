//go:build !cloud

package main

import (
	"context"
	"errors"

	"github.com/s3lect/s3lect/store"
)

// errNoCloud is -store's error in a demo built without the cloud tag.
var errNoCloud = errors.New("-store needs the store backends linked in, with the clouds' SDKs (tens of MiB, kept out of the default demo): go run -tags cloud ./examples/demo -store URL; for S3 and NATS, -bucket and -nats work without it")

// openURL refuses: -store is built in only with the tag cloud.
func openURL(context.Context, string, bool) (store.Store, string, string, func(), error) {
	return nil, "", "", nil, errNoCloud
}
