package pool

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// claimer is a worker whose heartbeat runs but whose loop a test drives
// by hand, calling claim at the moments it chooses. It returns the
// worker, the store and the live session's ID; stop ends the heartbeat
// and the leaderships won.
func claimer(t *testing.T, id string, members []string, shards ...string) (p *Pool, mem *memstore.Store, sess string, stop func()) {
	t.Helper()
	mem = memstore.New()
	p, err := New(Config{Store: &spyStore{Store: mem, id: id}, Prefix: "p/", ID: id, Shards: shards, Logger: quiet,
		Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
	if err != nil {
		t.Fatal(err)
	}
	p.leads = newLeaderships(p.clock)
	p.st.members = members
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.heartbeat(ctx) }()
	synctest.Wait()
	sess, _ = p.sess.snapshot()
	if sess == "" {
		t.Fatal("the claimer's session did not open")
	}
	// The member list names the claimer's session, as its tick's join
	// would have written it (a claim writes nothing while the list does
	// not: claimMembers).
	mem.Set("p/members.json", encode(membersRecord{Pool: formatVersion, Workers: members, Sessions: map[string]string{id: sess}}))
	return p, mem, sess, func() {
		for _, ld := range p.st.mine {
			ld.c.End(s3lect.ErrResigned)
			ld.c.Exit(nil)
		}
		p.works.Wait()
		cancel()
		<-done
	}
}

// spyStore checks, at every write of a shard record by worker id, that
// the worker's session object lists the shard as being claimed: the
// intent lands before the claim is sent.
type spyStore struct {
	*memstore.Store
	id       string
	mu       sync.Mutex
	unlisted []string // shards claimed without the intent listed
}

func (s *spyStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if shard, ok := strings.CutPrefix(key, "p/shards/"); ok {
		shard = strings.TrimSuffix(shard, ".json")
		d, _, err := s.Store.Get(ctx, "p/sessions/"+s.id+".json")
		rec, perr := parseSession(d)
		if _, listed := rec.Claiming[shard]; err != nil || perr != nil || !listed {
			s.mu.Lock()
			s.unlisted = append(s.unlisted, shard)
			s.mu.Unlock()
		}
	}
	return s.Store.PutIfMatch(ctx, key, data, etag)
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
		p, mem, sess, stop := claimer(t, "w3", []string{"w1", "w2", "w3"}, "s")
		defer stop()
		s := &p.st
		ctx := t.Context()
		set := func(key string, v any) { mem.Set("p/"+key, encode(v)) }
		claim := func(when string, want int) {
			t.Helper()
			if won := s.claim(ctx, []string{"s"}, 1, sess); won != want {
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
