package pool

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// unquotingLister lists ETags without the quotes Get returns them in
// (memstore's are quoted, as S3's): a gateway in front of a bucket that
// departs from store.Lister's contract.
type unquotingLister struct{ *memstore.Store }

func (q unquotingLister) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	es, err := q.Store.List(ctx, prefix)
	for i := range es {
		es[i].ETag = strings.Trim(es[i].ETag, `"`)
	}
	return es, err
}

// syncBuffer is a log destination that the pool's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStoreListingETagsInAnotherFormIsLoggedOnce: a worker that
// coordinates a pool whose store lists ETags in another form than it
// reads them logs that once, naming both forms, and its shard is led (the
// coordinator compares the forms as one).
func TestStoreListingETagsInAnotherFormIsLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		led := make(chan struct{}, 1)
		p, err := New(Config{Store: unquotingLister{memstore.New()}, Prefix: "pools/t/", ID: "w0", Shards: []string{"a"},
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
		select {
		case <-led:
		case <-time.After(time.Minute):
			t.Error("shard a not led within a minute")
		}
		time.Sleep(20 * time.Second)
		stop()
		if err := <-errc; err != nil {
			t.Errorf("Run() = %v", err)
		}
		if n := strings.Count(logs.String(), "lists ETags in another form"); n != 1 {
			t.Errorf("the warning was logged %d times; want once. Logs:\n%s", n, logs.String())
		}
	})
}
