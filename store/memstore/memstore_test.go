package memstore_test

import (
	"testing"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New() })
}

func TestListGivesKeysUnderPrefixWithGetsETag(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	s.Set("p/b", []byte("2"))
	s.Set("p/a", []byte("1"))
	s.Set("q/a", []byte("3"))
	got, err := s.List(ctx, "p/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "p/a" || got[1].Key != "p/b" {
		t.Fatalf("List(p/) = %v, want p/a and p/b in order", got)
	}
	for _, e := range got {
		_, etag, err := s.Get(ctx, e.Key)
		if err != nil || etag != e.ETag {
			t.Errorf("%s: listed ETag %s, Get gives %s (%v)", e.Key, e.ETag, etag, err)
		}
	}
	if none, err := s.List(ctx, "r/"); err != nil || len(none) != 0 {
		t.Errorf("List(r/) = %v, %v; want empty, no error", none, err)
	}
}
