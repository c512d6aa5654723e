package pool

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestDeadMembersLeaveTheList: of 4 workers, one is killed and one
// leaves (Run's context ends); within 2 × LeaderTimeout the member list
// names only the two left, so that they stop reading the others' session
// objects. Before, the list never shrank: every worker read every dead
// worker's session for ever (mutation keepmembers).
func TestDeadMembersLeaveTheList(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 4, 8)
		defer g.stop()
		time.Sleep(2 * testLT)
		g.workers[3].st.dead.Store(true)
		g.workers[2].cancel()
		<-g.workers[2].done
		time.Sleep(2 * testLT)
		data, _, err := g.mem.Get(context.Background(), "pool/members.json")
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseMembers(data)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"w1", "w2"}; !slices.Equal(m.Workers, want) {
			t.Errorf("2 × LeaderTimeout after w4 was killed and w3 left, the member list names %v; want %v", m.Workers, want)
		}
		before := g.workers[0].p.Stats().Gets + g.workers[1].p.Stats().Gets
		const intervals = 10
		time.Sleep(intervals * testFI)
		gets := g.workers[0].p.Stats().Gets + g.workers[1].p.Stats().Gets - before
		t.Logf("the two survivors: %.1f GET per FrequentInterval", float64(gets)/intervals)
		if limit := uint64(2 * 2 * (intervals + 1)); gets > limit {
			t.Errorf("the two survivors made %d GETs in %d intervals; want at most %d (the member list and one session each per interval)", gets, intervals, limit)
		}
		g.check(t)
	})
}
