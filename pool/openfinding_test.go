//go:build s3lect_openfindings

package pool

// Open findings of package pool's public API, built only with the tag
// (they fail on today's code):
//
//	go test -tags s3lect_openfindings -run TestOpen -v ./pool

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestOpenRunReturnsWhenTheStoreIsUnreachableAtItsEnd: Run's context
// ends while the worker cannot reach the store (a SIGTERM during an
// outage). Its leaderships end at once and its lease runs out within
// LeaderTimeout; with nothing left to close, Run should return then.
// Today it never does: the worker's core, leaving with its session
// ended, retries the read of its session object for ever
// (pool/internal/coord, Worker.SessionRead: a failed read returns before
// the leaving check).
func TestOpenRunReturnsWhenTheStoreIsUnreachableAtItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, 4)
		g.waitEven(g.workers, 4*testLT, "cold start")
		w := g.workers[0]
		w.fs.Cut()
		w.stop()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("Run() = %v; want nil", err)
			}
			w.done <- nil // for stopAll
		case <-time.After(3 * testLT):
			t.Errorf("Run did not return within 3 × LeaderTimeout of its context's end while the store was unreachable")
		}
		g.stopAll()
	})
}
