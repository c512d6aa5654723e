package s3store

// The conditional-write check: before its first write, a Store proves on a
// probe object that the bucket refuses a second create and a wrong ETag and
// accepts the right one (quoted, or bare for Ceph RGW).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3lect/s3lect/internal/condcheck"
	"github.com/s3lect/s3lect/store"
)

// errNoConditions is the permanent error a Store returns, wrapping
// store.ErrNoConditionalWrites, when its bucket ignores If-None-Match or
// If-Match.
var errNoConditions = fmt.Errorf("s3store: the store ignores If-None-Match / If-Match: %w", store.ErrNoConditionalWrites)

// check verifies, once per Store, that the bucket honours conditional
// writes: a second create of the probe object, and a replace with a wrong
// ETag, must both be refused, and a replace with the right ETag must
// succeed, quoted or bare. A transient failure is not remembered.
func (s *Store) check(ctx context.Context, key string) error {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	s.mu.Lock()
	done, verdict := s.passed, s.checked
	if verdict != nil && !errors.Is(verdict, store.ErrNoConditionalWrites) && !time.Now().Before(s.retryAt) {
		verdict = nil // a denial whose backoff has passed: check again
	}
	s.mu.Unlock()
	if done || verdict != nil {
		return verdict
	}
	probe := condcheck.ProbeKey(key)
	at := time.Now().UTC().Format(time.RFC3339Nano)
	body := func(step string) []byte {
		return []byte(`{"probe":"s3lect checks conditional writes here","step":"` + step + `","at":"` + at + `"}`)
	}
	if _, err := s.write(ctx, probe, body("create"), ""); err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
		return s.remember(err)
	}
	_, err := s.write(ctx, probe, body("second create"), "")
	if err == nil {
		return s.remember(store.Permanent(fmt.Errorf("%w: a second If-None-Match create of s3://%s/%s succeeded", errNoConditions, s.bucket, probe)))
	}
	if !errors.Is(err, store.ErrPreconditionFailed) {
		return s.remember(err)
	}
	_, err = s.write(ctx, probe, body("wrong If-Match"), `"00000000000000000000000000000000"`)
	if err == nil {
		return s.remember(store.Permanent(fmt.Errorf("%w: an If-Match put with a wrong ETag on s3://%s/%s succeeded", errNoConditions, s.bucket, probe)))
	}
	if !errors.Is(err, store.ErrPreconditionFailed) {
		return s.remember(err)
	}
	s.mu.Lock()
	s.written[probe] = true // it exists: a denied read of it is real
	s.mu.Unlock()
	// The right ETag must be accepted, quoted or bare. Other Stores on the
	// same lockfile check the same probe at the same time: a refusal counts
	// only if the probe did not change meanwhile; otherwise, try again.
	for range checkAttempts {
		_, cur, err := s.Get(ctx, probe)
		if err != nil {
			return s.remember(fmt.Errorf("s3store: conditional-write check: read s3://%s/%s: %w", s.bucket, probe, err))
		}
		_, err = s.write(ctx, probe, body("quoted If-Match"), cur)
		if err == nil {
			return s.pass(false, probe)
		}
		if !refused(err) {
			return s.remember(err)
		}
		if changed, err := s.changed(ctx, probe, cur); err != nil || changed {
			if err != nil {
				return err
			}
			continue // another writer raced this one
		}
		bare := strings.Trim(cur, `"`)
		_, err = s.write(ctx, probe, body("bare If-Match"), bare)
		if err == nil {
			return s.pass(true, probe)
		}
		if !refused(err) {
			return s.remember(err)
		}
		if changed, err := s.changed(ctx, probe, cur); err != nil || changed {
			if err != nil {
				return err
			}
			continue
		}
		return s.remember(store.Permanent(fmt.Errorf("%w: an If-Match put naming the object's current ETag on s3://%s/%s was refused, both quoted (%s) and bare (%s); the lockfile could be created but never renewed", errNoConditions, s.bucket, probe, cur, bare)))
	}
	return fmt.Errorf("s3store: conditional-write check on s3://%s/%s: other writers changed the probe %d times in a row; will check again on the next write", s.bucket, probe, checkAttempts)
}

// checkAttempts bounds the rounds of the If-Match check that other
// writers of the probe may spoil.
const checkAttempts = 5

// refused reports whether a write was refused, or answered 5xx in a way
// that reading back could not settle as a success.
func refused(err error) bool {
	return errors.Is(err, store.ErrPreconditionFailed) || serverError(err)
}

// changed reports whether the object at key no longer has the ETag etag.
func (s *Store) changed(ctx context.Context, key, etag string) (bool, error) {
	_, now, err := s.Get(ctx, key)
	if err != nil {
		return false, s.remember(fmt.Errorf("s3store: conditional-write check: read s3://%s/%s: %w", s.bucket, key, err))
	}
	return now != etag, nil
}

// pass records a successful check; bare says ETags go without quotes.
func (s *Store) pass(bare bool, probe string) error {
	if bare {
		s.log.Warn("s3store: this store refuses quoted ETags in If-Match and accepts them bare (as Ceph RGW does); sending them bare for this bucket",
			"bucket", s.bucket, "probe", probe, "adapted", "If-Match ETags sent bare")
	}
	s.mu.Lock()
	s.passed, s.bare, s.checked, s.denials = true, bare, nil, 0
	s.mu.Unlock()
	return nil
}

// remember keeps a permanent error: for good when it is the verdict that
// the bucket ignores conditional writes; otherwise (AccessDenied while an
// IAM policy is briefly wrong) for a backoff, during which check returns
// it without calling the store, starting at condcheck.DenialBackoff and
// doubling up to condcheck.MaxDenialBackoff. Other errors are returned as
// they are.
func (s *Store) remember(err error) error {
	if store.IsPermanent(err) {
		s.mu.Lock()
		s.checked = err
		if !errors.Is(err, store.ErrNoConditionalWrites) {
			s.retryAt = time.Now().Add(min(condcheck.DenialBackoff<<min(s.denials, 16), condcheck.MaxDenialBackoff))
			s.denials++
		}
		s.mu.Unlock()
	}
	return err
}
