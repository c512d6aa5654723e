package s3lect

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
)

// The safety simulation's variants of issue 43: hosts that are suspended
// (suspender) and operators who restore earlier versions of the lockfile
// and its term object (restorer).

func init() {
	simVariants = append(simVariants,
		simVariant{name: "suspender", suspend: true},
	)
}

// simSleeps keeps each node incarnation's suspends: while one lasts its
// monotonic clock stands still and its calls wait (simworld.Store.Pause);
// real time, which its wall clock and its local clock (lease.Clock, which
// counts suspends) follow, goes on.
type simSleeps struct {
	mu sync.Mutex
	m  map[[2]int][]simSleep // by node and incarnation
}

type simSleep struct {
	at time.Time
	d  time.Duration
}

// host returns node i's incarnation's lease.Clock.Slept: how much real
// time its suspends have taken so far.
func (s *simSleeps) host(i, incarnation int) func() time.Duration {
	return func() time.Duration {
		s.mu.Lock()
		defer s.mu.Unlock()
		var d time.Duration
		now := time.Now()
		for _, z := range s.m[[2]int{i, incarnation}] {
			if now.After(z.at) {
				d += min(now.Sub(z.at), z.d)
			}
		}
		return d
	}
}

// suspend suspends node i's incarnation now for d.
func (s *simSleeps) suspend(i, incarnation int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[2]int][]simSleep{}
	}
	k := [2]int{i, incarnation}
	s.m[k] = append(s.m[k], simSleep{time.Now(), d})
}

// addSuspends schedules 1 to 4 suspends of up to two LeaderTimeouts,
// most of the leader of the moment, some right after a renewal, all over
// before the faults stop.
func addSuspends(r *rand.Rand, p simParams, events *simworld.Schedule, counts *simworld.Tally, sleeps *simSleeps,
	node func(i int) (*simworld.Store, int), leaderOr func(int) int) {
	for range 1 + r.IntN(4) {
		i := r.IntN(p.nodes)
		targetLeader := r.IntN(3) > 0
		cutAfter := r.IntN(3) == 0 // cut off the store right after its next write lands, as in the issue
		at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
		d := min(time.Duration(r.Int64N(int64(2*p.maxLT))), p.faultsFor-at-time.Second)
		var cut *simworld.Store
		events.Add(at, func() {
			if targetLeader {
				i = leaderOr(i)
			}
			st, inc := node(i)
			if st.Crashed() {
				return
			}
			counts.Add("suspend")
			sleeps.suspend(i, inc, d)
			st.Pause(d)
			if cutAfter {
				cut = st
				st.Partition(true)
			}
		})
		events.Add(at+d+p.maxLT, func() {
			if cut != nil {
				cut.Heal()
			}
		})
	}
}
