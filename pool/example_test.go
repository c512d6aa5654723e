package pool_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store"
)

// A worker of a pool over 16 shards: run it on every pod with the same
// shard names. It leads its share of the shards, serves a liveness probe
// over all its electors, and releases its shards on SIGTERM.
func Example() {
	var st store.Store // s3store.New(...), shared by every shard
	var shards []string
	for i := range 16 {
		shards = append(shards, fmt.Sprintf("shard-%02d", i))
	}
	p, err := pool.New(pool.Config{
		Shards: shards,
		Elector: func(shard string) s3lect.ElectorConfig {
			return s3lect.ElectorConfig{Store: st, LockfilePath: "shards/" + shard + ".json", ServerID: os.Getenv("POD_NAME")}
		},
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {
			<-ctx.Done() // process the shard until the leadership ends
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/healthz", s3lect.HealthHandler(p.Electors()...))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx); err != nil {
		log.Print(err)
	}
}
