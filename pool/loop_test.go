package pool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

func newTestPool(t *testing.T, id string, shards []string, fi, lt time.Duration) *Pool {
	t.Helper()
	p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: id, Shards: shards, Logger: quiet,
		FrequentInterval: fi, LeaderTimeout: lt,
		Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOrphanWaitIsTheLongestLiveLease: a shard no live session lists is
// claimed whatever the share only after the longest lease among the live
// workers, not the worker's own alone (the simulation's seed 3451: a
// worker with a 0.6 s lease took back, every second, a shard it had
// handed over to one with a 1 s FrequentInterval).
func TestOrphanWaitIsTheLongestLiveLease(t *testing.T) {
	p := newTestPool(t, "w3", []string{"s"}, 200*time.Millisecond, 600*time.Millisecond)
	s := &p.st
	s.peers["w5"] = &peerView{read: true, ok: true, rec: seenRecord{TTL: 5420}}
	s.peers["w7"] = &peerView{read: true, ok: true, rec: seenRecord{TTL: 9000}}
	if got, want := s.orphanWait(view{live: []string{"w3", "w5"}}), 5420*time.Millisecond; got != want {
		t.Errorf("orphanWait with w5 (ttl 5.42s) live = %v; want %v", got, want)
	}
	if got, want := s.orphanWait(view{live: []string{"w3"}}), 600*time.Millisecond; got != want {
		t.Errorf("orphanWait alone = %v; want its own LeaderTimeout %v", got, want)
	}
}

// TestSurvivorsShareTheFreeShardsOut: workers with the same view of the
// pool pick disjoint runs of the unowned shards, each as many as it
// needs, so that after a death none races another for a shard.
func TestSurvivorsShareTheFreeShardsOut(t *testing.T) {
	var shards []string
	for i := range 17 {
		shards = append(shards, fmt.Sprintf("s%02d", i))
	}
	live := []string{"w1", "w2", "w3"}
	// 17 shards over 3 workers: targets 6, 6, 5. Each holds 3 (listed in
	// its session), so 8 are free: the deficits are 3, 3 and 2.
	owned := map[string][]string{"w1": shards[0:3], "w2": shards[3:6], "w3": shards[6:9]}
	taken := map[string]string{}
	for _, me := range live {
		p := newTestPool(t, me, shards, testFI, testLT)
		s := &p.st
		v := view{counts: map[string]int{}, listed: map[string]string{}, targets: map[string]int{"w1": 6, "w2": 6, "w3": 5}, live: live}
		for _, id := range live {
			v.counts[id] = 3
			for _, name := range owned[id] {
				if id == me {
					s.mine[name] = &lead{shard: name}
				} else {
					v.listed[name] = id
				}
			}
		}
		need := v.targets[me] - v.counts[me]
		want, limit := s.wanted(v, need, time.Now())
		if limit != need || len(want) < need {
			t.Fatalf("%s: wanted %v with limit %d; want at least %d shards, limit %d", me, want, limit, need, need)
		}
		for _, name := range want[:need] {
			if slices.Contains(owned["w1"], name) || slices.Contains(owned["w2"], name) || slices.Contains(owned["w3"], name) {
				t.Errorf("%s wants %s, which a live worker owns", me, name)
			}
			if other, ok := taken[name]; ok {
				t.Errorf("%s and %s both claim %s first", other, me, name)
			}
			taken[name] = me
		}
	}
	if len(taken) != 8 {
		t.Errorf("the workers' first picks cover %d of the 8 free shards: %v", len(taken), taken)
	}
}
