package condcheck_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/condcheck"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

var errUnsafe = errors.New("test: unsafe store")

func newCheck() *condcheck.Check {
	return &condcheck.Check{Where: func(k string) string { return "mem://" + k }, WrongETag: "no-such-etag", Unsafe: errUnsafe}
}

// ops adapts a store.Store, counting writes and optionally misbehaving.
type ops struct {
	st          store.Store
	puts        int
	ignoreCond  bool  // write whatever the condition
	refuseRight bool  // refuse every replace, even one naming the current ETag
	fail        error // every call fails with it
}

func (o *ops) Get(ctx context.Context, key string) ([]byte, string, error) {
	if o.fail != nil {
		return nil, "", o.fail
	}
	return o.st.Get(ctx, key)
}

func (o *ops) Put(ctx context.Context, key string, data []byte, etag string) (string, error) {
	o.puts++
	if o.fail != nil {
		return "", o.fail
	}
	if o.ignoreCond {
		_, cur, err := o.st.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			cur = ""
		}
		return o.st.PutIfMatch(ctx, key, data, cur)
	}
	if o.refuseRight && etag != "" {
		return "", store.ErrPreconditionFailed
	}
	return o.st.PutIfMatch(ctx, key, data, etag)
}

func TestCheckPassesOnceOnAnHonestStore(t *testing.T) {
	c, o := newCheck(), &ops{st: memstore.New()}
	if err := c.Before(t.Context(), o, "lock.json"); err != nil {
		t.Fatalf("Before() = %v; want nil on an honest store", err)
	}
	if o.puts != 4 {
		t.Errorf("the check wrote %d times; want 4 (create, second create, wrong ETag, right ETag)", o.puts)
	}
	if _, _, err := o.st.Get(t.Context(), "lock.json"+condcheck.ProbeSuffix); err != nil {
		t.Errorf("probe object: %v; want it written next to the lockfile", err)
	}
	if err := c.Before(t.Context(), o, "lock.json"); err != nil || o.puts != 4 {
		t.Errorf("second Before() = %v after %d writes; want nil and no new write", err, o.puts)
	}
}

func TestCheckRefusesAStoreThatIgnoresConditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *ops
		want string
	}{
		{"IgnoresConditions", &ops{st: memstore.New(), ignoreCond: true}, "second create-if-absent of mem://lock.json.s3lect-probe succeeded"},
		{"RefusesTheRightETag", &ops{st: memstore.New(), refuseRight: true}, "naming its current ETag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCheck()
			err := c.Before(t.Context(), tc.o, "lock.json")
			if !store.IsPermanent(err) || !errors.Is(err, errUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Before() = %v; want a permanent error wrapping Unsafe and saying %q", err, tc.want)
			}
			puts := tc.o.puts
			if err2 := c.Before(t.Context(), tc.o, "lock.json"); err2 != err || tc.o.puts != puts {
				t.Errorf("second Before() = %v after %d more writes; want the remembered verdict and no write", err2, tc.o.puts-puts)
			}
		})
	}
}

func TestCheckForgetsTransientFailures(t *testing.T) {
	c, o := newCheck(), &ops{st: memstore.New(), fail: errors.New("connection reset")}
	if err := c.Before(t.Context(), o, "lock.json"); err == nil || store.IsPermanent(err) {
		t.Fatalf("Before() = %v; want the transient error as it is", err)
	}
	o.fail = nil
	if err := c.Before(t.Context(), o, "lock.json"); err != nil {
		t.Fatalf("Before() after the store recovered = %v; want the check run again and passed", err)
	}
}

// A probe deleted under the check (a lifecycle rule, an operator) fails
// the check for now, without an error that reads as "lockfile absent".
func TestCheckProbeThatVanishes(t *testing.T) {
	c, o := newCheck(), &vanishing{ops: ops{st: memstore.New()}}
	err := c.Before(t.Context(), o, "lock.json")
	if err == nil || store.IsPermanent(err) || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "vanished") {
		t.Fatalf("Before() with the probe gone = %v; want a transient error saying it vanished, not wrapping ErrNotFound", err)
	}
}

// vanishing finds no probe whenever it reads one.
type vanishing struct{ ops }

func (v *vanishing) Get(ctx context.Context, key string) ([]byte, string, error) {
	return nil, "", store.ErrNotFound
}

// A permanent failure that is not a verdict on the store (AccessDenied
// while an IAM policy is briefly wrong) is returned without calling the
// store until its backoff has passed, then checked again; the backoff
// doubles while the failure lasts.
func TestCheckRechecksADenialAfterABackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		denied := store.Permanent(errors.New("AccessDenied"))
		c, o := newCheck(), &ops{st: memstore.New(), fail: denied}
		if err := c.Before(t.Context(), o, "lock.json"); !errors.Is(err, denied) {
			t.Fatalf("Before() = %v; want the denial", err)
		}
		puts := o.puts
		time.Sleep(condcheck.DenialBackoff - time.Millisecond)
		if err := c.Before(t.Context(), o, "lock.json"); !errors.Is(err, denied) || o.puts != puts {
			t.Fatalf("Before() within the backoff = %v after %d writes; want the remembered denial and no call", err, o.puts-puts)
		}
		time.Sleep(time.Millisecond)
		if err := c.Before(t.Context(), o, "lock.json"); !errors.Is(err, denied) || o.puts == puts {
			t.Fatalf("Before() after the backoff = %v after %d writes; want the check run again", err, o.puts-puts)
		}
		puts = o.puts
		time.Sleep(2*condcheck.DenialBackoff - time.Millisecond) // the second backoff is twice as long
		if err := c.Before(t.Context(), o, "lock.json"); !errors.Is(err, denied) || o.puts != puts {
			t.Fatalf("Before() within the second backoff = %v after %d writes; want no call", err, o.puts-puts)
		}
		time.Sleep(time.Millisecond)
		o.fail = nil // the policy is fixed
		if err := c.Before(t.Context(), o, "lock.json"); err != nil {
			t.Fatalf("Before() after the policy was fixed = %v; want the check run again and passed", err)
		}
	})
}

// TestProbeKeyOfATermClaimIsTheTermObjects: a store whose first write is a
// takeover's term claim probes next to the term object, as before claims,
// so a lockfile has one probe whatever term is claimed first, and the
// probe's key is no longer than the claims'.
func TestProbeKeyOfATermClaimIsTheTermObjects(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"leader/x.json.term.00000000000000000012", "leader/x.json.term.s3lect-probe"},
		{"leader/x.json.term", "leader/x.json.term.s3lect-probe"},
		{"leader/x.json", "leader/x.json.s3lect-probe"},
		{"leader/x.json.term.12", "leader/x.json.term.12.s3lect-probe"},                                     // not 20 digits
		{"leader/x.json.term.0000000000000000001a", "leader/x.json.term.0000000000000000001a.s3lect-probe"}, // not digits
		{"a/00000000000000000012", "a/00000000000000000012.s3lect-probe"},                                   // no .term before
	} {
		if got := condcheck.ProbeKey(tc.key); got != tc.want {
			t.Errorf("ProbeKey(%q) = %q; want %q", tc.key, got, tc.want)
		}
	}
}
