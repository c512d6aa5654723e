package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
)

// The pool's store calls are the election's (internal/lease): the same
// retry schedule, each attempt with a timeout of FrequentInterval, a retry
// that reads first, adopts the object when it holds exactly the bytes
// being written (an earlier attempt landed) and is refused as a lost
// precondition when the object no longer shows what the write goes over
// (docs/protocol.md, section 2). Here they get the pool's error prefix.

// get reads key; an absent object is etag "" and no error.
func (p *Pool) get(ctx context.Context, key string) (data []byte, etag string, err error) {
	data, etag, err = p.calls.Get(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("pool: read %q: %w", key, err)
	}
	return data, etag, nil
}

// put writes data over the object key holds, named by etag ("" to
// create) with the SHA-256 over, and returns its new ETag. With a
// non-zero notAfter, no attempt is sent once the local clock reaches it
// (errLate).
func (p *Pool) put(ctx context.Context, key string, data []byte, etag string, over [32]byte, notAfter time.Time) (string, error) {
	var seen lease.Sighting
	if etag != "" {
		seen = lease.Sighting{ETag: etag, Sum: over}
	}
	tag, _, err := p.calls.Put(ctx, key, data, seen, notAfter)
	if err != nil {
		return "", fmt.Errorf("pool: write %q: %w", key, err)
	}
	return tag, nil
}

// errLate is a write not sent because the lease it needs had ended.
var errLate = lease.ErrLate
