package faultstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/storetest"
)

const key = "leader.json"

// counting counts the calls that reach the wrapped store.
type counting struct {
	store.Store
	calls int
}

func (c *counting) Get(ctx context.Context, k string) ([]byte, string, error) {
	c.calls++
	return c.Store.Get(ctx, k)
}

func (c *counting) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.calls++
	return c.Store.(store.Lister).List(ctx, prefix)
}

func (c *counting) PutIfMatch(ctx context.Context, k string, data []byte, etag string) (string, error) {
	c.calls++
	return c.Store.PutIfMatch(ctx, k, data, etag)
}

// blocking holds every call until its context ends.
type blocking struct{ entered chan struct{} }

func (b blocking) Get(ctx context.Context, _ string) ([]byte, string, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return nil, "", ctx.Err()
}

func (b blocking) List(ctx context.Context, _ string) ([]store.Entry, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (b blocking) PutIfMatch(ctx context.Context, _ string, _ []byte, _ string) (string, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return "", ctx.Err()
}

func TestPassesThrough(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New())
	etag, err := fs.PutIfMatch(ctx, key, []byte("a"), "")
	if err != nil {
		t.Fatalf("PutIfMatch() = %v; want nil", err)
	}
	if _, err := fs.PutIfMatch(ctx, key, []byte("b"), ""); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("second create = %v; want ErrPreconditionFailed", err)
	}
	data, got, err := fs.Get(ctx, key)
	if err != nil || got != etag || string(data) != "a" {
		t.Errorf("Get() = %q, %q, %v; want \"a\", %q, nil", data, got, err, etag)
	}
}

func TestCut(t *testing.T) {
	ctx := context.Background()
	inner := &counting{Store: memstore.New()}
	fs := faultstore.New(inner)
	fs.Cut()
	if !fs.IsCut() {
		t.Error("IsCut() = false after Cut")
	}
	if _, _, err := fs.Get(ctx, key); !errors.Is(err, faultstore.ErrCut) {
		t.Errorf("Get() after Cut = %v; want ErrCut", err)
	}
	if _, err := fs.PutIfMatch(ctx, key, []byte("a"), ""); !errors.Is(err, faultstore.ErrCut) {
		t.Errorf("PutIfMatch() after Cut = %v; want ErrCut", err)
	}
	if _, err := fs.List(ctx, ""); !errors.Is(err, faultstore.ErrCut) {
		t.Errorf("List() after Cut = %v; want ErrCut", err)
	}
	if inner.calls != 0 {
		t.Errorf("a cut store passed %d calls on; want 0", inner.calls)
	}
	fs.Restore()
	if _, err := fs.PutIfMatch(ctx, key, []byte("a"), ""); err != nil {
		t.Errorf("PutIfMatch() after Restore = %v; want nil", err)
	}
}

func TestCutAbandonsCallsInFlight(t *testing.T) {
	for _, op := range []string{"get", "put", "list"} {
		t.Run(op, func(t *testing.T) {
			b := blocking{entered: make(chan struct{})}
			fs := faultstore.New(b)
			errc := make(chan error, 1)
			go func() {
				var err error
				switch op {
				case "get":
					_, _, err = fs.Get(context.Background(), key)
				case "put":
					_, err = fs.PutIfMatch(context.Background(), key, []byte("a"), "")
				default:
					_, err = fs.List(context.Background(), "")
				}
				errc <- err
			}()
			<-b.entered
			fs.Cut()
			if err := <-errc; !errors.Is(err, faultstore.ErrCut) {
				t.Errorf("%s in flight at Cut = %v; want ErrCut", op, err)
			}
		})
	}
}

func TestCutDropsTheReplyOfAWriteThatLanded(t *testing.T) {
	// The write reaches the store, then the process dies before reading
	// the reply: the caller sees ErrCut, the store holds the write.
	mem := memstore.New()
	var fs *faultstore.Store
	fs = faultstore.New(cutAfter{Store: mem, cut: func() { fs.Cut() }})
	if _, err := fs.PutIfMatch(context.Background(), key, []byte("landed"), ""); !errors.Is(err, faultstore.ErrCut) {
		t.Errorf("PutIfMatch() cut after landing = %v; want ErrCut", err)
	}
	if data, _, err := mem.Get(context.Background(), key); err != nil || string(data) != "landed" {
		t.Errorf("store holds %q, %v; want \"landed\", nil", data, err)
	}
}

// cutAfter runs cut after every write it passes on.
type cutAfter struct {
	store.Store
	cut func()
}

func (c cutAfter) PutIfMatch(ctx context.Context, k string, data []byte, etag string) (string, error) {
	defer c.cut()
	return c.Store.PutIfMatch(ctx, k, data, etag)
}

func TestStallUntilTheCallerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &counting{Store: memstore.New()}
		fs := faultstore.New(inner)
		fs.Stall()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, _, err := fs.Get(ctx, key)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("stalled Get() = %v; want context.DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("stalled Get() returned after %v; want 3s, the caller's deadline", waited)
		}
		lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer lcancel()
		if _, err := fs.List(lctx, ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("stalled List() = %v; want context.DeadlineExceeded", err)
		}
		if inner.calls != 0 {
			t.Errorf("a stalled store passed %d calls on; want 0", inner.calls)
		}

		// Unstall releases a waiting call; Cut fails one.
		errc := make(chan error, 2)
		go func() { _, err := fs.PutIfMatch(context.Background(), key, []byte("a"), ""); errc <- err }()
		synctest.Wait()
		fs.Unstall()
		if err := <-errc; err != nil {
			t.Errorf("PutIfMatch() released by Unstall = %v; want nil", err)
		}
		fs.Stall()
		go func() { _, _, err := fs.Get(context.Background(), key); errc <- err }()
		synctest.Wait()
		fs.Cut()
		if err := <-errc; !errors.Is(err, faultstore.ErrCut) {
			t.Errorf("stalled Get() at Cut = %v; want ErrCut", err)
		}
	})
}

func TestFailNext(t *testing.T) {
	ctx := context.Background()
	inner := &counting{Store: memstore.New()}
	fs := faultstore.New(inner)
	fs.FailNext(3)
	if _, _, err := fs.Get(ctx, key); !errors.Is(err, faultstore.ErrInjected) {
		t.Errorf("first Get() = %v; want ErrInjected", err)
	}
	if _, err := fs.List(ctx, ""); !errors.Is(err, faultstore.ErrInjected) {
		t.Errorf("second call, a List() = %v; want ErrInjected", err)
	}
	if _, err := fs.PutIfMatch(ctx, key, []byte("a"), ""); !errors.Is(err, faultstore.ErrInjected) {
		t.Errorf("third call = %v; want ErrInjected", err)
	}
	if inner.calls != 0 {
		t.Errorf("failed calls reached the store %d times; want 0", inner.calls)
	}
	etag, err := fs.PutIfMatch(ctx, key, []byte("a"), "")
	if err != nil {
		t.Errorf("fourth call = %v; want nil", err)
	}
	if got, err := fs.List(ctx, ""); err != nil || len(got) != 1 || got[0] != (store.Entry{Key: key, ETag: etag}) {
		t.Errorf("fifth call, a List() = %v, %v; want the one object", got, err)
	}
	if inner.calls != 2 {
		t.Errorf("%d calls reached the store; want 2 (the fourth and fifth)", inner.calls)
	}
	if err := errors.Join(faultstore.ErrInjected, faultstore.ErrCut, faultstore.ErrReplyLost); store.IsPermanent(err) {
		t.Error("an injected failure is permanent; want one an elector retries")
	}
}

func TestLoseReplies(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	fs := faultstore.New(mem)
	fs.LoseReplies(1)
	// A refused write keeps its own error and does not use up the count.
	if _, err := fs.PutIfMatch(ctx, key, []byte("x"), "no-such-etag"); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("refused write = %v; want ErrPreconditionFailed", err)
	}
	if _, err := fs.PutIfMatch(ctx, key, []byte("landed"), ""); !errors.Is(err, faultstore.ErrReplyLost) {
		t.Errorf("write with a lost reply = %v; want ErrReplyLost", err)
	}
	data, etag, err := mem.Get(ctx, key)
	if err != nil || !bytes.Equal(data, []byte("landed")) {
		t.Fatalf("store holds %q, %v; want the write whose reply was lost", data, err)
	}
	if _, err := fs.PutIfMatch(ctx, key, []byte("next"), etag); err != nil {
		t.Errorf("next write = %v; want nil (one reply lost)", err)
	}
}

// With no fault set, the wrapper keeps the storage contract of the store
// it wraps.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return faultstore.New(memstore.New()) })
}

// A Store always has List; on a wrapped store that does not list, List
// says so, permanently, and the store is not called.
func TestListOnAStoreThatDoesNotList(t *testing.T) {
	fs := faultstore.New(struct{ store.Store }{memstore.New()})
	_, err := fs.List(context.Background(), "")
	if !errors.Is(err, faultstore.ErrNoList) || !errors.Is(err, errors.ErrUnsupported) || !store.IsPermanent(err) {
		t.Errorf("List() over a store without List = %v; want a permanent ErrNoList", err)
	}
}
