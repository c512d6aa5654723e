package storeurl_test

// The Go block of docs/stores.md about storeurl, compiled here;
// internal/mdcheck checks that the Markdown shows it exactly. Not run: it
// needs a bucket.

import (
	"context"
	"log"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/storeurl"
)

func ExampleOpen() {
	var (
		ctx context.Context
		id  string
	)
	lf, err := storeurl.Open(ctx, "gs://my-bucket/leader/x.json", storeurl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer lf.Close()
	e, err := s3lect.New(s3lect.ElectorConfig{Store: lf.Store, LockfilePath: lf.Key, ServerID: id})
	_, _ = e, err
}
