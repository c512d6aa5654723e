package pool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestResignInsideWorkReturnsAtOnce: a pool's shard leadership has no
// lockfile to release, and the executor marks it exited only after Work
// has returned; Resign called inside Work must not wait for that. It
// ends the leadership (its context, with ErrResigned) and returns nil at
// once; Work then returns, the worker gives the shard up (W5), and Run
// still returns when its context ends.
//
// Schedule (synctest; one worker, one shard, FrequentInterval 1 s,
// LeaderTimeout 3 s): Work waits 2 s after it starts, then calls
// lead.Resign with a 60 s timeout and returns. (Before the rule, Resign
// returned context.DeadlineExceeded after 60 s, and with
// context.Background() neither Resign nor Run returned.)
func TestResignInsideWorkReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type result struct {
			took time.Duration
			err  error
		}
		res := make(chan result, 1)
		p, err := New(Config{Store: memstore.New(), Prefix: "pools/t/", ID: "w0", Shards: []string{"shard-000"},
			FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {
				select {
				case <-time.After(2 * time.Second):
				case <-ctx.Done():
					return
				}
				rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				err := lead.Resign(rctx)
				if cause := context.Cause(ctx); !errors.Is(cause, s3lect.ErrResigned) {
					t.Errorf("after Resign, the leadership's context ends with %v; want ErrResigned", cause)
				}
				select {
				case res <- result{time.Since(start), err}:
				default:
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		r := <-res
		stop()
		if err := <-errc; err != nil {
			t.Errorf("Run() = %v", err)
		}
		if r.err != nil || r.took > time.Second {
			t.Errorf("lead.Resign inside Work returned %v after %v; want nil at once (a pool's shard has no release to write)", r.err, r.took)
		}
	})
}
