package azblobstore_test

// The Go block of docs/stores.md about Azure, compiled here;
// internal/mdcheck checks that the Markdown shows it exactly. Not run: it
// needs a container.

import (
	"context"
	"log"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/azblobstore"
)

func ExampleFromEnvironment() {
	var (
		ctx context.Context
		id  string
	)
	st, err := azblobstore.FromEnvironment(ctx, "elections") // or azblobstore.New(containerClient)
	if err != nil {
		log.Fatal(err)
	}
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: "leader/x.json", ServerID: id})
	_, _ = e, err
}
