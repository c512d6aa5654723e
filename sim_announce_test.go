package s3lect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
)

// The safety simulation's variants for announced releases
// (docs/protocol.md, 11.4): holders announce their release, drain, and
// resign or transfer, while the faults of the base variants (partitions,
// crashes, errors, latency, stalls; in peer mode, a peer transport that
// fails and answers stale) strike at every phase of it: before the first
// announcing renewal, while followers read it, at the announced moment,
// during the drain and the watch, and at the release.
var simAnnounceVariants = []simVariant{
	{name: "announce", announce: true},
	{name: "announcepeer", announce: true, peer: true},
	{name: "announcemixed", announce: true, mixed: true},
}

// TestSafetySimulationAnnounce runs the announced-release variants, as
// TestSafetySimulation runs the others (-run TestSafetySimulation runs
// both). -sim.mutate=anntakeover or annrelease (with -tags
// s3lect_mutations) breaks a rule of section 11.4, and seeds fail.
func TestSafetySimulationAnnounce(t *testing.T) {
	defer setMutation(t)()
	for _, v := range simAnnounceVariants {
		t.Run(v.name, func(t *testing.T) {
			simworld.Seeds(t, v.name, func(t *testing.T, seed int64) map[string]int { return simulate(t, seed, v) })
		})
	}
}

// simAnnouncedEnd is a holder's planned move: it announces its release
// (to a named member, one time in three, perhaps one that runs nowhere),
// sometimes under a deadline that cuts Announce short (a grace period),
// then stops its work, which takes a drain of up to a LeaderTimeout and a
// half, and resigns or transfers. Its work runs until the drain ends, its
// context's end notwithstanding, bounded only by its lease's end: a
// release that came before the holder was done would let a successor
// start beside it.
func simAnnouncedEnd(ctx context.Context, l *Leadership, hr *rand.Rand, p simParams, ledger *simworld.Ledger, iv *simworld.Tenure, counts *simworld.Tally) {
	to := ""
	if hr.IntN(3) == 0 {
		to = fmt.Sprintf("n%d", hr.IntN(p.nodes+1)) // n<nodes> runs nowhere
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if hr.IntN(4) == 0 {
		actx, cancel = context.WithTimeout(ctx, time.Duration(hr.Int64N(int64(2*p.ii))))
	}
	err := l.Announce(actx, to)
	cancel()
	switch {
	case err == nil:
		counts.Add("announced")
	case actx.Err() != nil && ctx.Err() == nil:
		counts.Add("announce cut short")
	default:
		counts.Add("announce ended otherwise")
	}
	// The drain. If the leadership ends meanwhile, the work still stops
	// by the lease's end at the latest, as it stood then.
	drain := time.NewTimer(time.Duration(hr.Int64N(int64(p.lt * 3 / 2))))
	var leaseEnd time.Time
	select {
	case <-drain.C:
	case <-l.Context().Done():
		leaseEnd = time.Now().Add(l.e.clock.RealUntil(l.e.clock.Base.Add(time.Duration(l.deadline.Load()))))
		<-drain.C
	}
	end := time.Now()
	if !leaseEnd.IsZero() && leaseEnd.Before(end) {
		end = leaseEnd
	}
	ledger.Extend(iv, end)
	if to != "" {
		l.Transfer(ctx, to)
	} else {
		l.Resign(ctx)
	}
}
