package pool

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestRunWaitsForTheStoreToCheckForTheOldPool: a worker started while
// its store does not answer (a slow or unreachable store: its listing
// for the old pool's objects fails) says so and tries again, and joins
// the pool once the store answers, instead of Run returning at once. A
// Run whose context ends first returns the store's error.
func TestRunWaitsForTheStoreToCheckForTheOldPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		fs := faultstore.New(memstore.New())
		fs.Cut()
		led := make(chan struct{}, 1)
		p, err := New(Config{Store: fs, Prefix: "pools/t/", ID: "w0", Shards: []string{"a"},
			FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {
				select {
				case led <- struct{}{}:
				default:
				}
				<-ctx.Done()
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		time.Sleep(10 * time.Second)
		select {
		case err := <-errc:
			t.Fatalf("Run() = %v while the store was away; want it to wait for the store", err)
		default:
		}
		if n := strings.Count(logs.String(), "cannot check the store for the old pool's objects"); n < 3 {
			t.Errorf("the warning was logged %d times in 10 s of a store away; want one each try. Logs:\n%s", n, logs.String())
		}
		fs.Restore()
		select {
		case <-led:
		case <-time.After(time.Minute):
			t.Error("shard a not led within a minute of the store coming back")
		}
		stop()
		if err := <-errc; err != nil {
			t.Errorf("Run() = %v", err)
		}

		fs.Cut()
		p2, err := New(Config{Store: fs, Prefix: "pools/u/", ID: "w0", Shards: []string{"a"}, FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second,
			Logger: quiet, Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
		if err != nil {
			t.Fatal(err)
		}
		ctx2, stop2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop2()
		if err := p2.Run(ctx2); err == nil || !strings.Contains(err.Error(), "before the store answered") {
			t.Errorf("Run() with its context ended while the store was away = %v; want the store's error", err)
		}
	})
}
