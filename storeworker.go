package s3lect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The store worker: a goroutine that performs the run loop's store calls,
// one at a time, under the retry policy. The follower's reader and the
// leader's heartbeat are each one.

// storeOp is a store call for a storage goroutine.
type storeOp struct {
	ctx      context.Context
	gen      uint64
	kind     opKind
	data     []byte
	ifMatch  string
	orOver   []byte
	over     *[32]byte
	notAfter time.Time
}

// worker is a storage goroutine as the run loop sees it.
type worker struct {
	ops  chan storeOp  // capacity 1; the loop has at most one call in flight
	quit chan struct{} // closed to stop the goroutine; nil while none runs
}

// send hands op to w's goroutine, starting one if none runs.
func (lp *loop) send(w *worker, op storeOp) {
	if w.quit == nil {
		if w.ops == nil {
			w.ops = make(chan storeOp, 1)
		}
		ops, quit := w.ops, make(chan struct{})
		w.quit = quit
		lp.e.g.Go(func() error { return lp.e.serveStore(lp.e.ctx, ops, quit) })
	}
	w.ops <- op
}

// stop ends w's goroutine once it has returned its last result.
func (w *worker) stop() {
	if w.quit != nil {
		close(w.quit)
		w.quit = nil
	}
}

// serveStore is a storage goroutine: it performs the store calls the run
// loop hands it, one at a time, under the retry policy, and returns each
// result tagged with its call's generation. Two run per elector: the
// storage reader (a follower's reads and takeovers) and the heartbeat (a
// leader's renewals and its release). They share no election state: what
// they need comes in the call, what they learn goes back in the result.
//
// Self-fencing does not depend on them: a timer cancels the leadership's
// context at the lease deadline (leadership.go), a renewal is sent under
// that context, and no attempt is sent once the deadline has passed.
//
// The run loop starts each when it first needs it and stops it when its
// role ends (quit), so that a leader runs only its heartbeat and a
// follower only its reader: a thousand electors in one process pay for one
// storage goroutine each.
func (e *Elector) serveStore(ctx context.Context, ops <-chan storeOp, quit <-chan struct{}) error {
	for {
		var op storeOp
		select {
		case op = <-ops:
		case <-quit:
			return nil
		case <-ctx.Done():
			return nil
		}
		r := e.perform(op)
		select {
		case e.results <- r:
		case <-e.loopDone:
			return nil
		}
	}
}

// perform does one store call.
func (e *Elector) perform(op storeOp) evStore {
	r := evStore{gen: op.gen}
	ctx := op.ctx
	if !op.notAfter.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.realUntil(op.notAfter))
		defer cancel()
	}
	switch op.kind {
	case opRead:
		r.data, r.etag, r.err = e.get(ctx, e.key)
	case opTermRead:
		r.data, r.etag, r.err = e.get(ctx, e.termKey)
	case opTermWrite:
		r.etag, r.unsure, r.err = e.put(ctx, e.termKey, op.data, op.ifMatch, op.over, op.notAfter)
	case opRelease:
		r.etag, r.unsure, r.err = e.put(ctx, e.key, op.data, op.ifMatch, op.over, op.notAfter)
		if errors.Is(r.err, store.ErrPreconditionFailed) && op.orOver != nil {
			// A renewal cut off with its outcome unknown may have landed:
			// if it did, the release goes over it.
			if got, tag, err := e.get(ctx, e.key); err == nil && bytes.Equal(got, op.orOver) {
				over := sha256.Sum256(got)
				r.etag, r.unsure, r.err = e.put(ctx, e.key, op.data, tag, &over, op.notAfter)
			}
		}
	default:
		r.etag, r.unsure, r.err = e.put(ctx, e.key, op.data, op.ifMatch, op.over, op.notAfter)
	}
	return r
}
