package s3lect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
)

var errInjected = errors.New("injected store failure")

// call is one store call as a faultStore saw it.
type call struct {
	op    string // "get" or "put"
	key   string
	at    time.Time
	etag  string // put: the If-Match etag; get: the etag returned
	err   error
	reply string // put: the new etag
}

// faultStore wraps a store for one node and injects faults into that
// node's calls. Its zero fault settings pass every call through.
type faultStore struct {
	inner store.Store

	mu          sync.Mutex
	blackhole   bool          // calls block until their context ends
	failAll     bool          // calls fail before reaching the store
	failNext    int           // the next n calls fail before reaching the store
	loseReplies int           // the next n successful puts report a failure
	latency     time.Duration // every call takes this long before it reaches the store
	calls       []call
}

func newFaultStore(inner store.Store) *faultStore { return &faultStore{inner: inner} }

func (f *faultStore) set(fn func(f *faultStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faultStore) record(c call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// log returns a copy of the calls seen so far.
func (f *faultStore) log() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *faultStore) count(op string) int {
	n := 0
	for _, c := range f.log() {
		if c.op == op {
			n++
		}
	}
	return n
}

// before applies the faults that act before a call reaches the store.
func (f *faultStore) before(ctx context.Context) error {
	f.mu.Lock()
	hole, latency := f.blackhole, f.latency
	fail := f.failAll || f.failNext > 0
	if f.failNext > 0 {
		f.failNext--
	}
	f.mu.Unlock()
	if hole {
		<-ctx.Done()
		return ctx.Err()
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errInjected
	}
	return nil
}

func (f *faultStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	at := time.Now()
	if err := f.before(ctx); err != nil {
		f.record(call{op: "get", key: key, at: at, err: err})
		return nil, "", fmt.Errorf("faultstore: get: %w", err)
	}
	data, etag, err := f.inner.Get(ctx, key)
	f.record(call{op: "get", key: key, at: at, etag: etag, err: err})
	return data, etag, err
}

func (f *faultStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	at := time.Now()
	if err := f.before(ctx); err != nil {
		f.record(call{op: "put", key: key, at: at, etag: etag, err: err})
		return "", fmt.Errorf("faultstore: put: %w", err)
	}
	tag, err := f.inner.PutIfMatch(ctx, key, data, etag)
	f.mu.Lock()
	lose := err == nil && f.loseReplies > 0
	if lose {
		f.loseReplies--
		err = errInjected
	}
	f.mu.Unlock()
	f.record(call{op: "put", key: key, at: at, etag: etag, err: err, reply: tag})
	if lose {
		return "", fmt.Errorf("faultstore: put: reply lost: %w", err)
	}
	return tag, err
}
