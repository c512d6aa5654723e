// Package fence makes the writes of a leader's objects safe against a
// stale leader, on any store.Store: once a write of term t has landed on a
// key, no write of a lower term ever lands on that key.
//
// Object stores check no fencing token on a write. A leader paused past
// its lease (a GC pause, a stopped VM, a PUT that lands long after its
// reply was lost) can otherwise overwrite its successor's checkpoint. A
// Writer records its term with every object and writes with If-Match on
// the version it read, after checking that version's term is not higher
// than its own; its successor does the same with a higher term, so the
// stale write's condition no longer holds and it fails with ErrFenced.
//
// Guarantees, per key, for keys written only through this package
// (docs/fencing.md gives the argument, backend by backend):
//
//   - The terms of the writes that land never decrease. A Put, Delete or
//     Seal whose term is lower than the key's fails with an error wrapping
//     ErrFenced and is never retried into success.
//   - A write whose reply was lost is resolved by reading the key back:
//     every write carries a random write ID, found either as the key's
//     current version or as the one its successor replaced. When the key
//     cannot tell, the call's error wraps ErrOutcomeUnknown; it never
//     guesses.
//   - Seal raises keys to the writer's term without changing their data,
//     so that a new leader fences keys before its first write to them.
//   - Get returns the data and the term that wrote it.
//
// Limits: the term must be a fencing token (Leadership.Term, a pool
// shard's Term, or S3LECT_TERM in a child of `s3lect run`); two writers
// of one term are one leader's, and their writes to one key are
// last-writer-wins. A key the new leader has not sealed or written yet still
// takes the paused leader's write: seal every key first. An object, header included, must fit in
// store.MaxObjectSize (64 KiB): fence a small manifest that names large
// immutable objects. A write made outside the fence (another tool, a
// lifecycle rule, a physical delete) is outside the guarantee: it resets
// the key to term 0. What a caller does outside the store (send an email,
// call an API) is not fenced by this package.
//
// Each object is one header line followed by the caller's bytes
// unchanged (docs/fencing.md, "Object format"): `sed 1d` or `tail -n +2`
// reads the data with other tools.
package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/s3lect/s3lect/internal/retry"
	"github.com/s3lect/s3lect/store"
)

var (
	// ErrFenced is wrapped by the error of a write refused because the key
	// holds a higher term than the writer's: a newer leader has written or
	// sealed it. The writer is stale; it must stop, not retry.
	ErrFenced = errors.New("fence: fenced by a higher term")

	// ErrTooLarge is wrapped by the error of a Put whose data, with the
	// header, would not fit in store.MaxObjectSize.
	ErrTooLarge = errors.New("fence: object too large")

	// ErrOutcomeUnknown is wrapped by the error of a write that may or may
	// not have landed: its reply was lost (or its context ended) and the
	// key, read back, cannot tell. If it lands, it lands with the writer's
	// term; the guarantee holds either way, but the caller does not know
	// whether its data is there.
	ErrOutcomeUnknown = errors.New("fence: outcome unknown")
)

// FencedError is the error of a write refused by the fence. It wraps
// ErrFenced.
type FencedError struct {
	Op    string // "put", "delete" or "seal"
	Key   string
	Term  uint64 // the writer's term
	Found uint64 // the higher term the key holds
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("fence: %s %q: fenced: the key holds term %d, higher than this writer's term %d (a newer leader wrote or sealed it; stop writing)",
		e.Op, e.Key, e.Found, e.Term)
}

// Unwrap returns ErrFenced.
func (e *FencedError) Unwrap() error { return ErrFenced }

// maxData is the most data a Put accepts: store.MaxObjectSize less the
// longest header.
var maxData = store.MaxObjectSize - len(encode(^uint64(0), newWriteID(), newWriteID(), false, nil))

// maxConflicts bounds the writes of other writers of terms not above ours
// that a single call steps over before it gives up.
const maxConflicts = 16

// Writer writes objects with one term. It is safe for concurrent use.
type Writer struct {
	st   store.Store
	term uint64
}

// New returns a Writer for term on st. Term 0 is refused: no leadership
// holds it, and it is the term of objects written outside the fence.
func New(st store.Store, term uint64) (*Writer, error) {
	if st == nil {
		return nil, errors.New("fence: New: nil store")
	}
	if term == 0 {
		return nil, errors.New("fence: New: term 0 is not a fencing token; pass Leadership.Term(), a shard's Term() or S3LECT_TERM")
	}
	return &Writer{st: st, term: term}, nil
}

// Term returns the writer's term.
func (w *Writer) Term() uint64 { return w.term }

// Get reads key and returns its data and the term that wrote it (0 for an
// object written outside the fence). A key deleted through the fence
// returns an error wrapping store.ErrNotFound, with the term of the
// delete; an absent key returns one with term 0. Failures are retried on
// the fixed schedule (0, 100 ms, 1 s).
func (w *Writer) Get(ctx context.Context, key string) (data []byte, term uint64, err error) {
	return Read(ctx, w.st, key)
}

// Read is Get without a Writer: a reader needs no term.
func Read(ctx context.Context, st store.Store, key string) (data []byte, term uint64, err error) {
	v, err := read(ctx, st, key)
	if err != nil {
		return nil, 0, fmt.Errorf("fence: get %q: %w", key, err)
	}
	if len(v.data) > store.MaxObjectSize { // only an object written outside the fence: read refuses larger fenced ones
		return nil, 0, fmt.Errorf("fence: get %q: %w: more than %d bytes, so not written by the fence; read it with another tool", key, ErrTooLarge, store.MaxObjectSize)
	}
	if v.etag == "" {
		return nil, 0, fmt.Errorf("fence: get %q: %w", key, store.ErrNotFound)
	}
	if v.deleted {
		return nil, v.term, fmt.Errorf("fence: get %q: deleted at term %d: %w", key, v.term, store.ErrNotFound)
	}
	return v.data, v.term, nil
}

// Put writes data at key with the writer's term. It fails with an error
// wrapping ErrFenced if the key holds a higher term, and with ErrTooLarge
// if data does not fit. When it returns an error wrapping ctx's, the
// write may still land later, with this writer's term.
func (w *Writer) Put(ctx context.Context, key string, data []byte) error {
	if len(data) > maxData {
		return fmt.Errorf("fence: put %q: %w: %d bytes, more than the %d allowed; write large data to a key of its own and fence a small manifest naming it",
			key, ErrTooLarge, len(data), maxData)
	}
	return w.update(ctx, "put", key, func(version) ([]byte, bool, bool, error) { return data, false, true, nil })
}

// Delete deletes key with the writer's term: it leaves a tombstone that
// keeps the term, so that a stale writer cannot recreate the key. Get then
// returns an error wrapping store.ErrNotFound. Deleting an absent key
// writes a tombstone too.
func (w *Writer) Delete(ctx context.Context, key string) error {
	return w.update(ctx, "delete", key, func(version) ([]byte, bool, bool, error) { return nil, true, true, nil })
}

// Seal raises each key to the writer's term, keeping its data (an absent
// key gets a tombstone), so that no writer of a lower term can land a
// write on it any more. A key already at the writer's term is left alone.
// A new leader seals the keys it owns before its first write. Seal stops
// at the first key it cannot seal and returns its error: ErrFenced if the
// key holds a higher term.
func (w *Writer) Seal(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		err := w.update(ctx, "seal", key, func(cur version) ([]byte, bool, bool, error) {
			switch {
			case cur.term == w.term:
				return nil, false, false, nil
			case len(cur.data) > maxData:
				return nil, false, false, fmt.Errorf("%w: the object (written outside the fence) has more than %d bytes, so sealing it would cut it; move it or Put a small object in its place", ErrTooLarge, maxData)
			}
			return cur.data, cur.deleted || cur.etag == "", true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// update writes the version that change makes of the key's current one,
// on the condition that the key still holds that version and that its
// term is not higher than the writer's. change returns the new data,
// whether it is a tombstone, and false when there is nothing to write (or
// an error that ends the call).
//
// Every attempt of one call carries the same write ID. After an attempt
// whose outcome is unknown (an error other than the store's answers), the
// key is read back: the write landed if the key holds it, or holds a
// write that replaced it; it never will if the key has moved past the
// version it was made on. A failure is retried on the fixed schedule; a
// conflict (another writer landed first) is re-read and re-decided at
// once, so a higher term found then is final.
func (w *Writer) update(ctx context.Context, op, key string, change func(cur version) (data []byte, deleted, write bool, err error)) error {
	id := newWriteID()
	sched := retry.Schedule()
	var (
		unsure   *version // the base of an attempt whose outcome is unknown
		lastErr  error
		conflict int
	)
	for {
		cur, err := read(ctx, w.st, key)
		if err != nil && unsure != nil {
			return fmt.Errorf("%w: %s %q: reading the key back after %v: %w", ErrOutcomeUnknown, op, key, lastErr, err)
		}
		if err != nil {
			return fmt.Errorf("fence: %s %q: %w", op, key, err)
		}
		if unsure != nil {
			_, _, again, _ := change(cur)
			switch {
			case cur.write == id || cur.prev == id:
				return nil // the attempt landed (and may have been replaced since)
			case !again && cur.term == w.term:
				return nil // the key is where the call wanted it (a seal, at our term)
			case cur.etag == unsure.etag:
				// Nothing landed on the base: the attempt is retried below
				// with the same body, so that at most one of them lands.
			case cur.term > w.term:
				// Fenced. The attempt may have landed before the higher
				// term's write; either way it does not stand.
			case cur.prev == unsure.write || cur.term < w.term:
				// The key moved past the base without our write (a write of
				// ours would have been replaced only by one of our term or
				// higher), so the attempt never lands.
				unsure = nil
			default:
				return fmt.Errorf("%w: %s %q: the key moved on to write %s of the same term %d, which may have replaced this one (after %v)",
					ErrOutcomeUnknown, op, key, cur.write, w.term, lastErr)
			}
		}
		if cur.term > w.term && !mutNoTermCheck {
			return &FencedError{Op: op, Key: key, Term: w.term, Found: cur.term}
		}
		data, deleted, write, err := change(cur)
		if err != nil {
			return fmt.Errorf("fence: %s %q: %w", op, key, err)
		}
		if !write {
			return nil
		}
		_, err = w.st.PutIfMatch(ctx, key, encode(w.term, id, cur.write, deleted, data), cur.etag)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, store.ErrPreconditionFailed):
			// Another write landed first (or an earlier attempt of ours
			// did): re-read and decide again.
			if conflict++; conflict > maxConflicts {
				return w.failed(unsure != nil, op, key, fmt.Errorf("%d other writes of term %d or lower landed first; giving up: %w", maxConflicts, w.term, err))
			}
		case store.IsPermanent(err):
			return w.failed(unsure != nil, op, key, err)
		default:
			if unsure == nil || unsure.etag != cur.etag {
				base := cur
				unsure = &base
			}
			lastErr = err
			if err := wait(ctx, sched, err); err != nil {
				return fmt.Errorf("%w: %s %q (the write may land later, with term %d): %w", ErrOutcomeUnknown, op, key, w.term, err)
			}
		}
	}
}

// failed is the error of a call that ends on err: nothing was written,
// unless an earlier attempt's outcome is still unknown.
func (w *Writer) failed(unsure bool, op, key string, err error) error {
	if unsure {
		return fmt.Errorf("%w: %s %q (an earlier attempt may land, with term %d): %w", ErrOutcomeUnknown, op, key, w.term, err)
	}
	return fmt.Errorf("fence: %s %q: %w", op, key, err)
}

// read returns the key's current version, retrying failures on the fixed
// schedule. An absent key is a version with etag "".
func read(ctx context.Context, st store.Store, key string) (version, error) {
	sched := retry.Schedule()
	for {
		body, etag, err := st.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return version{}, nil
		case err == nil && etag == "":
			return version{}, errors.New("the store returned an object without an ETag")
		case err == nil && len(body) > store.MaxObjectSize && bytes.HasPrefix(body, []byte(magic)):
			return version{}, fmt.Errorf("the object starts with %q but is larger than any fenced write (%d bytes); refusing to guess its term (remove the object by hand if it is not s3lect's)", magic, store.MaxObjectSize)
		case err == nil:
			v, err := decode(body)
			if err != nil {
				return version{}, fmt.Errorf("%w; refusing to guess its term (remove the object by hand if it is not s3lect's)", err)
			}
			v.etag = etag
			return v, nil
		case store.IsPermanent(err):
			return version{}, err
		}
		if err := wait(ctx, sched, err); err != nil {
			return version{}, err
		}
	}
}

// wait sleeps for the schedule's next delay after the failure err. It
// returns err (with ctx's error, if ctx ended) when the schedule is spent.
func wait(ctx context.Context, sched backoff.BackOff, err error) error {
	d := sched.NextBackOff()
	if d == backoff.Stop {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
	}
}
