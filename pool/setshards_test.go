package pool

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestShardsAddedAndRemovedWhileThePoolRuns: SetShards on every worker
// adds shards and removes others without a restart: the new ones are
// led, the removed ones' Work ends, and the spread is even over what
// remains.
func TestShardsAddedAndRemovedWhileThePoolRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 3, 12)
		live := []int{0, 1, 2}
		time.Sleep(10 * time.Second)
		f.checkSpread(live)
		set := func(shards []string) {
			f.shards = shards
			for _, p := range f.pools {
				p.SetShards(shards)
			}
		}
		more := append([]string(nil), f.shards...)
		for i := 12; i < 18; i++ {
			more = append(more, fmt.Sprintf("shard-%03d", i))
		}
		// Each change is checked two LeaderTimeouts after it: the
		// coordinator's next planning, a revocation's drain and the
		// takers' page reads take up to about one, and the goroutines'
		// order within an instant (select among ready cases) differs
		// from run to run (a loaded CI run saw one shard unled at 3 s).
		set(more)
		time.Sleep(6 * time.Second)
		f.checkSpread(live)
		removed := more[:9]
		set(more[9:])
		time.Sleep(6 * time.Second)
		f.checkSpread(live)
		by, _ := f.led(live)
		for _, s := range removed {
			if by[s] != 0 {
				t.Errorf("shard %s, removed, is still led by %d workers", s, by[s])
			}
		}
		for _, i := range live {
			f.stop(i)
		}
	})
}
