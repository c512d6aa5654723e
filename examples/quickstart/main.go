// Command quickstart campaigns for a lockfile in an S3 bucket and does
// the leader's work while it leads: README.md shows it whole. Run it on
// two terminals with the bucket, credentials and endpoint in the
// environment (BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION, AWS_ENDPOINT_URL_S3 for MinIO). Ctrl-C on the leader
// announces its release, then hands over: the job stops for well under a
// second (docs/measurements.md, Planned moves).
package main

import (
	"context"
	"errors"
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
	defer e.Close() // waits for the Shutdown below
	context.AfterFunc(ctx, func() {
		stop() // a second Ctrl-C stops at once
		log.Print("handing over: the followers are told first (about 30 s if leading), then one starts within a second")
		e.Shutdown(context.Background())
	})
	for {
		lead, err := e.Campaign(context.Background()) // blocks until this instance leads
		if errors.Is(err, s3lect.ErrClosed) {
			return // Ctrl-C
		}
		if err != nil {
			log.Fatal(err) // the store refused for good: a missing bucket, no credentials... (the fix is named)
		}
		log.Printf("leading, term %d", lead.Term())
		<-lead.Context().Done() // the leader's work, until the leadership may be gone
		log.Printf("leadership ended: %v", context.Cause(lead.Context()))
	}
}
