// Package store defines the storage contract that s3lect elects leaders on.
//
// A Store needs exactly two operations: read an object together with an
// opaque version tag (the ETag), and write an object on the condition that
// its current version tag is the one the caller names. Any backend with
// create-if-absent and compare-and-swap fits: S3 and the stores compatible
// with it (subpackage s3store), NATS JetStream key-value buckets, and the
// in-memory map in subpackage memstore.
//
// The conformance suite in subpackage storetest checks a backend against
// this contract.
package store

import (
	"context"
	"errors"
)

// MaxObjectSize is the largest object an election needs to read. A backend
// may stop reading an object after MaxObjectSize+1 bytes and return what it
// has read; callers treat such a truncated object as unreadable content,
// never as a valid record.
const MaxObjectSize = 64 << 10

var (
	// ErrNotFound is returned by Get when the key does not exist.
	ErrNotFound = errors.New("store: object not found")

	// ErrPreconditionFailed is returned by PutIfMatch when its condition
	// does not hold: the object exists although the caller asked to create
	// it, or its current ETag differs from the one the caller named, or it
	// does not exist although the caller named an ETag.
	ErrPreconditionFailed = errors.New("store: precondition failed")

	// ErrNoConditionalWrites is wrapped by the permanent error a backend
	// returns when its check before the first write finds that the store
	// ignores conditional writes (a second create succeeds, or a replace
	// naming a wrong ETag does, or one naming the right ETag is refused):
	// electing on it would be unsafe. The error says which backend, where
	// and what was seen.
	ErrNoConditionalWrites = errors.New("store: conditional writes are not honoured; electing on this store would be unsafe")
)

// Store is a key-value store with conditional writes.
//
// Implementations must be safe for concurrent use. Both methods must honour
// ctx: when it ends they return promptly with an error that wraps ctx.Err()
// (the write itself may or may not have taken effect, as with any remote
// call that is abandoned).
//
// Errors other than ErrNotFound and ErrPreconditionFailed are failures: the
// caller may retry them. A backend that knows a failure is permanent (a
// missing bucket, denied access) wraps it with [Permanent] so that callers
// report it instead of retrying.
type Store interface {
	// Get returns the object's content and its current ETag, or an error
	// wrapping ErrNotFound when there is no object at key.
	Get(ctx context.Context, key string) (data []byte, etag string, err error)

	// PutIfMatch writes data at key and returns the new ETag.
	//
	// With etag == "" the write creates the object only if it is absent
	// (If-None-Match: *). With etag != "" it replaces the object only if the
	// object's current ETag equals etag (If-Match). When the condition does
	// not hold, nothing is written and the error wraps
	// ErrPreconditionFailed.
	//
	// Two writes of different content must never yield the same ETag for
	// the same key; content hashes (as S3 uses) and revision numbers (as
	// NATS uses) both qualify, since s3lect never writes the same bytes
	// twice.
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) (newETag string, err error)
}

// Sighter is implemented by stores whose reads tell one write from
// another even when both wrote the same bytes. On S3 and the stores like
// it an ETag is a hash of the content, so an object put back to bytes it
// held before (an operator's restore of an old version, a backup sync)
// has its old ETag again, and a reader that compared ETags and bytes
// would take the restore for "unchanged since". A follower uses the token
// to see every write (docs/protocol.md, 2.1).
//
// A backend implements it only where its token changes on every write,
// restores of earlier bytes included; the conformance suite
// (storetest) checks that a write of exact earlier bytes changes it. A
// backend whose store gives no such token leaves it out, and its docs
// state the limit (docs/stores.md).
type Sighter interface {
	// GetSighting is Get, plus a token that differs from every token an
	// earlier write of key was read with: a version ID, a generation, a
	// write time of fine enough resolution. "" means this read has none
	// (the follower then falls back to ETag and bytes).
	GetSighting(ctx context.Context, key string) (data []byte, etag, token string, err error)
}

// Lister is implemented by stores that can list the keys under a prefix,
// with each object's current ETag, in one request per page. Package pool
// uses it to watch every worker's session with one request per interval
// instead of one read per worker; on a store without it, the pool reads
// each session object.
//
// A listing is a hint, never a decision: it may lag behind writes on some
// stores, so a caller that acts on an ETag it listed first reads the
// object. The ETag of an entry must be the one Get returns for the same
// version of the object.
type Lister interface {
	// List returns the objects whose keys begin with prefix, in
	// lexicographic order of their keys. A prefix with no object under it
	// gives an empty list and no error.
	List(ctx context.Context, prefix string) ([]Entry, error)
}

// Entry is one object in a listing.
type Entry struct {
	Key  string
	ETag string
}

// PermanentError marks a store failure that retrying will not fix, such as
// a missing bucket, denied access or a store that ignores conditional
// writes. Its message says what to fix.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError. It returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a PermanentError.
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}
