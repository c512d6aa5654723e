package pool_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store/s3store"
)

// A worker of a pool over 1,000 shards: run it on every pod with the same
// Prefix and shard names. It keeps one session object alive for all the
// shards the coordinator assigns it, and on SIGTERM hands them over (each
// shard's work is cancelled and waited for, then its session closed).
func Example() {
	// Every worker elects on the same bucket; AWS_ENDPOINT_URL_S3 and
	// the credentials come from the environment.
	st, err := s3store.FromEnvironment(context.Background(), os.Getenv("BUCKET"), false)
	if err != nil {
		log.Fatal(err)
	}
	var shards []string
	for i := range 1000 {
		shards = append(shards, fmt.Sprintf("shard-%04d", i))
	}
	p, err := pool.New(pool.Config{
		Store:  st,
		Prefix: "pools/ingest/",
		ID:     os.Getenv("POD_NAME"),
		Shards: shards,
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {
			// Process the shard until ctx ends; pass lead.Term() to
			// whatever must refuse a stale owner.
			<-ctx.Done()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx); err != nil {
		log.Fatal(err) // nil after SIGTERM; an error is the store's refusal, with the fix named
	}
}
