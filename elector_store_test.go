package s3lect

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// A program that elects with Bucket fences on the store New built from
// it: Elector.Store returns that store, so the fence's objects land where
// the election runs.
func TestStoreIsTheOneBuiltFromBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		saved := defaultstore.Get()
		defaultstore.Register(func(ctx context.Context, bucket string, pathStyle bool) (store.Store, error) { return mem, nil })
		defer defaultstore.Register(saved)
		e := newTestElector(t, ElectorConfig{Bucket: "b", LockfilePath: "leader/k", ServerID: "a"})
		if e.Store() != store.Store(mem) {
			t.Fatalf("Store() = %v; want the store built from Bucket", e.Store())
		}
		lead, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		w, err := fence.New(e.Store(), lead.Term())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Put(lead.Context(), "jobs/a", []byte("x")); err != nil {
			t.Fatalf("Put() through the elector's store = %v", err)
		}
		if _, _, err := mem.Get(t.Context(), "jobs/a"); err != nil {
			t.Errorf("the fenced write is not in the store the election runs on: %v", err)
		}
		cfgStore := memstore.New()
		e2, err := New(testConfig(cfgStore, "b"))
		if err != nil {
			t.Fatal(err)
		}
		defer e2.Close()
		if e2.Store() != store.Store(cfgStore) {
			t.Errorf("Store() = %v; want ElectorConfig.Store", e2.Store())
		}
	})
}
