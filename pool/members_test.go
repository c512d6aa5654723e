package pool

import (
	"context"
	"fmt"
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

// TestARestartCostsNoLooks: a worker of 10 (100 shards: the pruner with
// the lowest ID, a middle one, the last) killed and a new
// process of its ID started at once writes its new session into the
// member list; the others read the list, but it names the same members,
// so none of them looks (reads every session object): over the 3 leases
// after the restart the 9 others look 0 times and their GETs stay at the
// steady state's (a reviewer measured, at 40 workers, 117 looks and 14
// times the steady GETs with every change of the list's ETag a reason to
// look; -sim.mutate=restartlooks). The restarted worker's shards are led
// again all the same.
func TestARestartCostsNoLooks(t *testing.T) {
	defer setMutation(t)()
	const workers = 10
	for _, victim := range []int{0, 4, workers - 1} { // the pruner (lowest ID), a middle one, the last
		t.Run(fmt.Sprintf("victim=w%d", victim+1), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, workers, 10*workers)
				defer g.stop()
				g.settle(t)
				others := func() (gets, looks uint64) {
					for i, w := range g.workers[:workers] {
						if i != victim {
							s := w.p.Stats()
							gets, looks = gets+s.Gets, looks+s.Looks
						}
					}
					return gets, looks
				}
				g0, l0 := others()
				time.Sleep(3 * testLT)
				g1, l1 := others()
				old := g.workers[victim]
				old.st.dead.Store(true)
				g.add(old.id)
				time.Sleep(3 * testLT)
				g2, l2 := others()
				t.Logf("the 9 others over 3 leases: %d GETs and %d looks before the restart, %d and %d after", g1-g0, l1-l0, g2-g1, l2-l1)
				if l2 != l1 || g2-g1 > (g1-g0)+uint64(workers) {
					t.Errorf("after a restart the others looked %d times and made %d GETs in 3 leases (%d before); want no look and the steady GETs (one more each: the list)", l2-l1, g2-g1, g1-g0)
				}
				data, _, err := g.mem.Get(t.Context(), "pool/members.json")
				if err != nil {
					t.Fatal(err)
				}
				if m, err := parseMembers(data); err != nil || m.Sessions[old.id] == "" || m.Sessions[old.id] != g.workers[len(g.workers)-1].p.st.listedSession {
					t.Errorf("the member list %s; want it to name the new process's session for %s", data, old.id)
				}
				if c := g.counts(); !within(c, g.ids(old), 10, 10, 10*workers) {
					t.Errorf("3 leases after the restart: %s; want 10 each", spread(c))
				}
				g.check(t)
			})
		})
	}
}
