package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// sightingGap is how long the case waits between a write and the restore
// of its bytes: more than the one-second resolution of Last-Modified,
// the token of an unversioned S3 bucket (store.Sighter, docs/stores.md).
const sightingGap = 1100 * time.Millisecond

// testSightingChangesOnRestore: a store.Sighter's token changes on every
// write, a write of exact earlier bytes included (an operator's restore),
// although the ETag may not (S3's is a hash of the bytes).
func testSightingChangesOnRestore(t *testing.T, s store.Store, sg store.Sighter, key string) {
	ctx := t.Context()
	a, b := []byte(`{"leaderID":"a","v":1}`), []byte(`{"leaderID":"b","v":2}`)
	etag, err := s.PutIfMatch(ctx, key, a, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	data, etagA, tokenA, err := sg.GetSighting(ctx, key)
	if err != nil || !bytes.Equal(data, a) || etagA != etag {
		t.Fatalf("GetSighting() = %q, %q, %v; want %q under %q", data, etagA, err, a, etag)
	}
	if tokenA == "" {
		t.Fatalf("GetSighting() token = \"\"; a store.Sighter must give a token")
	}
	time.Sleep(sightingGap)
	if etag, err = s.PutIfMatch(ctx, key, b, etag); err != nil {
		t.Fatalf("replace: %v", err)
	}
	time.Sleep(sightingGap)
	if _, err = s.PutIfMatch(ctx, key, a, etag); err != nil { // the restore: exact earlier bytes
		t.Fatalf("restore: %v", err)
	}
	data, etagR, tokenR, err := sg.GetSighting(ctx, key)
	if err != nil || !bytes.Equal(data, a) {
		t.Fatalf("GetSighting() after the restore = %q, %v; want %q", data, err, a)
	}
	if tokenR == tokenA {
		t.Errorf("GetSighting() token after a restore of exact earlier bytes = %q, the same as before (ETag %q then, %q now); want a new one", tokenR, etagA, etagR)
	}
	if _, etagG, err := s.Get(ctx, key); err != nil || etagG != etagR {
		t.Errorf("Get() ETag = %q, %v; want GetSighting's %q", etagG, err, etagR)
	}
}
