package gcsstore_test

// The Go block of docs/stores.md about GCS, compiled here; internal/mdcheck
// checks that the Markdown shows it exactly. Not run: it needs a bucket.

import (
	"context"
	"log"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/gcsstore"
)

func ExampleFromEnvironment() {
	var (
		ctx context.Context
		id  string
	)
	st, err := gcsstore.FromEnvironment(ctx, "my-bucket") // or gcsstore.New(storageClient, "my-bucket")
	if err != nil {
		log.Fatal(err)
	}
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: "leader/x.json", ServerID: id})
	_, _ = e, err
}
