package s3lect

import (
	"context"
	"errors"
)

// Campaign blocks until this elector leads, and returns the Leadership.
//
// It returns ctx.Err() if ctx ends first, leaving nothing behind: a
// takeover that was being written is released before Campaign returns. It
// returns ErrClosed after Close, ErrCampaigning while another Campaign on
// this elector waits or its Leadership is live, and an error naming the
// lockfile when the store fails permanently (a missing bucket, denied
// access, a store without conditional writes). Campaign may be called
// again as soon as the previous Leadership's Done channel is closed.
func (e *Elector) Campaign(ctx context.Context) (*Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &campaignReq{id: e.campaigns.Add(1), ctx: ctx, answer: make(chan campaignAnswer, 1)}
	if !e.ask(ctx, req) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
	select {
	case a := <-req.answer:
		return a.l, a.err
	case <-ctx.Done():
	}

	// Withdraw. A takeover in flight decides the outcome: the loop answers
	// once it has, after releasing what it won.
	// If the loop has ended, it answered every campaign before it did.
	e.ask(context.Background(), withdrawReq{id: req.id, cause: ctx.Err()})
	a := <-req.answer
	if a.l != nil {
		// Won just before the withdrawal reached the loop: give it back.
		a.l.end(context.Cause(ctx))
		<-a.l.exited
		return nil, ctx.Err()
	}
	if a.err != nil && !errors.Is(a.err, ctx.Err()) {
		return nil, a.err // closed, or failed, before the withdrawal arrived
	}
	return nil, ctx.Err()
}
