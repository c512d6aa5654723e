// Command quickstart campaigns for a lockfile in an S3 bucket and does
// the leader's work while it leads: README.md shows it whole. Run it on
// two terminals with the bucket, credentials and endpoint in the
// environment (BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION, AWS_ENDPOINT_URL_S3 for MinIO); Ctrl-C hands over at once.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/s3lect/s3lect"
	_ "github.com/s3lect/s3lect/store/s3store" // lets Bucket build the S3 store
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	host, _ := os.Hostname()
	e, err := s3lect.New(s3lect.ElectorConfig{
		Bucket:       os.Getenv("BUCKET"), // credentials, region, endpoint: the AWS environment
		LockfilePath: "leader/quickstart.json",
		ServerID:     fmt.Sprintf("%s-%d", host, os.Getpid()), // unique in the group
	})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close() // releases the lockfile if leading, so a follower takes over at once
	for {
		lead, err := e.Campaign(ctx) // blocks until this instance leads
		if ctx.Err() != nil {
			return // Ctrl-C: Close hands the lockfile over
		}
		if err != nil {
			log.Fatal(err) // the store refused for good: a missing bucket, no credentials... (the fix is named)
		}
		log.Printf("leading, term %d", lead.Term())
		<-lead.Context().Done() // the leader's work, until the leadership may be gone
		log.Printf("leadership ended: %v", context.Cause(lead.Context()))
	}
}
