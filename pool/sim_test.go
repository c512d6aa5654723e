package pool

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
)

// TestShardSimulation runs randomized fault schedules against pools of
// workers over 100 to 130 shards in virtual time (the world of package
// internal/simworld): store errors, lost replies, stalled connections,
// latency spikes beyond the lease, writes that land after their caller
// gave up, listings that lag (stale reads of the sessions), partitions
// (most right after a write lands), workers killed and restarted, paused
// (every call held, then sent late), joining and leaving, every worker's
// clock at its own rate within 5%; Work that calls Resign, at once or
// as it returns (the defer pattern); an InfrequentInterval of 2 to 6
// FrequentIntervals in a third of the worlds; timings changed across restarts (each
// incarnation on one of two configurations, or a rolling restart of every
// worker onto the other); and an operator who deletes session objects,
// shard records and the member list, and restores older versions of each
// (operatorEvents). It checks that no shard ever has two live
// leaderships, that each shard's terms rise with every new leadership,
// and that every shard is led again once the faults stop. A failing seed
// replays with -sim.seed=N.
func TestShardSimulation(t *testing.T) {
	defer setMutation(t)()
	simworld.Seeds(t, "shards", simulatePool)
}

// poolSimParams is one seed's world.
type poolSimParams struct {
	workers, shards int
	fi, lt          time.Duration
	mixed           bool          // a change of configuration: each incarnation takes one of two
	fi2, lt2        time.Duration // the other configuration
	faultsFor       time.Duration
	calmFor         time.Duration
	faults          simworld.Faults // the store's; listings lag in half the worlds that list
	partitions      int
	crashes, pauses int
	joins, leaves   int
	// Operators at work on the pool's objects: deletions of session
	// objects, shard records and the member list, and restores of older
	// versions of session objects and shard records.
	delSessions, delShards, delMembers int
	restores                           int
	// The store lists the session objects (store.Lister) unless noList.
	noList bool

	// Drawn from a generator of their own (newPoolSimParams' x), so that
	// the worlds above stay those of earlier seeds:
	memberRestores int  // restores of an older member list
	rolling        bool // a rolling restart: every worker in turn, onto the other configuration
	rollBack       bool // the roll goes from the second configuration (the longer lease) to the first
	resigns        bool // a tenth of the leaderships begun while the faults last are resigned inside Work
	iiTimes        int  // Config.InfrequentInterval is this many FrequentIntervals (1: off)

	// Drawn from a third generator (y), likewise:
	peer bool // the workers run in peer mode over a faulty PeerNet
	liar bool // in peer mode, worker w0's PeerHandler makes up ETags while the faults last
}

func newPoolSimParams(r, x, y *rand.Rand) poolSimParams {
	p := drawPoolSimParams(r)
	if p.peer = y.IntN(3) == 0; p.peer {
		// Peer mode: the store is listed every InfrequentInterval (6 ×
		// FrequentInterval unless drawn below); a lying hub is found out
		// at the second listing after the faults stop, and doubted for
		// four leases.
		p.liar = y.IntN(3) == 0
		p.calmFor += 3*peerIIFactor*max(p.fi, p.fi2) + 4*max(p.lt, p.lt2)
	}
	p.memberRestores, p.rolling, p.rollBack = x.IntN(3), x.IntN(3) == 0, x.IntN(2) == 0
	p.resigns = x.IntN(2) == 0
	p.iiTimes = 1
	if x.IntN(3) == 0 {
		// A settled pool watches every InfrequentInterval: a death is found
		// up to one later, the orphans' wait is one longer.
		p.iiTimes = 2 + x.IntN(5)
		p.calmFor += 3 * time.Duration(p.iiTimes) * max(p.fi, p.fi2)
	}
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
	if p.delShards > 0 && !*simAnyOp {
		p.memberRestores = 0 // an older member list forgets workers, as a deleted one does
	}
	if p.delSessions+p.delShards+p.delMembers+p.restores+p.memberRestores > 0 {
		// A deleted record is watched for a lease, a buried session object
		// aged for one, before anyone claims: room for both.
		p.calmFor += 2 * max(p.lt, p.lt2)
	}
	// An orphan is taken up one worker at a time (docs/pool-protocol.md,
	// "Spreading the shards"): the first three orphan waits after the
	// orphan wait while a worker is below its share, each next one an
	// orphan wait after the one before. Room for every live worker's turn.
	wait := max(p.lt, p.lt2)
	if p.iiTimes > 1 {
		wait = max(wait, time.Duration(p.iiTimes+1)*max(p.fi, p.fi2))
	}
	p.calmFor += time.Duration(p.workers+p.joins+2) * wait
	return p
}

func drawPoolSimParams(r *rand.Rand) poolSimParams {
	fi, lt := simworld.DrawTiming(r)
	fi2 := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}[r.IntN(3)]
	lt2 := max(fi2*2+time.Duration(r.Int64N(int64(fi2*4)))+time.Millisecond, lt*2)
	p := poolSimParams{
		mixed:     r.IntN(3) == 0,
		fi2:       fi2,
		lt2:       lt2,
		workers:   2 + r.IntN(4),
		shards:    100 + r.IntN(31),
		fi:        fi,
		lt:        lt,
		faultsFor: 15 * time.Second,
		calmFor:   3*max(lt, lt2) + 4*max(fi, fi2) + 2*time.Second,
		faults: simworld.Faults{
			ErrRate:   r.Float64() * 0.1,
			LostRate:  r.Float64() * 0.05,
			HangRate:  r.Float64() * 0.02,
			Latency:   time.Duration(r.Int64N(int64(fi/4))) * time.Duration(r.IntN(2)), // none in half the worlds
			Spike:     lt + time.Duration(r.Int64N(int64(lt))),
			SpikeRate: 0.005,
		},
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
	}
	p.faults.ListLag = (lt + time.Duration(r.Int64N(int64(2*lt2)))) * time.Duration(r.IntN(2))
	return p
}

// operatorEvents returns the deletions and restores an operator makes of
// the pool's objects, at times drawn by at. Each runs while every worker
// is blocked (synctest.Wait), so that what it checks holds while it acts.
// Session objects and the member list are deleted at any time, and the
// member list restored to an older version (in worlds that delete no
// shard record: an older list forgets workers, as a deleted one does). A shard
// record is deleted, or restored to an older version, only while its
// owner's session object lists the shard at the record's term, and a
// session object is deleted, or restored to an older version, only while
// every term it lists is still in its shard's record, and restored only
// while its worker does not run (an older write of a live session can
// hide what it leads from a worker that never saw the later ones: the
// limit the package doc states); the terms of a
// shard are then never known only to an object that is gone, the limit
// the package doc states.
// The member list's restores are drawn from x, the other events from r.
func operatorEvents(r, x *rand.Rand, p *poolSimParams, w *simworld.World, shards []string, at func(*rand.Rand) time.Duration,
	running func(worker string) bool) simworld.Schedule {
	mem, counts := w.Mem, w.Counts
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
	var evs simworld.Schedule
	for range p.delSessions {
		pick := r.Uint64()
		evs.Add(at(r), func() {
			synctest.Wait()
			if key := sessionKey(pick); key != "" && (*simAnyOp || termsKept(get(key))) {
				mem.Delete(key)
				counts.Add("session deleted")
				simworld.Debugf("delete %s", key)
			}
		})
	}
	for range p.delMembers {
		evs.Add(at(r), func() {
			synctest.Wait()
			mem.Delete("sim/members.json")
			counts.Add("member list deleted")
			simworld.Debugf("delete members")
		})
	}
	for range p.delShards {
		shard := shards[r.IntN(len(shards))]
		evs.Add(at(r), func() {
			synctest.Wait()
			if *simAnyOp || listed(shard) {
				simworld.Debugf("delete %s: %s", shard, get("sim/shards/"+shard+".json"))
				mem.Delete("sim/shards/" + shard + ".json")
				counts.Add("shard record deleted")
			}
		})
	}
	for range p.restores {
		pick, shard, session := r.Uint64(), shards[r.IntN(len(shards))], r.IntN(2) == 0
		// A restored shard record is a deletion too: not in a world that
		// deletes the member list (seed 48669 repeated a term so).
		session = session || (p.delMembers > 0 || p.memberRestores > 0) && !*simAnyOp
		rr := rand.New(rand.NewPCG(pick, 7))
		evs.Add(at(r), func() {
			synctest.Wait()
			if session {
				key := sessionKey(pick)
				worker := strings.TrimSuffix(strings.TrimPrefix(key, "sim/sessions/"), ".json")
				if old := w.History.Older(key, rr); key != "" && old != nil && !running(worker) && (*simAnyOp || termsKept(get(key)) && termsKept(old)) {
					simworld.Debugf("restore %s: %s", key, old)
					mem.Set(key, old)
					counts.Add("session restored")
				}
				return
			}
			key := "sim/shards/" + shard + ".json"
			if old := w.History.Older(key, rr); old != nil && (*simAnyOp || listed(shard)) {
				simworld.Debugf("restore %s: %s over %s", key, old, get(key))
				mem.Set(key, old)
				counts.Add("shard record restored")
			}
		})
	}
	for range p.memberRestores {
		rr := rand.New(rand.NewPCG(x.Uint64(), 7))
		evs.Add(at(x), func() {
			synctest.Wait()
			if old := w.History.Older("sim/members.json", rr); old != nil {
				simworld.Debugf("restore members: %s over %s", old, get("sim/members.json"))
				mem.Set("sim/members.json", old)
				counts.Add("member list restored")
			}
		})
	}
	return evs
}

type simWorker struct {
	id     string
	st     *simworld.Store
	p      *Pool
	cancel context.CancelFunc
	done   chan struct{}
}

func simulatePool(t *testing.T, seed int64) map[string]int {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5ade))
	x := rand.New(rand.NewPCG(uint64(seed), 0x7011)) // what later versions added, so that r's worlds stay
	y := rand.New(rand.NewPCG(uint64(seed), 0x9ee7)) // peer mode, likewise
	p := newPoolSimParams(r, x, y)
	world := simworld.NewWorld(p.faults)
	counts := world.Counts
	if p.iiTimes > 1 {
		counts.Add("world with an InfrequentInterval")
	}
	var net *simworld.PeerNet
	if p.peer {
		counts.Add("world in peer mode")
		if p.liar {
			counts.Add("world with a lying hub")
		}
		net = simworld.NewPeerNet(rand.New(rand.NewPCG(uint64(seed), 0x9ee8)))
	}
	var traces simTraces
	var shards []string
	for i := range p.shards {
		shards = append(shards, fmt.Sprintf("s%03d", i))
	}
	var (
		ledger  simworld.Ledger // every shard's leaderships
		mu      sync.Mutex
		runErrs []string // Run's errors: every worker has an ID of its own
		wmu     sync.Mutex
		workers = map[string]*simWorker{}
		all     []*simWorker
		nextID  = p.workers
		rolled  = map[string]bool{} // the worker's next incarnations take the other configuration
		rollOn  bool                // the roll has begun: joiners take the other configuration
	)
	t0 := time.Now()
	faultsEnd := t0.Add(p.faultsFor)
	faulty := func() bool { return time.Now().Before(faultsEnd) }

	start := func(id string, incarnation int) *simWorker {
		wr := rand.New(rand.NewPCG(uint64(seed), uint64(len(id)*7919+incarnation*104729+int(id[1]))))
		st := world.NewStore(wr, faulty())
		w := &simWorker{id: id, st: st, done: make(chan struct{})}
		fi, lt := p.fi, p.lt
		second := p.mixed && wr.IntN(2) == 0
		if p.rolling {
			second = rolled[id] != p.rollBack
		}
		if second {
			fi, lt = p.fi2, p.lt2
		}
		var ps store.Store = st
		if p.noList {
			ps = unlisted{st}
		}
		ii := fi * time.Duration(p.iiTimes)
		if p.peer && p.iiTimes == 1 {
			ii = 0 // peer mode's default
		}
		logger := quiet
		if *simTrace {
			logger = traces.logger(id, incarnation)
		}
		pl, err := New(Config{Store: ps, Prefix: "sim/", ID: id, Shards: shards, Logger: logger,
			FrequentInterval: fi, LeaderTimeout: lt, InfrequentInterval: ii,
			PeerMode: p.peer, ServerAddr: id + ":443", PeerClient: peerClient(net),
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
				tn := ledger.Start(shard, id, l.Term())
				// The leadership ends with its context, whatever Work does
				// then (a Resign inside Work returns once the release is
				// written, and another worker may lead the shard before).
				context.AfterFunc(ctx, func() { ledger.End(tn) })
				if p.resigns {
					// Some Work calls Resign, while the faults last, and
					// half of them call it again as they return (the usual
					// defer): it returns at every moment.
					kr := rand.New(rand.NewPCG(uint64(seed), uint64(incarnation)<<48^uint64(id[1])<<40^uint64(len(shard))<<32^l.Term()<<8^uint64(shard[len(shard)-1])))
					if kr.IntN(10) == 0 && faulty() {
						if kr.IntN(2) == 0 {
							defer l.Resign(context.Background())
						}
						select {
						case <-ctx.Done():
						case <-time.After(time.Duration(kr.Int64N(int64(2 * lt)))):
							counts.Add("resigned inside Work")
							l.Resign(context.Background())
						}
					}
				}
				<-ctx.Done()
				ledger.End(tn)
			}})
		if err != nil {
			t.Fatalf("seed %d: New() = %v", seed, err)
		}
		// Each incarnation's clock runs at its own rate within 5%, a third
		// of them at either bound, where the margin matters most.
		pl.clock.Rate = simworld.ClockRate(wr, true)
		w.p = pl
		if net != nil {
			var h http.Handler = PeerHandler(pl)
			if p.liar && id == "w0" {
				h = &lyingHub{h: h, r: rand.New(rand.NewPCG(uint64(seed), 0x11a7)), faulty: faulty}
			}
			net.Add(id+":443", h)
		}
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
		if net != nil {
			// Its address refuses, or something there keeps answering
			// with a digest of another time.
			var stale []byte
			if net.Roll() < 0.5 { // not r: kill runs in the rolling restart's goroutine too
				stale = encode(digest{Pool: formatVersion, Prefix: "sim/", Worker: w.id, Sessions: map[string]peerSession{w.id: {ETag: "stale", Sum: peerSum([32]byte{})}}})
			}
			net.Crash(w.id+":443", stale)
		}
		w.st.Crash()
		ledger.Kill(w.id)
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

	var events simworld.Schedule
	atBy := func(g *rand.Rand) time.Duration { return time.Duration(g.Int64N(int64(p.faultsFor - 3*time.Second))) }
	at := func() time.Duration { return atBy(r) }
	for range p.partitions {
		when, d, afterWrite := at(), time.Duration(r.Int64N(int64(3*p.lt))), r.IntN(3) > 0
		var cut *simWorker
		events.Add(when, func() {
			if cut = pick(); cut == nil {
				return
			}
			counts.Add("partition")
			cut.st.Partition(afterWrite)
		})
		events.Add(when+d, func() {
			if cut != nil {
				cut.st.Heal()
			}
		})
	}
	for range p.crashes {
		when, d := at(), time.Duration(r.Int64N(int64(10*time.Second)))
		events.Add(when, func() {
			w := pick()
			if w == nil {
				return
			}
			counts.Add("kill")
			kill(w)
			time.AfterFunc(d, func() {
				wmu.Lock()
				defer wmu.Unlock()
				if workers[w.id] == w {
					counts.Add("restart")
					incarnations[w.id]++
					workers[w.id] = start(w.id, incarnations[w.id])
				}
			})
		})
	}
	for range p.pauses {
		when, d := at(), p.lt/2+time.Duration(r.Int64N(int64(2*p.lt)))
		events.Add(when, func() {
			if w := pick(); w != nil {
				counts.Add("pause")
				w.st.Pause(d)
			}
		})
	}
	for range p.joins {
		events.Add(at(), func() {
			wmu.Lock()
			defer wmu.Unlock()
			counts.Add("join")
			id := fmt.Sprintf("w%d", nextID)
			nextID++
			rolled[id] = rollOn
			workers[id] = start(id, 0)
		})
	}
	for range p.leaves {
		events.Add(at(), func() {
			w := pick()
			wmu.Lock()
			if w == nil || len(workers) < 2 {
				wmu.Unlock()
				return
			}
			delete(workers, w.id)
			wmu.Unlock()
			counts.Add("leave")
			w.cancel()
		})
	}
	running := func(id string) bool {
		wmu.Lock()
		defer wmu.Unlock()
		w := workers[id]
		if w == nil {
			return false
		}
		return !w.st.Crashed()
	}
	events = append(events, operatorEvents(r, x, &p, world, shards, atBy, running)...)
	rollDone := make(chan struct{})
	if !p.rolling {
		close(rollDone)
	} else {
		// A rolling restart onto the other configuration: one worker after
		// another is stopped (Run's context ended and Run returned, or
		// killed) and started again a little later.
		roll := func(id string, graceful bool, d time.Duration) {
			wmu.Lock()
			w := workers[id]
			rolled[id] = true
			wmu.Unlock()
			if w == nil {
				return // it left
			}
			counts.Add("rolled")
			if graceful {
				w.cancel()
				<-w.done // the process exits before its successor starts
			} else {
				kill(w)
			}
			time.Sleep(d)
			wmu.Lock()
			defer wmu.Unlock()
			if workers[id] == w {
				incarnations[id]++
				workers[id] = start(id, incarnations[id])
			}
		}
		events.Add(time.Duration(x.Int64N(int64(p.faultsFor/4))), func() {
			wmu.Lock()
			rollOn = true
			ids := slices.Sorted(maps.Keys(workers))
			wmu.Unlock()
			step := p.faultsFor / time.Duration(2*len(ids))
			go func() {
				defer close(rollDone)
				for _, i := range x.Perm(len(ids)) {
					time.Sleep(time.Duration(x.Int64N(int64(step))))
					roll(ids[i], x.IntN(2) == 0, time.Duration(x.Int64N(int64(2*time.Second))))
				}
			}()
		})
	}
	events.Run(t0)
	time.Sleep(faultsEnd.Sub(time.Now()))

	// Faults stop: heal partitions, restart the killed, end random faults.
	if net != nil {
		net.Heal()
	}
	wmu.Lock()
	for id, w := range workers {
		if w.st.Calm() {
			incarnations[id]++
			workers[id] = start(id, incarnations[id])
		}
	}
	wmu.Unlock()
	time.Sleep(p.calmFor)
	select {
	case <-rollDone:
	case <-time.After(10 * time.Minute):
		t.Fatalf("seed %d: the rolling restart did not end: a stopped worker's Run never returned", seed)
	}
	synctest.Wait()

	snap := ledger.Snapshot()
	// With S3LECT_SIM_DEBUG (or SIMDEBUG) or -sim.trace, a failed check
	// prints the objects and the workers' figures as they stood when the
	// faults had long stopped.
	var state strings.Builder
	if err := checkTenures(shards, snap); err != nil && (simworld.Debug || *simTrace) {
		wmu.Lock()
		keys := []string{"sim/members.json"}
		for id := range workers {
			keys = append(keys, "sim/sessions/"+id+".json")
		}
		for _, key := range keys {
			d, _, _ := world.Mem.Get(context.Background(), key)
			fmt.Fprintf(&state, "%s: %s\n", key, d)
		}
		for _, s := range shards {
			if ts := snap[s]; len(ts) == 0 || !ts[len(ts)-1].End.IsZero() {
				d, _, _ := world.Mem.Get(context.Background(), "sim/shards/"+s+".json")
				fmt.Fprintf(&state, "unled %s: %s\n", s, d)
			}
		}
		for id, w := range workers {
			fmt.Fprintf(&state, "%s leads %d: %+v\n", id, len(w.p.Leading()), w.p.Stats())
		}
		wmu.Unlock()
		if simworld.Debug {
			fmt.Print(state.String())
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
		if *simTrace {
			t.Logf("seed %d: the objects at the check, and the workers' lines (-sim.trace):\n%s%s", seed, state.String(), traces.dump(err))
		}
	}
	return counts.Counts()
}

var simTraceLines = flag.Int("sim.tracelines", 40, "TestShardSimulation with -sim.trace: how many of each incarnation's last lines a failed seed prints (up to 5,000)")

var simTrace = flag.Bool("sim.trace", false, "TestShardSimulation: every worker logs at Debug into memory, and a failed seed prints the lines that name its shard and each worker's last lines (a replay is not exact: trace a long run instead)")

// simTraces keeps every worker's Debug lines in memory, for a failed
// seed's report.
type simTraces struct {
	mu    sync.Mutex
	rings []*logRing
	names []string
}

func (s *simTraces) logger(id string, incarnation int) *slog.Logger {
	r := &logRing{keep: 5000}
	s.mu.Lock()
	s.rings = append(s.rings, r)
	s.names = append(s.names, fmt.Sprintf("%s#%d", id, incarnation))
	s.mu.Unlock()
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug})).With("w", id)
}

// dump returns the lines that name the shard of err (every worker's, in
// time order) and each incarnation's last lines (-sim.tracelines).
func (s *simTraces) dump(err error) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	if m := regexp.MustCompile(`^shard (s\d+):`).FindStringSubmatch(err.Error()); m != nil {
		word := regexp.MustCompile(`\b` + m[1] + `\b`)
		var lines []string
		for _, r := range s.rings {
			for _, l := range r.all() {
				if word.MatchString(l) {
					lines = append(lines, l)
				}
			}
		}
		slices.Sort(lines) // each line begins with its time
		fmt.Fprintf(&b, "--- lines that name %s\n%s", m[1], strings.Join(lines, ""))
	}
	for i, r := range s.rings {
		l := r.all()
		fmt.Fprintf(&b, "--- %s, last lines\n%s", s.names[i], strings.Join(l[max(0, len(l)-*simTraceLines):], ""))
	}
	return b.String()
}

// checkTenures reports a shard with two overlapping leaderships, a term
// that does not exceed the one before it, or no live leader at the end.
func checkTenures(shards []string, tenures map[string][]simworld.Tenure) error {
	for _, s := range shards {
		ts := tenures[s]
		if i := simworld.Overlap(ts); i > 0 {
			prev, cur := ts[i-1], ts[i]
			return fmt.Errorf("shard %s: %s term %d (from %v) overlaps %s term %d (from %v)", s, prev.Node, prev.Term,
				prev.Start.Format("05.000"), cur.Node, cur.Term, cur.Start.Format("05.000"))
		}
		for i := 1; i < len(ts) && !*simAnyOp; i++ {
			if prev, cur := ts[i-1], ts[i]; cur.Term <= prev.Term {
				return fmt.Errorf("shard %s: term %d (%s) after term %d (%s):%s", s, cur.Term, cur.Node, prev.Term, prev.Node, simworld.Format(ts, "05.000"))
			}
		}
		if len(ts) == 0 || !ts[len(ts)-1].End.IsZero() {
			return fmt.Errorf("shard %s: no live leader once the faults had stopped for long", s)
		}
	}
	return nil
}

// peerClient returns a client over net, or nil without one.
func peerClient(net *simworld.PeerNet) *http.Client {
	if net == nil {
		return nil
	}
	return &http.Client{Transport: net}
}

// lyingHub is a PeerHandler that, while faulty, says some workers renewed
// when they did not: it makes up an ETag for each worker of its digest
// with probability one half.
type lyingHub struct {
	h      http.Handler
	faulty func() bool
	mu     sync.Mutex
	r      *rand.Rand
}

func (l *lyingHub) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rec := httptest.NewRecorder()
	l.h.ServeHTTP(rec, req)
	var d digest
	if rec.Code != http.StatusOK || !l.faulty() || decode(rec.Body.Bytes(), &d, func() int { return d.Pool }) != nil {
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	l.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(d.Sessions)) {
		if l.r.IntN(2) == 0 {
			d.Sessions[id] = peerSession{ETag: fmt.Sprintf("made-up-%d", l.r.Uint64()), Sum: d.Sessions[id].Sum}
		}
	}
	l.mu.Unlock()
	w.Write(encode(d))
}
