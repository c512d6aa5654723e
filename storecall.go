package s3lect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
)

// The store calls: the storage goroutines that perform the run loop's
// store calls, one at a time, and the calls themselves, get and put of the
// lockfile or its term object, by the rules the pool shares
// (internal/lease, on the retry policy of internal/retry). The
// follower's reader and the leader's renewer are each one goroutine.

// storeOp is a store call for a storage goroutine: its context, the
// generation its result is tagged with, and what to do.
type storeOp struct {
	ctx context.Context
	gen uint64
	req storeReq
}

// storeReq is what a storage goroutine does for one store call. Each kind
// performs itself.
type storeReq interface {
	perform(e *Elector, ctx context.Context) evStore
}

type (
	// getReq reads key; with sighting, with the store's sighting token.
	getReq struct {
		key      string
		sighting bool
	}
	// putReq writes data to key over the object as over saw it (the
	// zero Sighting creates). With a non-zero notAfter, no attempt is
	// sent from then on.
	putReq struct {
		key      string
		data     []byte
		over     lease.Sighting
		notAfter time.Time
	}
	// findReq finds the highest term claimed (docs/protocol.md, 1.1),
	// knowing that the claim of from exists.
	findReq struct{ from uint64 }
	// releaseReq is a leader's release: a putReq that, if ifMatch is
	// refused and the lockfile holds orOver, writes over those bytes.
	releaseReq struct {
		putReq
		orOver []byte
	}
)

// putOf returns the putReq of the core's write w to key.
func putOf(key string, w write, notAfter time.Time) putReq {
	r := putReq{key: key, data: w.data, notAfter: notAfter}
	if w.ifMatch != "" {
		r.over = lease.Sighting{ETag: w.ifMatch, Sum: w.over}
	}
	return r
}

// worker is a storage goroutine as the run loop sees it.
type worker struct {
	ops  chan storeOp  // capacity 1; the loop has at most one call in flight
	quit chan struct{} // closed to stop the goroutine; nil while none runs
}

// send hands the call req, numbered gen, to w's goroutine, under ctx,
// starting one if none runs.
func (lp *loop) send(ctx context.Context, w *worker, gen uint64, req storeReq) {
	if w.quit == nil {
		if w.ops == nil {
			w.ops = make(chan storeOp, 1)
		}
		ops, quit := w.ops, make(chan struct{})
		w.quit = quit
		lp.e.g.Go(func() error { return lp.e.serveStore(lp.e.ctx, ops, quit) })
	}
	w.ops <- storeOp{ctx: ctx, gen: gen, req: req}
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
// reader (a follower's reads and takeovers) and the renewer (a leader's
// renewals and its release). They share no election state: what
// they need comes in the call, what they learn goes back in the result.
//
// Self-fencing does not depend on them: a timer cancels the leadership's
// context at the lease deadline (leadership.go), a renewal is sent under
// that context, and no attempt is sent once the deadline has passed.
//
// The run loop starts each when it first needs it and stops it when its
// role ends (quit), so that a leader runs only its renewer and a
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
		r := op.req.perform(e, op.ctx)
		r.gen = op.gen
		select {
		case e.results <- r:
		case <-e.loopDone:
			return nil
		}
	}
}

func (r getReq) perform(e *Elector, ctx context.Context) (ev evStore) {
	if r.sighting {
		var err error
		ev.data, ev.etag, ev.token, err = e.calls.GetSighting(ctx, r.key)
		if err != nil {
			ev.data, ev.etag, ev.token, ev.err = nil, "", "", &opError{"read", r.key, err}
		}
		return ev
	}
	ev.data, ev.etag, ev.err = e.get(ctx, r.key)
	return ev
}

func (r putReq) perform(e *Elector, ctx context.Context) (ev evStore) {
	if !r.notAfter.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.clock.RealUntil(r.notAfter))
		defer cancel()
	}
	ev.etag, ev.unsure, ev.err = e.put(ctx, r.key, r.data, r.over, r.notAfter)
	return ev
}

// perform reads claims above r.from: from+1, from+2, from+4, ... until
// one is absent, then halves the gap between the last present and the
// first absent. Claims are contiguous (every term up to the highest has
// one), so the answer is exact; it costs about 2·log2(gap) reads. It
// returns the highest claim's term and content.
func (r findReq) perform(e *Elector, ctx context.Context) (ev evStore) {
	var top []byte // the content of the claim of lo, once read
	present := func(t uint64) (bool, error) {
		data, tag, err := e.get(ctx, e.claimKey(t))
		if tag != "" {
			top = data
		}
		return tag != "", err
	}
	lo, hi := r.from, uint64(0) // lo is claimed; hi, once non-zero, is not
	for step := uint64(1); hi == 0; step *= 2 {
		t := lo + step
		if t < lo || step == 0 {
			t = math.MaxUint64 // the last term there is
		}
		ok, err := present(t)
		switch {
		case err != nil:
			ev.err = err
			return ev
		case !ok:
			hi = t
		case t == math.MaxUint64:
			ev.term, ev.data = t, top
			return ev
		default:
			lo = t
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := present(mid)
		if err != nil {
			ev.err = err
			return ev
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == r.from {
		// No claim above from: read its own, for the lease it states.
		if _, err := present(lo); err != nil {
			ev.err = err
			return ev
		}
	}
	ev.term, ev.data = lo, top
	return ev
}

func (r releaseReq) perform(e *Elector, ctx context.Context) evStore {
	ev := r.putReq.perform(e, ctx)
	if errors.Is(ev.err, store.ErrPreconditionFailed) && r.orOver != nil {
		// A renewal cut off with its outcome unknown may have landed:
		// if it did, the release goes over it.
		if got, tag, err := e.get(ctx, r.key); err == nil && bytes.Equal(got, r.orOver) {
			ev.etag, ev.unsure, ev.err = e.put(ctx, r.key, r.data, lease.Sight(got, tag), r.notAfter)
		}
	}
	return ev
}

// opError is a store call's failure: the operation and the lockfile, then
// the store's error. It carries the s3lect: prefix, once.
type opError struct {
	op, key string
	err     error
}

func (e *opError) Error() string { return fmt.Sprintf("s3lect: %s %q: %v", e.op, e.key, e.err) }
func (e *opError) Unwrap() error { return e.err }

// get reads the object key (the lockfile or its term object) under the
// retry policy. An absent object is returned as etag "" and a nil error.
func (e *Elector) get(ctx context.Context, key string) (data []byte, etag string, err error) {
	data, etag, err = e.calls.Get(ctx, key)
	if err != nil {
		return nil, "", &opError{"read", key, err}
	}
	return data, etag, nil
}

// put writes data to key over the object as over saw it (the zero
// Sighting creates), by the rules of lease.Calls.Put: retries read first,
// a write that landed after a lost reply is adopted, no attempt is sent
// once the local clock reaches a non-zero notAfter. unsure reports, on
// failure, that an attempt may have landed.
func (e *Elector) put(ctx context.Context, key string, data []byte, over lease.Sighting, notAfter time.Time) (tag string, unsure bool, err error) {
	tag, unsure, err = e.calls.Put(ctx, key, data, over, notAfter)
	if err != nil {
		return "", unsure, &opError{"write", key, err}
	}
	return tag, false, nil
}
