package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// endedCtx is a context whose Err reports its end before its Done channel
// closes, as an s3lect Leadership's context does: its Err reads the clock
// (which counts a host's suspend), its Done closes when the expiry timer
// fires, a Go timer that a suspend holds back by up to LeaderTimeout/20
// after the resume.
type endedCtx struct {
	context.Context
	ended *atomic.Bool
}

func (c endedCtx) Err() error {
	if c.ended.Load() {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// TestPutSendsNoRetryOnceItsContextSaysItEnded (thirteenth review; it
// failed before retry.Do asked ctx.Err before each attempt). The coordinator's
// page and roster writes go through Put with the leadership's context and
// no notAfter (pool/coordinate.go). A host suspend during the backoff
// before a retry, longer than what is left of the coordinator's lease:
// after the resume the backoff's timer can fire before the leadership's
// expiry timer, and retry.Do watches only Done, so the retry (a read and
// a conditional page write) is sent after the lease ended, while
// docs/pool-protocol.md says that no store call is sent after that (4)
// and that an era's writes are sent while its election lease holds (5,
// case 4). The page's If-Match and the next era's early rule make such a
// write harmless (TestSimulationWithLateWrites), so this is the letter of
// the protocol, not a second owner. Mended: retry.Do asks ctx.Err() before
// each attempt (a leadership's context then reads the clock).
func TestPutSendsNoRetryOnceItsContextSaysItEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		var ended atomic.Bool
		s.fault = func(op string, n int) (error, bool) {
			if n == 1 {
				// The first attempt fails, its outcome unknown; the host
				// then sleeps past the lease's end during the backoff.
				ended.Store(true)
				return errLost, false
			}
			return nil, false
		}
		c, _ := newCalls(s)
		ctx := endedCtx{Context: t.Context(), ended: &ended}
		_, _, err := c.Put(ctx, "assign/w1.json", []byte("page"), Sighting{}, time.Time{})
		if tr := s.trace(); tr != "put" {
			t.Errorf("sent %q after the first attempt failed and the context's Err reported its end (Put returned %v); want no request after the first PUT", tr, err)
		}
		if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errLost) {
			t.Errorf("Put() = %v; want the end of its context or the first attempt's failure", err)
		}
	})
}
