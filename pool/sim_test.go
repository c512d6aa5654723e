package pool

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

var (
	simSeeds  = flag.Int("sim.seeds", envInt("S3LECT_SIM_SEEDS", 2000), "number of seeds TestShardSimulation runs (default: $S3LECT_SIM_SEEDS, else 2000)")
	simSeed   = flag.Int64("sim.seed", -1, "run TestShardSimulation for this seed only (replay)")
	simFirst  = flag.Int64("sim.first", 0, "the first seed TestShardSimulation runs")
	simMutate = flag.String("sim.mutate", "", "break one rule (see mutations.go) to see TestShardSimulation or a deterministic test catch it")
)

// envInt returns the environment variable name as a number, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

var errInjected = errors.New("injected fault")

// TestShardSimulation runs randomized fault schedules against pools of
// workers over 100 to 130 shards in virtual time: store errors, lost
// replies, stalled connections, latency spikes beyond the lease, writes
// that land after their caller gave up, partitions (most right after a
// write lands), workers killed and restarted, paused (every call held,
// then sent late), joining and leaving, every worker's clock at its own
// rate within 5%; and an operator who deletes session objects, shard
// records and the member list, and restores older versions of session
// objects and shard records (operatorEvents). It checks that no shard
// ever has two live leaderships,
// that each shard's terms rise with every new leadership, and that every
// shard is led again once the faults stop. A failing seed replays with
// -sim.seed=N.
func TestShardSimulation(t *testing.T) {
	defer setMutation(t)()
	first, n := *simFirst, int64(*simSeeds)
	if *simSeed >= 0 {
		first, n = *simSeed, 1
	}
	var (
		mu     sync.Mutex
		totals = map[string]int{}
	)
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for seed := first; seed < first+n; seed++ {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Parallel()
				var counts map[string]int
				synctest.Test(t, func(t *testing.T) { counts = simulatePool(t, seed) })
				mu.Lock()
				defer mu.Unlock()
				for k, v := range counts {
					totals[k] += v
				}
			})
		}
	})
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range totals {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, " %s=%d", k, totals[k])
	}
	t.Logf("shards: %d seeds survived in %v:%s", n, time.Since(start).Round(time.Second), b.String())
}

// poolSimParams is one seed's world.
type poolSimParams struct {
	workers, shards   int
	fi, lt            time.Duration
	mixed             bool          // a rolling change of configuration: each incarnation takes one of two
	fi2, lt2          time.Duration // the other configuration
	faultsFor         time.Duration
	calmFor           time.Duration
	errRate, lostRate float64
	hangRate          float64
	latency, spike    time.Duration
	partitions        int
	crashes, pauses   int
	joins, leaves     int
	// Operators at work on the pool's objects: deletions of session
	// objects, shard records and the member list, and restores of older
	// versions of session objects and shard records.
	delSessions, delShards, delMembers int
	restores                           int
	// The store lists the session objects (store.Lister) unless noList,
	// and, while the faults last, its listings may lag by up to listLag:
	// each key as it was at some earlier listing, or missing.
	noList  bool
	listLag time.Duration
}

func newPoolSimParams(r *rand.Rand) poolSimParams {
	p := drawPoolSimParams(r)
	if p.delShards > 0 && p.delMembers > 0 {
		// Not both in one world: a deleted shard record's term can live
		// on only in the session object of a worker that has since left,
		// and a deleted member list forgets that worker (the limit the
		// package doc states).
		if r.IntN(2) == 0 {
			p.delShards = 0
		} else {
			p.delMembers = 0
		}
	}
	if p.delSessions+p.delShards+p.delMembers+p.restores > 0 {
		// A deleted record is watched for a lease, a buried session object
		// aged for one, before anyone claims: room for both.
		p.calmFor += 2 * max(p.lt, p.lt2)
	}
	return p
}

func drawPoolSimParams(r *rand.Rand) poolSimParams {
	fi := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	lt := fi*2 + time.Duration(r.Int64N(int64(fi*3))) + time.Millisecond
	fi2 := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	lt2 := max(fi2*2+time.Duration(r.Int64N(int64(fi2*4)))+time.Millisecond, lt*2)
	return poolSimParams{
		mixed:      r.IntN(3) == 0,
		fi2:        fi2,
		lt2:        lt2,
		workers:    2 + r.IntN(4),
		shards:     100 + r.IntN(31),
		fi:         fi,
		lt:         lt,
		faultsFor:  15 * time.Second,
		calmFor:    3*max(lt, lt2) + 4*max(fi, fi2) + 2*time.Second,
		errRate:    r.Float64() * 0.1,
		lostRate:   r.Float64() * 0.05,
		hangRate:   r.Float64() * 0.02,
		latency:    time.Duration(r.Int64N(int64(fi/4))) * time.Duration(r.IntN(2)), // none in half the worlds
		spike:      lt + time.Duration(r.Int64N(int64(lt))),
		partitions: r.IntN(5),
		crashes:    r.IntN(4),
		pauses:     r.IntN(3),
		joins:      r.IntN(3),
		leaves:     r.IntN(2),
		// Drawn last, so that the worlds above stay those of earlier seeds.
		delSessions: r.IntN(4),
		delShards:   r.IntN(6),
		delMembers:  r.IntN(3),
		restores:    r.IntN(4),
		noList:      r.IntN(4) == 0,
		listLag:     (lt + time.Duration(r.Int64N(int64(2*lt2)))) * time.Duration(r.IntN(2)),
	}
}

// simStore is one worker incarnation's view of the shared store, with
// faults. A call sent before its caller gave up may still land.
type simStore struct {
	mem    store.Store
	hist   *history
	lists  *listLog
	p      *poolSimParams
	counts *tally

	mu          sync.Mutex
	r           *rand.Rand
	faulty      bool
	down        bool      // crashed or partitioned: new calls never arrive
	crashed     bool      // for good
	cutNext     bool      // partition right after the next write lands
	pausedUntil time.Time // the process is stopped: nothing is sent or received before
}

// history keeps the last writes of every key, for the restores.
type history struct {
	mu sync.Mutex
	m  map[string][][]byte
}

func (h *history) add(key string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := append(h.m[key], data)
	if len(v) > 4 {
		v = v[1:]
	}
	h.m[key] = v
}

// older returns a write of key older than its last, or nil.
func (h *history) older(key string, r *rand.Rand) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.m[key]
	if len(v) < 2 {
		return nil
	}
	return v[r.IntN(len(v)-1)]
}

type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *tally) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k]++
}

func (s *simStore) roll() (fail, lost, hang bool, before, after time.Duration, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false, false, false, 0, 0, true
	}
	if !s.faulty {
		return
	}
	fail = s.r.Float64() < s.p.errRate
	lost = s.r.Float64() < s.p.lostRate
	hang = s.r.Float64() < s.p.hangRate
	if s.p.latency > 0 {
		before = time.Duration(s.r.Int64N(int64(s.p.latency)))
		after = time.Duration(s.r.Int64N(int64(s.p.latency)))
	}
	if s.r.Float64() < 0.005 {
		before += s.p.spike
		s.counts.add("latency spike")
	}
	return
}

// resume waits while the process is paused.
func (s *simStore) resume() {
	for {
		s.mu.Lock()
		d := time.Until(s.pausedUntil)
		s.mu.Unlock()
		if d <= 0 {
			return
		}
		time.Sleep(d)
	}
}

func call[T any](ctx context.Context, s *simStore, op func() (T, error)) (T, error) {
	var zero T
	s.resume()
	fail, lost, hang, before, after, down := s.roll()
	if down || hang {
		<-ctx.Done()
		return zero, ctx.Err()
	}
	if fail {
		return zero, errInjected
	}
	if before == 0 && after == 0 && !lost {
		v, err := op() // at once: the common case, without a goroutine
		s.resume()
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		time.Sleep(before)
		v, err := op()
		time.Sleep(after)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		s.resume() // a paused process reads the reply when it runs again
		if lost {
			return zero, fmt.Errorf("reply lost: %w", errInjected)
		}
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (s *simStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	type got struct {
		data []byte
		etag string
	}
	g, err := call(ctx, s, func() (got, error) {
		d, e, err := s.mem.Get(context.Background(), key)
		return got{d, e}, err
	})
	return g.data, g.etag, err
}

func (s *simStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return call(ctx, s, func() (string, error) {
		tag, err := s.mem.PutIfMatch(context.Background(), key, data, etag)
		if err == nil {
			s.hist.add(key, data)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil && s.cutNext {
			s.cutNext, s.down = false, true
		}
		return tag, err
	})
}

// List lists the keys under prefix. While the faults last, with a lag in
// the world, each key is shown as an earlier listing (of any worker) found
// it, or left out when that listing did not have it: a store whose
// listings lag behind its writes.
func (s *simStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	return call(ctx, s, func() ([]store.Entry, error) {
		now, err := s.mem.(store.Lister).List(context.Background(), prefix)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		lag := s.faulty && s.p.listLag > 0
		var pick, mix uint64
		if lag {
			pick, mix = s.r.Uint64(), s.r.Uint64()
		}
		s.mu.Unlock()
		old := s.lists.add(prefix, now, s.p.listLag, pick)
		if !lag {
			return now, nil
		}
		var out []store.Entry
		r := rand.New(rand.NewPCG(mix, 11))
		for _, e := range now {
			tag, frozen := s.lists.frozen(e, r, s.p.listLag)
			if frozen {
				s.counts.add("stale listing")
			}
			switch {
			case frozen:
				out = append(out, store.Entry{Key: e.Key, ETag: tag})
			case r.IntN(2) == 0 || old == nil:
				out = append(out, e)
			default:
				if tag, ok := old[e.Key]; ok {
					out = append(out, store.Entry{Key: e.Key, ETag: tag})
				}
			}
		}
		return out, nil
	})
}

// listLog keeps the world's recent listings, for the lagging ones, and
// the keys whose listed ETag is stuck.
type listLog struct {
	mu    sync.Mutex
	snaps []listSnap
	stuck map[string]stuckTag
}

type stuckTag struct {
	etag  string
	until time.Time
}

// frozen returns the ETag key e is stuck at in the listings, if it is, and
// sometimes (one listing in 10) sticks it at its current ETag for up to
// lag: a listing that goes on showing a write long after the object has
// changed.
func (l *listLog) frozen(e store.Entry, r *rand.Rand, lag time.Duration) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if st, ok := l.stuck[e.Key]; ok && now.Before(st.until) {
		return st.etag, true
	}
	if r.IntN(10) == 0 {
		if l.stuck == nil {
			l.stuck = map[string]stuckTag{}
		}
		l.stuck[e.Key] = stuckTag{etag: e.ETag, until: now.Add(time.Duration(r.Int64N(int64(lag))))}
	}
	return "", false
}

type listSnap struct {
	at     time.Time
	prefix string
	tags   map[string]string
}

// add records a listing taken now, and returns an earlier one of the same
// prefix taken within lag, drawn by pick (nil if none).
func (l *listLog) add(prefix string, entries []store.Entry, lag time.Duration, pick uint64) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var cands []map[string]string
	for _, sn := range l.snaps {
		if sn.prefix == prefix && !sn.at.Before(now.Add(-lag)) {
			cands = append(cands, sn.tags)
		}
	}
	tags := make(map[string]string, len(entries))
	for _, e := range entries {
		tags[e.Key] = e.ETag
	}
	l.snaps = append(l.snaps, listSnap{at: now, prefix: prefix, tags: tags})
	if len(l.snaps) > 64 {
		l.snaps = l.snaps[1:]
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[pick%uint64(len(cands))]
}

// simEvent is something the simulation does at a time after its start.
type simEvent struct {
	at time.Duration
	fn func()
}

// operatorEvents returns the deletions and restores an operator makes of
// the pool's objects, at times drawn by at. Each runs while every worker
// is blocked (synctest.Wait), so that what it checks holds while it acts.
// Session objects and the member list are deleted at any time. A shard
// record is deleted, or restored to an older version, only while its
// owner's session object lists the shard at the record's term, and a
// session object is deleted, or restored to an older version, only while
// every term it lists is still in its shard's record, and restored only
// while its worker does not run (an older write of a live session can
// hide what it leads from a worker that never saw the later ones: the
// limit the package doc states); the terms of a
// shard are then never known only to an object that is gone, the limit
// the package doc states.
func operatorEvents(r *rand.Rand, p *poolSimParams, mem *memstore.Store, hist *history, counts *tally, shards []string, at func() time.Duration,
	running func(worker string) bool) []simEvent {
	get := func(key string) []byte {
		d, _, err := mem.Get(context.Background(), key)
		if err != nil {
			return nil
		}
		return d
	}
	// termsKept reports whether every term the session object at key lists
	// is in its shard's record.
	termsKept := func(data []byte) bool {
		rec, err := parseSession(data)
		if err != nil {
			return true
		}
		for _, m := range []map[string]uint64{rec.Shards, rec.Ended} {
			for shard, term := range m {
				sr, err := parseShard(get("sim/shards/" + shard + ".json"))
				if err != nil || sr.Term < term {
					return false
				}
			}
		}
		return true
	}
	// listed reports whether the shard record's owner's session object
	// lists it at the record's term.
	listed := func(shard string) bool {
		sr, err := parseShard(get("sim/shards/" + shard + ".json"))
		if err != nil || sr.Owner == "" {
			return false
		}
		rec, err := parseSession(get("sim/sessions/" + sr.Owner + ".json"))
		return err == nil && rec.Session == sr.Session && rec.Shards[shard] == sr.Term
	}
	sessionKey := func(seed uint64) string {
		var ms membersRecord
		if d := get("sim/members.json"); d != nil {
			ms, _ = parseMembers(d)
		}
		if len(ms.Workers) == 0 {
			return ""
		}
		return "sim/sessions/" + ms.Workers[seed%uint64(len(ms.Workers))] + ".json"
	}
	var evs []simEvent
	for range p.delSessions {
		pick := r.Uint64()
		evs = append(evs, simEvent{at(), func() {
			synctest.Wait()
			if key := sessionKey(pick); key != "" && (*simAnyOp || termsKept(get(key))) {
				mem.Delete(key)
				counts.add("session deleted")
				dbgf("delete %s", key)
			}
		}})
	}
	for range p.delMembers {
		evs = append(evs, simEvent{at(), func() {
			synctest.Wait()
			mem.Delete("sim/members.json")
			counts.add("member list deleted")
			dbgf("delete members")
		}})
	}
	for range p.delShards {
		shard := shards[r.IntN(len(shards))]
		evs = append(evs, simEvent{at(), func() {
			synctest.Wait()
			if *simAnyOp || listed(shard) {
				dbgf("delete %s: %s", shard, get("sim/shards/"+shard+".json"))
				mem.Delete("sim/shards/" + shard + ".json")
				counts.add("shard record deleted")
			}
		}})
	}
	for range p.restores {
		pick, shard, session := r.Uint64(), shards[r.IntN(len(shards))], r.IntN(2) == 0
		// A restored shard record is a deletion too: not in a world that
		// deletes the member list (seed 48669 repeated a term so).
		session = session || p.delMembers > 0 && !*simAnyOp
		rr := rand.New(rand.NewPCG(pick, 7))
		evs = append(evs, simEvent{at(), func() {
			synctest.Wait()
			if session {
				key := sessionKey(pick)
				worker := strings.TrimSuffix(strings.TrimPrefix(key, "sim/sessions/"), ".json")
				if old := hist.older(key, rr); key != "" && old != nil && !running(worker) && (*simAnyOp || termsKept(get(key)) && termsKept(old)) {
					dbgf("restore %s: %s", key, old)
					mem.Set(key, old)
					counts.add("session restored")
				}
				return
			}
			key := "sim/shards/" + shard + ".json"
			if old := hist.older(key, rr); old != nil && (*simAnyOp || listed(shard)) {
				dbgf("restore %s: %s over %s", key, old, get(key))
				mem.Set(key, old)
				counts.add("shard record restored")
			}
		}})
	}
	return evs
}

// tenure is one leadership of a shard as the checker sees it.
type tenure struct {
	worker     string
	term       uint64
	start, end time.Time // end is zero while live
}

type simWorker struct {
	id     string
	st     *simStore
	p      *Pool
	cancel context.CancelFunc
	done   chan struct{}
}

func simulatePool(t *testing.T, seed int64) map[string]int {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5ade))
	p := newPoolSimParams(r)
	mem := memstore.New()
	hist := &history{m: map[string][][]byte{}}
	lists := &listLog{}
	counts := &tally{m: map[string]int{}}
	var shards []string
	for i := range p.shards {
		shards = append(shards, fmt.Sprintf("s%03d", i))
	}
	var (
		mu      sync.Mutex
		tenures = map[string][]*tenure{}
		runErrs []string // Run's errors: every worker has an ID of its own
		wmu     sync.Mutex
		workers = map[string]*simWorker{}
		all     []*simWorker
		nextID  = p.workers
	)
	t0 := time.Now()
	faultsEnd := t0.Add(p.faultsFor)
	faulty := func() bool { return time.Now().Before(faultsEnd) }

	start := func(id string, incarnation int) *simWorker {
		wr := rand.New(rand.NewPCG(uint64(seed), uint64(len(id)*7919+incarnation*104729+int(id[1]))))
		st := &simStore{mem: mem, hist: hist, lists: lists, p: &p, r: wr, faulty: faulty(), counts: counts}
		w := &simWorker{id: id, st: st, done: make(chan struct{})}
		fi, lt := p.fi, p.lt
		if p.mixed && wr.IntN(2) == 0 {
			fi, lt = p.fi2, p.lt2
		}
		var ps store.Store = st
		if p.noList {
			ps = unlisted{st}
		}
		pl, err := New(Config{Store: ps, Prefix: "sim/", ID: id, Shards: shards, Logger: quiet,
			FrequentInterval: fi, LeaderTimeout: lt,
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
				tn := &tenure{worker: id, term: l.Term(), start: time.Now()}
				mu.Lock()
				tenures[shard] = append(tenures[shard], tn)
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				if tn.end.IsZero() {
					tn.end = time.Now()
				}
				mu.Unlock()
			}})
		if err != nil {
			t.Fatalf("seed %d: New() = %v", seed, err)
		}
		// Each incarnation's clock runs at its own rate within 5%, a third
		// of them at either bound, where the margin matters most.
		pl.clock.Rate = []float64{0.95, 1.05, 0.95 + 0.1*wr.Float64()}[wr.IntN(3)]
		w.p = pl
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go func() {
			defer close(w.done)
			if err := pl.Run(ctx); err != nil {
				mu.Lock()
				runErrs = append(runErrs, fmt.Sprintf("%s: %v", id, err))
				mu.Unlock()
			}
		}()
		all = append(all, w)
		return w
	}
	incarnations := map[string]int{}
	wmu.Lock()
	for i := range p.workers {
		id := fmt.Sprintf("w%d", i)
		workers[id] = start(id, 0)
	}
	wmu.Unlock()

	// kill stops w abruptly: its leaderships end now as far as the world
	// is concerned, and it never reaches the store again.
	kill := func(w *simWorker) {
		w.st.mu.Lock()
		w.st.down, w.st.crashed = true, true
		w.st.mu.Unlock()
		mu.Lock()
		now := time.Now()
		for _, ts := range tenures {
			for _, tn := range ts {
				if tn.worker == w.id && tn.end.IsZero() {
					tn.end = now
				}
			}
		}
		mu.Unlock()
		w.cancel() // reaps its goroutines; its calls go nowhere
	}
	pick := func() *simWorker {
		wmu.Lock()
		defer wmu.Unlock()
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range workers {
				if !yield(id) {
					return
				}
			}
		})
		if len(ids) == 0 {
			return nil
		}
		return workers[ids[r.IntN(len(ids))]]
	}

	var events []simEvent
	at := func() time.Duration { return time.Duration(r.Int64N(int64(p.faultsFor - 3*time.Second))) }
	for range p.partitions {
		when, d, afterWrite := at(), time.Duration(r.Int64N(int64(3*p.lt))), r.IntN(3) > 0
		var cut *simWorker
		events = append(events, simEvent{when, func() {
			if cut = pick(); cut == nil {
				return
			}
			counts.add("partition")
			cut.st.mu.Lock()
			if afterWrite {
				cut.st.cutNext = true
			} else {
				cut.st.down = true
			}
			cut.st.mu.Unlock()
		}}, simEvent{when + d, func() {
			if cut != nil {
				cut.st.mu.Lock()
				cut.st.down, cut.st.cutNext = cut.st.crashed, false
				cut.st.mu.Unlock()
			}
		}})
	}
	for range p.crashes {
		when, d := at(), time.Duration(r.Int64N(int64(10*time.Second)))
		events = append(events, simEvent{when, func() {
			w := pick()
			if w == nil {
				return
			}
			counts.add("kill")
			kill(w)
			time.AfterFunc(d, func() {
				wmu.Lock()
				defer wmu.Unlock()
				if workers[w.id] == w {
					counts.add("restart")
					incarnations[w.id]++
					workers[w.id] = start(w.id, incarnations[w.id])
				}
			})
		}})
	}
	for range p.pauses {
		when, d := at(), p.lt/2+time.Duration(r.Int64N(int64(2*p.lt)))
		events = append(events, simEvent{when, func() {
			if w := pick(); w != nil {
				counts.add("pause")
				w.st.mu.Lock()
				w.st.pausedUntil = time.Now().Add(d)
				w.st.mu.Unlock()
			}
		}})
	}
	for range p.joins {
		events = append(events, simEvent{at(), func() {
			wmu.Lock()
			defer wmu.Unlock()
			counts.add("join")
			id := fmt.Sprintf("w%d", nextID)
			nextID++
			workers[id] = start(id, 0)
		}})
	}
	for range p.leaves {
		events = append(events, simEvent{at(), func() {
			w := pick()
			wmu.Lock()
			if w == nil || len(workers) < 2 {
				wmu.Unlock()
				return
			}
			delete(workers, w.id)
			wmu.Unlock()
			counts.add("leave")
			w.cancel()
		}})
	}
	running := func(id string) bool {
		wmu.Lock()
		defer wmu.Unlock()
		w := workers[id]
		if w == nil {
			return false
		}
		w.st.mu.Lock()
		defer w.st.mu.Unlock()
		return !w.st.crashed
	}
	events = append(events, operatorEvents(r, &p, mem, hist, counts, shards, at, running)...)
	slices.SortStableFunc(events, func(a, b simEvent) int { return int(a.at - b.at) })
	for _, ev := range events {
		time.Sleep(t0.Add(ev.at).Sub(time.Now()))
		ev.fn()
	}
	time.Sleep(faultsEnd.Sub(time.Now()))

	// Faults stop: heal partitions, restart the killed, end random faults.
	wmu.Lock()
	for id, w := range workers {
		w.st.mu.Lock()
		crashed := w.st.crashed
		w.st.down, w.st.faulty, w.st.cutNext = crashed, false, false
		w.st.mu.Unlock()
		if crashed {
			incarnations[id]++
			workers[id] = start(id, incarnations[id])
		}
	}
	wmu.Unlock()
	time.Sleep(p.calmFor)
	synctest.Wait()

	mu.Lock()
	snap := map[string][]tenure{}
	for s, ts := range tenures {
		for _, tn := range ts {
			snap[s] = append(snap[s], *tn)
		}
	}
	mu.Unlock()
	// With SIMDEBUG set, a failed check prints the objects and the
	// workers' figures as they stood when the faults had long stopped.
	if err := checkTenures(shards, snap); err != nil && os.Getenv("SIMDEBUG") != "" {
		keys := []string{"sim/members.json"}
		for id := range workers {
			keys = append(keys, "sim/sessions/"+id+".json")
		}
		for _, key := range keys {
			d, _, _ := mem.Get(context.Background(), key)
			fmt.Printf("%s: %s\n", key, d)
		}
		for _, s := range shards {
			if ts := snap[s]; len(ts) == 0 || !ts[len(ts)-1].end.IsZero() {
				d, _, _ := mem.Get(context.Background(), "sim/shards/"+s+".json")
				fmt.Printf("unled %s: %s\n", s, d)
			}
		}
		for id, w := range workers {
			fmt.Printf("%s leads %d: %+v\n", id, len(w.p.Leading()), w.p.Stats())
		}
	}
	wmu.Lock()
	final := slices.Clone(all)
	wmu.Unlock()
	for _, w := range final {
		w.cancel()
	}
	for _, w := range final {
		<-w.done
	}
	synctest.Wait()
	if len(runErrs) > 0 {
		t.Errorf("seed %d: Run returned errors: %v", seed, runErrs)
	}
	if err := checkTenures(shards, snap); err != nil {
		t.Errorf("seed %d: %v\nparams %+v\nreplay with -run 'TestShardSimulation' -sim.seed=%d", seed, err, p, seed)
	}
	return counts.m
}

// checkTenures reports a shard with two overlapping leaderships, a term
// that does not exceed the one before it, or no live leader at the end.
func checkTenures(shards []string, tenures map[string][]tenure) error {
	for _, s := range shards {
		ts := tenures[s]
		slices.SortFunc(ts, func(a, b tenure) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ts); i++ {
			prev, cur := ts[i-1], ts[i]
			if prev.end.IsZero() || prev.end.After(cur.start) {
				return fmt.Errorf("shard %s: %s term %d (from %v) overlaps %s term %d (from %v)", s, prev.worker, prev.term,
					prev.start.Format("05.000"), cur.worker, cur.term, cur.start.Format("05.000"))
			}
			if cur.term <= prev.term && !*simAnyOp {
				var b strings.Builder
				for _, tn := range ts {
					fmt.Fprintf(&b, "\n  %s term %d: %s - %s", tn.worker, tn.term, tn.start.Format("05.000"), tn.end.Format("05.000"))
				}
				return fmt.Errorf("shard %s: term %d (%s) after term %d (%s):%s", s, cur.term, cur.worker, prev.term, prev.worker, b.String())
			}
		}
		if len(ts) == 0 || !ts[len(ts)-1].end.IsZero() {
			return fmt.Errorf("shard %s: no live leader once the faults had stopped for long", s)
		}
	}
	return nil
}

func dbgf(format string, args ...any) {
	if os.Getenv("SIMDEBUG") != "" {
		fmt.Println(time.Now().Format("05.000"), fmt.Sprintf(format, args...))
	}
}
