package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

// TestSpreadOnASlowStore: 59 workers start at once on a store where
// every call takes 50 to 450 ms at random, so that a claim (the records,
// the intent, the member list, every session object) lasts a second or
// more, as it did with 100 workers on MinIO on two cores; then a 60th
// joins that cannot claim for 4 leases (its reads of shard records
// fail). The pool must spread after the start and after the joiner can
// claim again.
//
// Two rules keep it from stopping short, as 100 workers on MinIO did
// at 999 of 1,000 shards for minutes:
//
//   - each claim round of a look takes a view of its own (mutation
//     stalerounds: every round took the look's first view, and a worker
//     below its share spent its rounds on shards others had claimed
//     since, each set aside for a lease, while the shards still unowned
//     became orphans);
//   - an orphan has one worker at its share that takes it up first, and
//     of two workers claiming one shard, the one below its share goes
//     first and one taking up an orphan yields it (mutation orphanherd:
//     every worker at its share took up the first orphan of the shared
//     order at the same look, and each found the others' intents at
//     every try, the intent of the worker below its share included).
func TestSpreadOnASlowStore(t *testing.T) {
	defer setMutation(t)()
	const w, per, deafFor = 60, 10, 4 * testLT
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 0, w*per)
		deaf := &noRecords{}
		g.wrap = func(id string, st store.Store) store.Store {
			st = jittered{st, 50 * time.Millisecond, 400 * time.Millisecond}
			if id == "w031" {
				deaf.deafen(deafFor)
				deaf.Store = st
				return deaf
			}
			return st
		}
		logs := map[string]*logRing{}
		g.logger = func(id string) *slog.Logger {
			logs[id] = &logRing{}
			return slog.New(slog.NewTextHandler(logs[id], &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		for i := range w {
			if i+1 != 31 {
				g.add(fmt.Sprintf("w%03d", i+1))
			}
		}
		defer g.stop()
		spreadBy := func(d time.Duration, what string) time.Duration {
			start := time.Now()
			for !within(g.counts(), g.ids(nil), per-1, per+1, len(g.shards)) {
				if time.Since(start) > d {
					for id, n := range g.counts() {
						if n < per {
							t.Logf("%s holds %d; its last lines:\n%s", id, n, logs[id].String())
						}
					}
					t.Fatalf("%v after %s: %s; want every shard led, %d ± 1 each", d, what, spread(g.counts()), per)
				}
				time.Sleep(testLT / 20)
			}
			return time.Since(start)
		}
		// The pool spreads over 59 workers first (10 or 11 shards each);
		// then w031 joins, and for deafFor cannot take what is handed over
		// to it.
		took := spreadBy(8*testLT, "the start")
		t.Logf("spread %.2f × LeaderTimeout after the start", float64(took)/float64(testLT))
		g.add("w031")
		time.Sleep(deafFor)
		t.Logf("when w031 can claim again: %s", spread(g.counts()))
		took = spreadBy(4*testLT, "w031 could claim again")
		t.Logf("spread %.2f × LeaderTimeout after w031 could claim again", float64(took)/float64(testLT))
		g.check(t)
	})
}

// logRing keeps the last lines written to it.
type logRing struct {
	mu    sync.Mutex
	lines []string
	keep  int // lines kept; 200 when 0
}

func (r *logRing) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, string(b))
	keep := cmp.Or(r.keep, 200)
	if len(r.lines) > 2*keep {
		r.lines = slices.Clone(r.lines[len(r.lines)-keep:])
	}
	return len(b), nil
}

func (r *logRing) String() string { return strings.Join(r.all(), "") }

// all returns the kept lines.
func (r *logRing) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines[max(0, len(r.lines)-cmp.Or(r.keep, 200)):])
}

// jittered delays every call of a store by d plus up to spread at random.
type jittered struct {
	store.Store
	d, spread time.Duration
}

func (s jittered) wait() { time.Sleep(s.d + rand.N(s.spread)) }

func (s jittered) Get(ctx context.Context, k string) ([]byte, string, error) {
	s.wait()
	return s.Store.Get(ctx, k)
}

func (s jittered) PutIfMatch(ctx context.Context, k string, b []byte, etag string) (string, error) {
	s.wait()
	return s.Store.PutIfMatch(ctx, k, b, etag)
}

func (s jittered) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.wait()
	return s.Store.(store.Lister).List(ctx, prefix)
}

// noRecords fails every read of a shard record for a while (deafen): a
// worker that cannot claim.
type noRecords struct {
	store.Store
	mu    sync.Mutex
	until time.Time
}

func (s *noRecords) deafen(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.until = time.Now().Add(d)
}

func (s *noRecords) Get(ctx context.Context, k string) ([]byte, string, error) {
	s.mu.Lock()
	deaf := time.Now().Before(s.until)
	s.mu.Unlock()
	if deaf && strings.Contains(k, "/shards/") {
		return nil, "", errors.New("noRecords: shard records cannot be read")
	}
	return s.Store.Get(ctx, k)
}

func (s *noRecords) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	return s.Store.(store.Lister).List(ctx, prefix)
}
