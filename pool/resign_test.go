package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// resignWaitLimit bounds a Resign in the tests below: far longer than
// any release takes, so that a Resign that would never return fails the
// test instead of hanging it.
const resignWaitLimit = 100 * testLT

// resignTrace records, for every shard Work ran, how long the Resign
// that Work's deferred call made took, and its error.
type resignTrace struct {
	took chan resigned
}

type resigned struct {
	worker, shard string
	took          time.Duration
	err           error
}

// work is a Work function in the usual pattern: work until ctx ends, and
// Resign on the way out.
func (r *resignTrace) work(id string) func(ctx context.Context, shard string, lead *s3lect.Leadership) {
	return func(ctx context.Context, shard string, lead *s3lect.Leadership) {
		defer func() {
			rctx, cancel := context.WithTimeout(context.Background(), resignWaitLimit)
			defer cancel()
			start := time.Now()
			err := lead.Resign(rctx)
			r.took <- resigned{id, shard, time.Since(start), err}
		}()
		<-ctx.Done()
	}
}

// TestResignInsideWorkReturns: a Work that calls lead.Resign on its way
// out (defer lead.Resign(ctx)) gets its answer at once, whatever ended
// the leadership: a handover to a worker that joined, Run's end, or the
// lease running out; and Run returns. Before, the pool wrote the release
// only after Work had returned while Resign waited for that release:
// neither ever came (mutation resignwaits).
func TestResignInsideWorkReturns(t *testing.T) {
	defer setMutation(t)()
	for _, end := range []string{"handover", "run's end", "lease"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				trace := &resignTrace{took: make(chan resigned, 16)}
				type running struct {
					p      *Pool
					st     *crashStore
					cancel context.CancelFunc
					done   chan error
				}
				start := func(id string) *running {
					r := &running{st: &crashStore{Store: mem}, done: make(chan error, 1)}
					p, err := New(Config{Store: r.st, Prefix: "p/", ID: id, Shards: []string{"a", "b"}, Logger: quiet, Work: trace.work(id)})
					if err != nil {
						t.Fatal(err)
					}
					r.p = p
					ctx, cancel := context.WithCancel(context.Background())
					r.cancel = cancel
					go func() { r.done <- p.Run(ctx) }()
					return r
				}
				w1 := start("w1")
				time.Sleep(2 * testLT)
				if got := w1.p.Leading(); len(got) != 2 {
					t.Fatalf("w1 leads %v after 2 × LeaderTimeout alone; want both shards", got)
				}
				var w2 *running
				switch end {
				case "handover":
					w2 = start("w2")
				case "run's end":
					w1.cancel()
				case "lease":
					w1.st.dead.Store(true)
				}
				select {
				case r := <-trace.took:
					if r.took > testFI {
						t.Errorf("Resign inside %s's Work for %s after the %s took %v; want at once", r.worker, r.shard, end, r.took)
					}
				case <-time.After(2 * resignWaitLimit):
					t.Fatalf("no Work returned within %v of the %s", 2*resignWaitLimit, end)
				}
				if end == "handover" {
					time.Sleep(testLT)
					if a, b := w1.p.Leading(), w2.p.Leading(); len(a) != 1 || len(b) != 1 {
						t.Errorf("after w2 joined: w1 leads %v, w2 leads %v; want one each", a, b)
					}
				}
				for _, r := range []*running{w1, w2} {
					if r == nil {
						continue
					}
					r.cancel()
					select {
					case err := <-r.done:
						if err != nil {
							t.Errorf("Run() = %v; want nil", err)
						}
					case <-time.After(2 * resignWaitLimit):
						t.Fatalf("Run did not return within %v of its context's end", 2*resignWaitLimit)
					}
				}
				for len(trace.took) > 0 {
					if r := <-trace.took; r.took > testLT {
						t.Errorf("Resign inside %s's Work for %s took %v; want at once", r.worker, r.shard, r.took)
					}
				}
			})
		})
	}
}
