package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestMarginCoversClockRates: an owner whose clock runs 5% slow is cut
// off from the store; a worker whose clock runs 5% fast takes its shard
// over as soon as the takeover rule allows. The owner's leadership has
// ended by then: its lease runs LeaderTimeout minus a tenth by its own
// clock (0.947 × LeaderTimeout of real time), the taker waits
// LeaderTimeout by its own (0.952 ×). Without the margin the lease runs
// 1.053 × LeaderTimeout of real time, past the takeover (mutation
// margin0).
func TestMarginCoversClockRates(t *testing.T) {
	defer setMutation(t)()
	for phase := range 4 {
		synctest.Test(t, func(t *testing.T) {
			mem := memstore.New()
			var ledger simworld.Ledger
			start := func(id string, rate float64) (*crashStore, func()) {
				st := &crashStore{Store: mem}
				p, err := New(Config{Store: st, Prefix: "p/", ID: id, Shards: []string{"x"}, Logger: quiet,
					Work: func(ctx context.Context, _ string, l *s3lect.Leadership) {
						tn := ledger.Start("x", id, l.Term())
						<-ctx.Done()
						ledger.End(tn)
					}})
				if err != nil {
					t.Fatal(err)
				}
				p.clock.Rate = rate
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); p.Run(ctx) }()
				return st, func() { cancel(); <-done }
			}
			owner, stopOwner := start("w1", 0.95) // the lower ID: it keeps the shard while both live
			defer stopOwner()
			time.Sleep(2 * testLT)
			_, stopTaker := start("w2", 1.05)
			defer stopTaker()
			time.Sleep(testLT + time.Duration(phase)*testFI/4)
			owner.cut.Store(true) // its calls hang: it runs on until its own lease ends
			time.Sleep(3 * testLT)
			terms := ledger.Snapshot()["x"]
			if len(terms) != 2 || terms[0].Node != "w1" || terms[1].Node != "w2" {
				t.Fatalf("phase %d: leaderships %+v; want w1's, then w2's", phase, terms)
			}
			t.Logf("phase %d: from the end of w1's leadership to the start of w2's: %v", phase, terms[1].Start.Sub(terms[0].End))
			if terms[0].End.After(terms[1].Start) {
				t.Errorf("phase %d: w1's leadership ended %v after w2's began", phase, terms[0].End.Sub(terms[1].Start))
			}
		})
	}
}
