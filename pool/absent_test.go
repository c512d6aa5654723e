package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/shardlead"
	"github.com/s3lect/s3lect/store/memstore"
)

// claimer is a worker's loop state driven by hand: a live session "me"
// and the store, so that a test calls claim at the moments it chooses.
func claimer(t *testing.T, id string, members []string, shards ...string) (*Pool, *memstore.Store) {
	t.Helper()
	mem := memstore.New()
	p, err := New(Config{Store: mem, Prefix: "p/", ID: id, Shards: shards, Logger: quiet,
		Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
	if err != nil {
		t.Fatal(err)
	}
	p.leads = shardlead.NewFactory(p.base, p.rate)
	p.sess.id, p.sess.deadline = "me", time.Now().Add(1000*testLT)
	p.st.members = members
	return p, mem
}

// stopClaimer ends the leaderships a claimer won and waits for their Work.
func stopClaimer(p *Pool) {
	for _, ld := range p.st.mine {
		ld.c.End(s3lect.ErrResigned)
		ld.c.Exit(nil)
	}
	p.works.Wait()
}

// TestAbsentSessionIsNotAged: a shard's owner w2 took it over, renewed its
// session and then its session object was deleted, while w3 had seen the
// shard's previous owner's session object absent earlier. w3 must not
// take the shard over before w2's lease can have run out. Before, w3
// measured w2's absence from its sight of w1's (the absence was kept per
// shard, across a change of the record), and took the shard at once
// (mutation absentaged). Now an absent object is buried under a
// tombstone, and the tombstone ages like any other session's record.
func TestAbsentSessionIsNotAged(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		p, mem := claimer(t, "w3", []string{"w1", "w2", "w3"}, "s")
		defer stopClaimer(p)
		s := &p.st
		ctx := t.Context()
		set := func(key string, v any) { mem.Set("p/"+key, encode(v)) }
		claim := func(when string, want int) {
			t.Helper()
			if won := s.claim(ctx, []string{"s"}, 1, "me"); won != want {
				t.Fatalf("%s: claim won %d shards; want %d", when, won, want)
			}
		}

		set("shards/s.json", shardRecord{Pool: formatVersion, Shard: "s", Owner: "w1", Session: "S1", Term: 1, TTL: ttlMillis(testLT)})
		claim("w1's session object absent, first seen", 0)

		time.Sleep(testLT / 2)
		// w2 took the shard over and renewed its session listing it; then
		// its session object was deleted. Its lease runs 0.9 ×
		// LeaderTimeout from that renewal.
		set("shards/s.json", shardRecord{Pool: formatVersion, Shard: "s", Owner: "w2", Session: "S2", Term: 2, TTL: ttlMillis(testLT)})
		mem.Delete("p/sessions/w2.json")
		renewed := time.Now()

		time.Sleep(testLT * 6 / 10)
		claim("0.6 × LeaderTimeout after w2's last renewal, its object absent", 0)
		time.Sleep(testLT / 2)
		claim("w2's object buried, the tombstone first seen now", 0)
		time.Sleep(testLT)
		claim("LeaderTimeout after the tombstone's first sight", 1)
		if got := time.Since(renewed); got < testLT {
			t.Errorf("took the shard %v after w2's last renewal; want at least LeaderTimeout", got)
		}
	})
}
