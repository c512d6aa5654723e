package fence_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// Tests of how the fence reports what a store told it: an object cut at
// the size limit, a lost reply over a key already at the writer's term,
// and a read back that fails after a write landed.

// truncating reads as s3store, gcsstore, azblobstore and natskv do: at
// most store.MaxObjectSize+1 bytes of an object (store.go allows it).
type truncating struct{ store.Store }

func (s truncating) Get(ctx context.Context, key string) ([]byte, string, error) {
	data, etag, err := s.Store.Get(ctx, key)
	if len(data) > store.MaxObjectSize+1 {
		data = data[:store.MaxObjectSize+1]
	}
	return data, etag, err
}

// TestReadRefusesATruncatedFencedObject: an object larger than
// store.MaxObjectSize that carries a valid fence header (written by another
// tool: a copy, a concatenation, a newer s3lect with a larger limit) is cut
// by every real backend at MaxObjectSize+1 bytes. The fence never writes
// such an object, so it cannot be whole, yet Read returns the first 64 KiB
// as the key's data with a nil error: silent data loss for the reader
// (a foreign object of that size is refused with ErrTooLarge; a fenced-
// looking one skips the check because it is made on the data after the
// header). Fix: in read or decode, refuse any body longer than
// MaxObjectSize, header or not.
func TestReadRefusesATruncatedFencedObject(t *testing.T) {
	mem := memstore.New()
	st := truncating{mem}
	w, _ := fence.New(mem, 3)
	if err := w.Put(t.Context(), "k", []byte("small")); err != nil {
		t.Fatal(err)
	}
	raw, _, _ := mem.Get(t.Context(), "k")
	header, _, _ := bytes.Cut(raw, []byte("\n"))
	big := append(append(header, '\n'), bytes.Repeat([]byte("x"), 70<<10)...)
	mem.Set("k", big) // another tool appends to the object
	data, term, err := fence.Read(t.Context(), st, "k")
	if err == nil {
		t.Fatalf("Read(a %d-byte object with a fence header) = %d bytes of data, term %d, nil error; want an error (the object was cut at %d bytes)",
			len(big), len(data), term, store.MaxObjectSize+1)
	}
}

// TestSealWithALostReplySucceedsOnAKeyAtItsTerm: a Seal whose write landed with its
// reply lost, after which two writes of the same term (the same leader's
// other worker, or `s3lect put` run beside `s3lect seal` in one job) land
// before the read back. The key holds the sealer's term, which is all a
// Seal promises ("raises each key to the writer's term"), yet Seal returns
// "outcome unknown": a new leader following the docs (seal, then work)
// gives up although its key is sealed. Put cannot tell whether its data
// landed there; Seal does not need to. Fix: in update's resolution, for
// seal, a key found at the writer's term (or after a fresh read, any
// version of the writer's term) is success.
func TestSealWithALostReplySucceedsOnAKeyAtItsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		old, _ := fence.New(st, 3)
		if err := old.Put(t.Context(), "k", []byte("v3")); err != nil {
			t.Fatal(err)
		}
		h := &hookStore{Store: st}
		h.after = func() error {
			other, _ := fence.New(st, 4)
			for _, v := range []string{"other 1", "other 2"} {
				if err := other.Put(context.Background(), "k", []byte(v)); err != nil {
					t.Errorf("other Put() error = %v", err)
				}
			}
			return errors.New("connection reset")
		}
		w, _ := fence.New(h, 4)
		if err := w.Seal(t.Context(), "k"); err != nil {
			_, term, _ := fence.Read(t.Context(), st, "k")
			t.Fatalf("Seal(term 4) error = %v; want nil: the key holds term %d, the sealer's", err, term)
		}
	})
}

// failGets fails the next n reads once its first write has reached the
// store, whose reply it loses.
type failGets struct {
	store.Store
	n     int
	wrote bool
}

func (f *failGets) Get(ctx context.Context, key string) ([]byte, string, error) {
	if f.wrote && f.n > 0 {
		f.n--
		return nil, "", errors.New("read timeout")
	}
	return f.Store.Get(ctx, key)
}

func (f *failGets) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if f.wrote {
		return f.Store.PutIfMatch(ctx, key, data, etag)
	}
	f.wrote = true
	if _, err := f.Store.PutIfMatch(ctx, key, data, etag); err != nil {
		return "", err
	}
	return "", errors.New("connection reset")
}

// TestPutWithAnUnresolvedReplySaysOutcomeUnknown: a Put whose write landed
// with its reply lost, and whose read back then fails through the fixed
// retries, returns the read's error alone ("fence: put "k": read
// timeout"), which reads as "the put failed" although its data is in the
// store. Every other unresolved path says "outcome unknown" (and there is
// no sentinel a caller or the command's exit status could use to tell
// "not written" from "may be written"). Fix: when unsure != nil, wrap the
// read's error as the other unknown outcomes are (and export a sentinel,
// e.g. ErrOutcomeUnknown, with its own exit status in the command).
func TestPutWithAnUnresolvedReplySaysOutcomeUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		w, _ := fence.New(&failGets{Store: st, n: 10}, 2)
		err := w.Put(t.Context(), "k", []byte("landed"))
		data, _, _ := fence.Read(t.Context(), st, "k")
		if string(data) != "landed" {
			t.Fatalf("setup: the key holds %q; want the write landed", data)
		}
		if err == nil || !strings.Contains(err.Error(), "outcome unknown") {
			t.Fatalf("Put() whose write landed and whose read back failed: error = %v; want one saying the outcome is unknown", err)
		}
	})
}
