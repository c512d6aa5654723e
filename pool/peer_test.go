package pool

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
)

// TestPeerSteadyStateReads checks peer mode's price (docs/pool-protocol.md,
// "Peer mode"): once the shards are spread, each worker makes one PUT per
// FrequentInterval and lists the store and reads the member list once per
// InfrequentInterval (2 × FrequentInterval/InfrequentInterval reads per
// worker per interval), whatever the number of workers; the rest of the
// watch goes to the hub over the network, one request per worker per
// interval.
func TestPeerSteadyStateReads(t *testing.T) {
	for _, tc := range []struct{ workers, shards int }{{10, 1000}, {30, 300}} {
		t.Run(fmt.Sprintf("workers=%d/shards=%d", tc.workers, tc.shards), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := simworld.NewCalmPeerNet()
				g := newGroup(t, 0, tc.shards)
				g.net = net
				for i := range tc.workers {
					g.add(fmt.Sprintf("w%02d", i+1))
				}
				defer g.stop()
				time.Sleep(6*testLT + testFI/3)
				n, w := tc.shards, tc.workers
				if c := g.counts(); !within(c, g.ids(nil), n/w, (n+w-1)/w, n) {
					t.Fatalf("after 6 × LeaderTimeout: %s; want %d shards on each worker", spread(c), n/w)
				}
				const intervals = 48 // 8 InfrequentIntervals
				before, asked := g.calls(), net.Asked("w01:443")
				time.Sleep(intervals * testFI)
				after := g.calls()
				puts := after.puts - before.puts
				reads := after.gets + after.lists - before.gets - before.lists
				hub := net.Asked("w01:443") - asked
				t.Logf("per worker per FrequentInterval: %.2f PUT, %.3f reads (%d GET, %d LIST), %.2f requests to the hub",
					float64(puts)/intervals/float64(w), float64(reads)/intervals/float64(w),
					after.gets-before.gets, after.lists-before.lists, float64(hub)/intervals/float64(w-1))
				if limit := uint64(w * (intervals + 1)); puts > limit {
					t.Errorf("%d PUTs over %d intervals for %d workers; want at most one per worker per interval (%d)", puts, intervals, w, limit)
				}
				// A listing and a member list read per InfrequentInterval
				// (6 intervals), one more of each at a window's edge.
				if limit := uint64(2 * w * (intervals/peerIIFactor + 1)); reads > limit {
					t.Errorf("%d reads over %d intervals for %d workers; want at most 2 per worker per InfrequentInterval (%d)", reads, intervals, w, limit)
				}
				if lo, hi := (w-1)*(intervals-1), (w-1)*(intervals+1); hub < lo || hub > hi { // every tick, store listings' too
					t.Errorf("%d requests to the hub over %d intervals from %d workers; want one per worker per interval (%d to %d)", hub, intervals, w-1, lo, hi)
				}
				g.check(t)
			})
		})
	}
}

// TestPeerCrashTakeoverInstant kills the hub, and a worker that is not the
// hub, of 3 over 30 shards in peer mode at 6 points of the renewal cycle,
// on a store that answers at once and on one whose calls take 10 ms each
// way, and checks the instant at which each of the victim's shards is
// claimed. Every worker asks the hub at the watch's offset after the
// renewal slot (FrequentInterval/16 plus twice the renewals' round trip,
// 4d), the hub answers once every live worker has reported, and the
// answer naming the victim's last renewal ages that sighting from its
// arrival; at the next tick the victim is missing (it did not report, or
// the hub does not answer), the store is listed and shows the same ETag.
// So the claims land FrequentInterval/16 + LeaderTimeout + 7d after the
// slot of the victim's last renewal, as at the frequent pace (9d there:
// a listing's round trip instead of the hub's answer). (A victim killed
// between its renewal and its report, in the first sixteenth of the
// cycle, is found by the store's listing at that tick instead, an eighth
// of an interval later; these phases are after it.)
func TestPeerCrashTakeoverInstant(t *testing.T) {
	for _, d := range []time.Duration{0, 10 * time.Millisecond} {
		for _, victim := range []int{0, 1} {
			for phase := range 6 {
				t.Run(fmt.Sprintf("d=%v/victim=w%d/phase=%d", d, victim+1, phase), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						peerTakeoverInstant(t, d, victim, phase)
					})
				})
			}
		}
	}
}

func peerTakeoverInstant(t *testing.T, d time.Duration, vi, phase int) {
	l := newWriteLog()
	net := simworld.NewCalmPeerNet()
	pp := newPaced(t, 3, 30, testFI, 0, testLT, d, l, net)
	defer pp.stop()
	time.Sleep(4*testLT + time.Duration(phase)*testFI/6 + testFI/12)
	victim := pp.ws[vi]
	owned := victim.p.Leading()
	if len(owned) != 10 {
		t.Fatalf("before the kill %s leads %d shards; want 10", victim.id, len(owned))
	}
	victim.st.dead.Store(true)
	net.Crash(victim.id+":443", nil)
	killed := time.Now()
	time.Sleep(2 * testLT)

	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.renewals[victim.id]
	slot := rs[len(rs)-1].Add(-d)
	if !slot.Equal(slot.Truncate(testFI)) {
		t.Fatalf("%s's last renewal was sent at %v, off the renewal slots", victim.id, slot)
	}
	want := slot.Add(testFI/16 + testLT + 7*d)
	for _, shard := range owned {
		cs := l.claims[shard]
		c := cs[len(cs)-1]
		switch {
		case c.owner == victim.id:
			t.Errorf("shard %s never taken over after %s was killed", shard, victim.id)
		case !c.at.Equal(want):
			t.Errorf("shard %s claimed by %s %v after the slot of %s's last renewal; want exactly %v (FrequentInterval/16 + LeaderTimeout + 7d)",
				shard, c.owner, c.at.Sub(slot), victim.id, want.Sub(slot))
		}
	}
	t.Logf("killed %v after the slot of its last renewal: its shards led again %.3f × LeaderTimeout after the kill",
		killed.Sub(slot), float64(want.Sub(killed))/float64(testLT))
}
