package s3store_test

// The Go blocks of docs/stores.md about S3, compiled here; internal/mdcheck
// checks that the Markdown shows them exactly. Not run: they need a bucket.

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/s3store"
)

func ExampleNew() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx) // AWS_* variables, ~/.aws, instance roles
	if err != nil {
		log.Fatal(err)
	}
	if err := s3store.CheckCredentials(ctx, awsCfg); err != nil {
		log.Fatal(err) // none found: the message names the variables to set
	}
	st := s3store.New(s3.NewFromConfig(awsCfg), "my-bucket")
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: "leader/x.json", ServerID: "web-1"})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
}

func ExampleFromEnvironment() {
	var id string
	e, err := s3lect.New(s3lect.ElectorConfig{Bucket: "my-bucket", S3PathStyle: true /* MinIO */, LockfilePath: "leader/x.json", ServerID: id})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
}

func ExampleWithHeader() {
	var client *s3.Client
	st := s3store.New(client, "my-bucket", s3store.WithHeader("X-Tigris-Consistent", "true"))
	_ = st
}
