package pool

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// writeLog records, in virtual time, when each write through it landed:
// the session renewals of every worker and the claims of shard records.
type writeLog struct {
	mu       sync.Mutex
	renewals map[string][]time.Time // worker -> its session writes that landed
	lists    map[string][]time.Time // worker -> the returns of its listings
	claims   map[string][]claimSeen // shard -> the records written naming an owner
}

func newWriteLog() *writeLog {
	return &writeLog{renewals: map[string][]time.Time{}, lists: map[string][]time.Time{}, claims: map[string][]claimSeen{}}
}

type claimSeen struct {
	owner string
	at    time.Time
}

// logged is one worker's store, its writes recorded in l, every call
// taking d (virtual time) to reach the store and d again to return.
type logged struct {
	store.Store
	l  *writeLog
	id string
	d  time.Duration
}

func (s logged) Get(ctx context.Context, key string) ([]byte, string, error) {
	time.Sleep(s.d)
	defer time.Sleep(s.d)
	return s.Store.Get(ctx, key)
}

func (s logged) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	time.Sleep(s.d)
	defer time.Sleep(s.d)
	es, err := s.Store.(store.Lister).List(ctx, prefix)
	if err == nil {
		s.l.mu.Lock()
		s.l.lists[s.id] = append(s.l.lists[s.id], time.Now().Add(s.d))
		s.l.mu.Unlock()
	}
	return es, err
}

func (s logged) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	time.Sleep(s.d)
	defer time.Sleep(s.d)
	tag, err := s.Store.PutIfMatch(ctx, key, data, etag)
	if err != nil {
		return tag, err
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	switch {
	case strings.HasSuffix(key, "sessions/"+s.id+".json"):
		s.l.renewals[s.id] = append(s.l.renewals[s.id], time.Now())
	case strings.Contains(key, "/shards/"):
		if rec, err := parseShard(data); err == nil && rec.Owner != "" {
			s.l.claims[rec.Shard] = append(s.l.claims[rec.Shard], claimSeen{rec.Owner, time.Now()})
		}
	}
	return tag, nil
}

// paced is a pool of workers over shards on one memstore, with the
// given intervals, each through a crashStore (to kill it) and the log,
// every call delayed d each way.
type paced struct {
	t          *testing.T
	mem        store.Store
	names      []string
	fi, ii, lt time.Duration
	d          time.Duration
	l          *writeLog
	ws         []*worker
	net        *simworld.PeerNet // set: the workers run in peer mode over it, each at "<ID>:443"
}

func pacedPool(t *testing.T, n, shards int, fi, ii, lt, d time.Duration, l *writeLog) (ws []*worker, stop func()) {
	t.Helper()
	pp := newPaced(t, n, shards, fi, ii, lt, d, l, nil)
	return pp.ws, pp.stop
}

// newPaced is pacedPool, in peer mode over net when net is set.
func newPaced(t *testing.T, n, shards int, fi, ii, lt, d time.Duration, l *writeLog, net *simworld.PeerNet) *paced {
	t.Helper()
	pp := &paced{t: t, mem: memstore.New(), fi: fi, ii: ii, lt: lt, d: d, l: l, net: net}
	for i := range shards {
		pp.names = append(pp.names, fmt.Sprintf("s%02d", i))
	}
	for i := range n {
		pp.add(fmt.Sprintf("w%d", i+1))
	}
	return pp
}

// add starts a worker.
func (pp *paced) add(id string) *worker {
	pp.t.Helper()
	w := &worker{id: id, st: &crashStore{Store: pp.mem}, done: make(chan struct{})}
	cfg := Config{Store: logged{w.st, pp.l, id, pp.d}, Prefix: "pool/", ID: id, Shards: pp.names, Logger: quiet,
		FrequentInterval: pp.fi, InfrequentInterval: pp.ii, LeaderTimeout: pp.lt,
		Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }}
	if pp.net != nil {
		cfg.PeerMode, cfg.ServerAddr, cfg.PeerClient = true, id+":443", &http.Client{Transport: pp.net}
	}
	p, err := New(cfg)
	if err != nil {
		pp.t.Fatalf("New(%s) error = %v", id, err)
	}
	if pp.net != nil {
		pp.net.Add(cfg.ServerAddr, PeerHandler(p))
	}
	w.p = p
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		p.Run(ctx)
	}()
	pp.ws = append(pp.ws, w)
	return w
}

// stop ends every worker and waits for them.
func (pp *paced) stop() {
	for _, w := range pp.ws {
		w.cancel()
	}
	for _, w := range pp.ws {
		<-w.done
	}
}

// TestCrashTakeoverInstant kills a worker of 3 over 30 shards at 6 points
// of its renewal cycle, with a LeaderTimeout that is a multiple of
// FrequentInterval (the defaults) and one that is not, on a store that
// answers at once and on one whose calls take d = 10 ms each way, and
// checks the exact virtual instant at which each of its shards is claimed
// by a survivor. The survivors list the sessions a sixteenth of
// FrequentInterval plus twice the renewals' round trip (4d) after the
// renewal slot (watchOffset); the listing that first shows the victim's
// last renewal returns 2d later, at p; the takeover rule waits
// LeaderTimeout from p; the look that claims began ahead of that
// instant, read the member list after its intent, and waited for the
// instant (lookAhead) to read the sessions (2d), and the claim lands d
// later. So the claims land exactly
// FrequentInterval/16 + LeaderTimeout + 9d after the slot of the
// victim's last renewal: not an instant sooner (the rule), and not a tick
// or a look's reads later.
func TestCrashTakeoverInstant(t *testing.T) {
	for _, d := range []time.Duration{0, 10 * time.Millisecond} {
		for _, lt := range []time.Duration{testLT, 13 * time.Second} {
			for phase := range 6 {
				t.Run(fmt.Sprintf("d=%v/lt=%v/phase=%d", d, lt, phase), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						crashTakeoverInstant(t, d, lt, phase)
					})
				})
			}
		}
	}
}

func crashTakeoverInstant(t *testing.T, d, lt time.Duration, phase int) {
	takeoverInstant(t, d, lt, phase, nil, 1, 9)
}

// takeoverInstant runs 3 workers over 30 shards (in peer mode over net
// when set), kills worker vi at the given phase of its cycle (its store
// calls fail; in peer mode its address refuses too), and checks that
// each of its shards is claimed exactly FrequentInterval/16 + lt +
// delays × d after the slot of its last renewal.
func takeoverInstant(t *testing.T, d, lt time.Duration, phase int, net *simworld.PeerNet, vi, delays int) {
	l := newWriteLog()
	pp := newPaced(t, 3, 30, testFI, 0, lt, d, l, net)
	defer pp.stop()
	// Steady: every renewal on its slot, none early.
	time.Sleep(4*lt + time.Duration(phase)*testFI/6 + testFI/12)
	victim := pp.ws[vi]
	owned := victim.p.Leading()
	if len(owned) != 10 {
		t.Fatalf("before the kill %s leads %d shards; want 10", victim.id, len(owned))
	}
	victim.st.dead.Store(true)
	if net != nil {
		net.Crash(victim.id+":443", nil)
	}
	killed := time.Now()
	time.Sleep(2 * lt)

	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.renewals[victim.id]
	slot := rs[len(rs)-1].Add(-d) // sent then, on the slot
	if !slot.Equal(slot.Truncate(testFI)) {
		t.Fatalf("%s's last renewal was sent at %v, off the renewal slots", victim.id, slot)
	}
	want := slot.Add(testFI/16 + lt + time.Duration(delays)*d)
	for _, shard := range owned {
		cs := l.claims[shard]
		c := cs[len(cs)-1]
		switch {
		case c.owner == victim.id:
			t.Errorf("shard %s never taken over after %s was killed", shard, victim.id)
		case !c.at.Equal(want):
			t.Errorf("shard %s claimed by %s %v after the slot of %s's last renewal; want exactly %v (FrequentInterval/16 + LeaderTimeout + %dd)",
				shard, c.owner, c.at.Sub(slot), victim.id, want.Sub(slot), delays)
		}
	}
	t.Logf("killed %v after the slot of its last renewal: its shards led again %.3f × LeaderTimeout after the kill",
		killed.Sub(slot), float64(want.Sub(killed))/float64(lt))
}

// TestInfrequentWatch runs 3 workers over 30 shards with an
// InfrequentInterval of 10 s and of 30 s (FrequentInterval 5 s,
// LeaderTimeout 15 s) and checks what the dual interval promises:
//
//   - settled, each worker reads 2 × FrequentInterval/InfrequentInterval
//     times per FrequentInterval (a listing and a member list read per
//     InfrequentInterval) and renews every FrequentInterval;
//   - a killed worker's shards are claimed exactly when the takeover rule
//     first allows, counted from each survivor's first listing of its last
//     renewal (at t): with InfrequentInterval below LeaderTimeout, the
//     next listing (t + 10 s) finds the session unchanged, the watch goes
//     back to every FrequentInterval and the claims land at t +
//     LeaderTimeout; with 30 s, they land at that next listing, t + 30 s
//     (past the lease). Either way within InfrequentInterval +
//     max(InfrequentInterval, LeaderTimeout) of the last renewal;
//   - the survivors, which list at the same moments (the wall clock's
//     multiples of InfrequentInterval), claim at one instant;
//   - the survivors settle again and slow down again; a fourth worker
//     that joins gets its share within InfrequentInterval + 2 ×
//     LeaderTimeout.
func TestInfrequentWatch(t *testing.T) {
	for _, ii := range []time.Duration{10 * time.Second, 30 * time.Second} {
		for phase := range 3 {
			t.Run(fmt.Sprintf("ii=%v/phase=%d", ii, phase), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { infrequentWatch(t, ii, phase) })
			})
		}
	}
}

func infrequentWatch(t *testing.T, ii time.Duration, phase int) {
	l := newWriteLog()
	pp := &paced{t: t, mem: memstore.New(), fi: testFI, ii: ii, lt: testLT, l: l}
	for i := range 30 {
		pp.names = append(pp.names, fmt.Sprintf("s%02d", i))
	}
	for _, id := range []string{"w1", "w2", "w3"} {
		pp.add(id)
	}
	defer pp.stop()
	time.Sleep(4*testLT + 2*ii + testFI/3)
	leading := func(ids ...string) string {
		var b strings.Builder
		for _, w := range pp.ws {
			if slices.Contains(ids, w.id) {
				fmt.Fprintf(&b, "%s:%d ", w.id, len(w.p.Leading()))
			}
		}
		return strings.TrimSpace(b.String())
	}
	if got := leading("w1", "w2", "w3"); got != "w1:10 w2:10 w3:10" {
		t.Fatalf("settled: %s; want 10 each", got)
	}
	steady := func(what string, ws []*worker) {
		t.Helper()
		window := 6 * ii
		before := map[string]Stats{}
		for _, w := range ws {
			before[w.id] = w.p.Stats()
		}
		time.Sleep(window)
		for _, w := range ws {
			s, b := w.p.Stats(), before[w.id]
			reads := float64(s.Gets+s.Lists-b.Gets-b.Lists) / float64(window/testFI)
			puts := float64(s.Puts-b.Puts) / float64(window/testFI)
			want := 2 * float64(testFI) / float64(ii)
			t.Logf("%s: %s: %.3f reads and %.2f PUT per FrequentInterval", what, w.id, reads, puts)
			// A window's edges cut at most one tick in or out.
			if slack := want / 6; reads < want-slack-1e-9 || reads > want+slack+1e-9 {
				t.Errorf("%s: %s reads %.3f times per FrequentInterval; want 2 × FrequentInterval/InfrequentInterval = %.3f", what, w.id, reads, want)
			}
			if puts < 0.95 || puts > 1.05 {
				t.Errorf("%s: %s writes %.2f PUT per FrequentInterval; want 1 (the session renewals)", what, w.id, puts)
			}
		}
	}
	steady("settled", pp.ws)

	time.Sleep(time.Duration(phase) * testFI / 3)
	victim := pp.ws[1]
	owned := victim.p.Leading()
	victim.st.dead.Store(true)
	killed := time.Now()
	time.Sleep(2*ii + 2*testLT)
	survivors := []*worker{pp.ws[0], pp.ws[2]}
	if got := leading("w1", "w3"); got != "w1:15 w3:15" {
		t.Fatalf("after w2's death: %s; want 15 each", got)
	}
	l.mu.Lock()
	last := l.renewals[victim.id][len(l.renewals[victim.id])-1]
	var instants []time.Time // when the dead worker's shards were claimed
	for _, shard := range owned {
		c := l.claims[shard][len(l.claims[shard])-1]
		if !slices.ContainsFunc(instants, c.at.Equal) {
			instants = append(instants, c.at)
		}
		var first, next time.Time // the claimer's first listing of the last renewal, and the one after it
		for _, at := range l.lists[c.owner] {
			if !at.Before(last) {
				if first.IsZero() {
					first = at
				} else if next.IsZero() {
					next = at
				}
			}
		}
		want := first.Add(testLT)
		if ii >= testLT {
			want = next
		}
		if !c.at.Equal(want) {
			t.Errorf("shard %s claimed by %s %v after its first listing of %s's last renewal; want %v", shard, c.owner, c.at.Sub(first), victim.id, want.Sub(first))
		}
		if bound := last.Add(testFI/16 + ii + max(ii, testLT)); c.at.After(bound) {
			t.Errorf("shard %s claimed %v after %s's last renewal; want within FrequentInterval/16 + InfrequentInterval + max(InfrequentInterval, LeaderTimeout) = %v",
				shard, c.at.Sub(last), victim.id, bound.Sub(last))
		}
		if c.at.After(last) && c.at.Sub(last) > 0 && shard == owned[0] {
			t.Logf("killed %v after its last renewal; its shards led again %.2f × LeaderTimeout after the kill", killed.Sub(last), float64(c.at.Sub(killed))/float64(testLT))
		}
	}
	if len(instants) != 1 {
		// A stable pool's workers tick on the wall clock's multiples of
		// InfrequentInterval: the survivors find the death at one listing.
		t.Errorf("%s's shards were claimed at %d different instants %v; want one (the survivors list at the same moments)", victim.id, len(instants), instants)
	}
	l.mu.Unlock()
	steady("settled again", survivors)

	joined := time.Now()
	pp.add("w4")
	for {
		time.Sleep(testFI / 10)
		if leading("w1", "w3", "w4") == "w1:10 w3:10 w4:10" {
			t.Logf("a joiner got its share %.2f × LeaderTimeout after it started", float64(time.Since(joined))/float64(testLT))
			break
		}
		if limit := ii + 2*testLT; time.Since(joined) > limit {
			t.Fatalf("%v after a fourth worker joined: %s; want 10 each within InfrequentInterval + 2 × LeaderTimeout", limit, leading("w1", "w3", "w4"))
		}
	}
}
