// Package condcheck is the check a backend runs before its first write:
// that the store honours conditional writes at all. A store that ignored
// them would let two candidates both "win" a create, and electing on it
// would be unsafe, so a backend refuses to write until the check passes.
//
// The check works on a probe object next to the lockfile (the lockfile's
// key with ".s3lect-probe" appended): a second create of it must be
// refused, a replace naming an ETag it does not have must be refused, and
// a replace naming its current ETag must succeed. The S3 backend has its
// own version, which also learns whether the store wants ETags quoted.
package condcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
)

// ProbeSuffix is appended to the lockfile's key to name the probe object.
const ProbeSuffix = ".s3lect-probe"

// ProbeKey names the probe for a store whose first write is to key: key
// with ProbeSuffix appended, except for s3lect's term claims
// ("<lockfile>.term." and 20 digits, a takeover's first write), whose
// probe is the term object's, "<lockfile>.term.s3lect-probe": one probe
// per lockfile, whichever term an elector first claims, and a key no
// longer than the claims'.
func ProbeKey(key string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 && strings.HasSuffix(key[:i], ".term") && len(key)-i-1 == 20 &&
		strings.Trim(key[i+1:], "0123456789") == "" {
		return key[:i] + ProbeSuffix
	}
	return key + ProbeSuffix
}

// Ops are a backend's own calls, without the check in front of them.
type Ops interface {
	Get(ctx context.Context, key string) ([]byte, string, error)
	Put(ctx context.Context, key string, data []byte, etag string) (string, error)
}

// Check runs the conditional-write check once per backend value. A
// verdict that the store ignores conditional writes (wrapping Unsafe) is
// remembered for good. Any other permanent failure (AccessDenied: an IAM
// policy that was briefly wrong) is remembered only for a backoff, which
// starts at DenialBackoff and doubles up to MaxDenialBackoff: until it
// passes, Before returns that error without calling the store, so that it
// stays visible to the caller; then the check runs again. The zero value
// is not usable: set its fields. It is safe for concurrent use.
type Check struct {
	// Where names an object for messages, such as gs://bucket/key.
	Where func(key string) string
	// WrongETag is an ETag no object of the store carries.
	WrongETag string
	// Unsafe is wrapped by the permanent error of a failed check.
	Unsafe error

	run     sync.Mutex // one check at a time
	mu      sync.Mutex
	passed  bool
	verdict error     // the store ignores conditional writes, once known
	denied  error     // another permanent failure, remembered until retryAt
	retryAt time.Time // when the check runs again after denied
	denials int       // permanent failures in a row, for the backoff
}

// The backoff after a permanent failure that is not a verdict on the
// store (AccessDenied): the first re-check after DenialBackoff, each
// further one twice as late, at most MaxDenialBackoff.
const (
	DenialBackoff    = 5 * time.Second
	MaxDenialBackoff = 5 * time.Minute
)

// remembered returns what Before answers without running the check: nil
// after a pass, the verdict, or a denial whose backoff has not passed; ok
// is false when the check must run.
func (c *Check) remembered() (err error, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.passed:
		return nil, true
	case c.verdict != nil:
		return c.verdict, true
	case c.denied != nil && time.Now().Before(c.retryAt):
		return c.denied, true
	}
	return nil, false
}

// attempts bounds the rounds of the replace check that other writers of
// the probe (other members checking at the same time) may spoil.
const attempts = 5

// Before is called before every write to key. It returns nil at once
// after a pass, the verdict once the store is known to ignore conditional
// writes, another permanent failure while its backoff runs, and otherwise
// runs the check on key's probe. A transient failure is not remembered:
// the next write runs the check again.
func (c *Check) Before(ctx context.Context, ops Ops, key string) error {
	if err, ok := c.remembered(); ok {
		return err
	}
	c.run.Lock()
	defer c.run.Unlock()
	if err, ok := c.remembered(); ok {
		return err
	}
	err := c.probe(ctx, ops, ProbeKey(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.passed, c.denied, c.denials = true, nil, 0
	case errors.Is(err, c.Unsafe):
		c.verdict = err
	case store.IsPermanent(err):
		backoff := min(DenialBackoff<<min(c.denials, 16), MaxDenialBackoff)
		c.denied, c.retryAt, c.denials = err, time.Now().Add(backoff), c.denials+1
	}
	return err
}

func (c *Check) probe(ctx context.Context, ops Ops, probe string) error {
	at := time.Now().UTC().Format(time.RFC3339Nano)
	body := func(step string) []byte {
		return []byte(`{"probe":"s3lect checks conditional writes here","step":"` + step + `","at":"` + at + `"}`)
	}
	unsafe := func(format string, args ...any) error {
		return store.Permanent(fmt.Errorf("%w: "+format, append([]any{c.Unsafe}, args...)...))
	}
	if _, err := ops.Put(ctx, probe, body("create"), ""); err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
		return err
	}
	switch _, err := ops.Put(ctx, probe, body("second create"), ""); {
	case err == nil:
		return unsafe("a second create-if-absent of %s succeeded", c.Where(probe))
	case !errors.Is(err, store.ErrPreconditionFailed):
		return err
	}
	switch _, err := ops.Put(ctx, probe, body("wrong ETag"), c.WrongETag); {
	case err == nil:
		return unsafe("a replace of %s naming an ETag it does not have (%s) succeeded", c.Where(probe), c.WrongETag)
	case !errors.Is(err, store.ErrPreconditionFailed):
		return err
	}
	// The right ETag must be accepted. Other members check the same probe
	// at the same time: a refusal counts only if the probe did not change
	// meanwhile.
	for range attempts {
		_, cur, err := ops.Get(ctx, probe)
		if err != nil {
			return readFailed(c.Where(probe), err)
		}
		_, err = ops.Put(ctx, probe, body("right ETag"), cur)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrPreconditionFailed) {
			return err
		}
		_, now, gerr := ops.Get(ctx, probe)
		if gerr != nil {
			return readFailed(c.Where(probe), gerr)
		}
		if now == cur {
			return unsafe("a replace of %s naming its current ETag (%s) was refused; the lockfile could be created but never renewed", c.Where(probe), cur)
		}
	}
	return fmt.Errorf("conditional-write check on %s: other writers changed the probe %d times in a row; will check again on the next write", c.Where(probe), attempts)
}

// readFailed is the error of a failed read of the probe. It must not wrap
// store.ErrNotFound (a probe deleted under the check): a write's caller
// would take that for an answer about the lockfile. Such a failure is
// transient; the next write checks again.
func readFailed(where string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("conditional-write check: %s vanished during the check (%v); will check again on the next write", where, err)
	}
	return fmt.Errorf("conditional-write check: read %s: %w", where, err)
}
