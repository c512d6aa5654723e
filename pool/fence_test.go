package pool_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestShardWorkFencesWithShardTerm: a shard's Work writes its checkpoint
// through a fence.Writer of the shard leadership's Term. Worker a is cut
// off the store; b takes the shard over and seals the checkpoint with its
// higher term; a's writer, resumed as a paused process would be, is
// refused with ErrFenced and the checkpoint keeps b's term.
func TestShardWorkFencesWithShardTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		const key = "pools/fenced/checkpoints/shard-0"
		var (
			mu      sync.Mutex
			writers = map[string]*fence.Writer{} // the last writer of each worker
			sealed  = make(chan uint64, 1)
		)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		links := map[string]*faultstore.Store{}
		var wg sync.WaitGroup
		for _, id := range []string{"a", "b"} {
			link := faultstore.New(mem)
			links[id] = link
			p, err := pool.New(pool.Config{
				Store: link, Prefix: "pools/fenced/", ID: id, Shards: []string{"shard-0"},
				FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {
					w, err := fence.New(link, lead.Term())
					if err != nil {
						t.Errorf("fence.New() error = %v", err)
						return
					}
					mu.Lock()
					writers[id] = w
					mu.Unlock()
					if err := w.Seal(ctx, key); err != nil {
						return // a's call, cut off
					}
					if id == "b" {
						sealed <- lead.Term()
					}
					for n := 0; ctx.Err() == nil; n++ {
						_ = w.Put(ctx, key, fmt.Appendf(nil, "%s offset %d", id, n))
						select {
						case <-ctx.Done():
						case <-time.After(500 * time.Millisecond):
						}
					}
				},
			})
			if err != nil {
				t.Fatalf("pool.New(%s) error = %v", id, err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); _ = p.Run(ctx) }()
			if id == "a" {
				time.Sleep(5 * time.Second) // a leads the shard first
			}
		}
		mu.Lock()
		stale := writers["a"]
		mu.Unlock()
		if stale == nil {
			t.Fatal("worker a never led the shard")
		}
		links["a"].Cut()
		bTerm := <-sealed
		if bTerm <= stale.Term() {
			t.Fatalf("b's shard term %d; want above a's %d", bTerm, stale.Term())
		}
		links["a"].Restore()
		err := stale.Put(context.Background(), key, []byte("a, resumed"))
		if !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("the stale worker's Put() error = %v; want ErrFenced", err)
		}
		if _, term, err := fence.Read(context.Background(), mem, key); err != nil || term < bTerm {
			t.Fatalf("checkpoint term %d (%v); want b's %d or higher", term, err, bTerm)
		}
		cancel()
		wg.Wait()
	})
}
