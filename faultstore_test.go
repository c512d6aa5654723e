package s3lect

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// errInjected is what a call failed by failAll returns (wrapped).
var errInjected = faultstore.ErrInjected

// call is one store call as a faultStore saw it.
type call struct {
	op    string // "get" or "put"
	key   string
	at    time.Time
	etag  string // put: the If-Match etag; get: the etag returned
	err   error
	reply string // put: the new etag
}

// faultStore is one node's store in this package's tests. The faults come
// from package faultstore, the one fault-injecting store; this wrapper
// adds a latency before every call and keeps a log of the calls, for
// tests that check which calls an elector made. Its zero settings pass
// every call through.
type faultStore struct {
	inner  store.Store // the store behind the faults, for tests that bypass them
	faults *faultstore.Store

	mu          sync.Mutex
	blackhole   bool          // calls block until their context ends (faultstore's Stall)
	failAll     bool          // calls fail before reaching the store, with errInjected
	loseReplies int           // the next n successful puts report a failure (faultstore's LoseReplies)
	latency     time.Duration // every call takes this long before it reaches the store
	failing     bool          // failAll as last applied
	calls       []call
}

func newFaultStore(inner store.Store) *faultStore {
	return &faultStore{inner: inner, faults: faultstore.New(inner)}
}

// set changes the settings with fn and applies them to the faults.
func (f *faultStore) set(fn func(f *faultStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
	if f.blackhole {
		f.faults.Stall()
	} else {
		f.faults.Unstall()
	}
	if f.failAll != f.failing {
		f.failing = f.failAll
		n := 0
		if f.failAll {
			n = math.MaxInt
		}
		f.faults.FailNext(n)
	}
	if f.loseReplies > 0 {
		f.faults.LoseReplies(f.loseReplies)
		f.loseReplies = 0
	}
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

// delay waits out the latency, or ctx.
func (f *faultStore) delay(ctx context.Context) error {
	f.mu.Lock()
	latency := f.latency
	f.mu.Unlock()
	if latency <= 0 {
		return nil
	}
	t := time.NewTimer(latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faultStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	at := time.Now()
	if err := f.delay(ctx); err != nil {
		f.record(call{op: "get", key: key, at: at, err: err})
		return nil, "", err
	}
	data, etag, err := f.faults.Get(ctx, key)
	f.record(call{op: "get", key: key, at: at, etag: etag, err: err})
	return data, etag, err
}

func (f *faultStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	at := time.Now()
	if err := f.delay(ctx); err != nil {
		f.record(call{op: "put", key: key, at: at, etag: etag, err: err})
		return "", err
	}
	tag, err := f.faults.PutIfMatch(ctx, key, data, etag)
	f.record(call{op: "put", key: key, at: at, etag: etag, err: err, reply: tag})
	return tag, err
}
