package pool

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/pool/internal/coord"
)

// TestReportWaitStaysBelowThePeerServersWriteTimeout: a report waits for
// its answer while its worker's page is unchanged, 3/4 FrequentInterval by
// default. s3lect.ServePeers cuts a response off after a minute and ten
// seconds, so at FrequentInterval 2 minutes an uncapped wait (90 s) would
// lose every answer and peer mode would read every page. The worker asks
// for at most maxReportWait, and the coordinator answers by then whatever
// a report asks (a peer asking for an hour is capped too).
func TestReportWaitStaysBelowThePeerServersWriteTimeout(t *testing.T) {
	const fi = 2 * time.Minute
	if got := reportWait(fi); got != maxReportWait {
		t.Errorf("reportWait(%v) = %v; want the cap %v", fi, got, maxReportWait)
	}
	if got := reportWait(time.Second); got != 750*time.Millisecond {
		t.Errorf("reportWait(1s) = %v; want 3/4 of it", got)
	}
	for _, asked := range []time.Duration{reportWait(fi), time.Hour} {
		synctest.Test(t, func(t *testing.T) {
			p := &Pool{cfg: Config{FrequentInterval: fi, LeaderTimeout: 3 * fi}, clock: lease.NewClock()}
			e := &era{p: p, c: coord.NewCoordinator(coord.CoordConfig{Shards: []string{"s0"}, FrequentInterval: fi, LeaderTimeout: 3 * fi}, 1),
				parked: map[string]reportReq{}}
			rq := reportReq{r: report{ID: "w1", Session: "e1", Wait: asked.Milliseconds()}, reply: make(chan reportAnswer, 1)}
			start := time.Now()
			e.answer(rq)
			for {
				select {
				case a := <-rq.reply:
					if got := time.Since(start); got != maxReportWait || a.Term != 1 {
						t.Errorf("a report asking to wait %v was answered after %v (term %d); want after %v, term 1", asked, got, a.Term, maxReportWait)
					}
					return
				case <-e.flush():
				}
			}
		})
	}
}
