package s3lect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
)

var simStrictHolder = flag.Bool("sim.strictholder", true, "stepdown variants: a holder's work ends when it calls Resign or Transfer, not when its context ends (review of issue 29)")

// simVariant is one family of worlds the simulation explores. Every
// variant runs each node's clock at its own rate, within 5% of real time.
type simVariant struct {
	name        string
	peer        bool // peer mode over an in-memory transport that fails, stalls, delays and answers stale
	midTakeover bool // Campaign contexts end, and electors are closed and restarted, at random and during takeovers
	rewind      bool // the store loses acknowledged writes and hands their revisions out again
	mixed       bool // each node has its own FrequentInterval and LeaderTimeout, within 20% of the seed's
	spread      bool // each node has its own LeaderTimeout, a half to three times the seed's (restorer worlds: a group left mid-way through a configuration change)
	rolling     bool // nodes are restarted one by one, mid-run, onto another configuration
	foreign     bool // a writer without terms, leases or ttl (the original s3lect, or worse) takes the lockfile now and then
	deleter     bool // the lockfile, its term object, or both are deleted now and then
	stepDown    bool // operators write step-down requests (s3lect release), some to a named member, some at once; holders Transfer (review of issue 29)
	announce    bool // holders announce their release, drain, then Resign or Transfer (sim_announce_test.go)
	suspend     bool // hosts are suspended now and then: monotonic clocks stop, calls wait for the resume (sim_restore_test.go)
	restore     bool // an operator puts earlier versions of the lockfile, its term object or both back; the seed draws which, and the mode (sim_restore_test.go)
}

var simVariants = []simVariant{
	{name: "storage"},
	{name: "peer", peer: true},
	{name: "midtakeover", midTakeover: true},
	{name: "rewind", rewind: true},
	{name: "mixedlease", mixed: true},
	{name: "rolling", rolling: true},
	{name: "foreign", foreign: true},
	{name: "deleter", deleter: true},
	{name: "stepdown", stepDown: true},
	{name: "stepdownpeer", stepDown: true, peer: true},
	{name: "stepdownforeign", stepDown: true, foreign: true},
}

// TestSafetySimulation runs randomized fault schedules against groups of
// electors in virtual time and checks that live leadership contexts never
// overlap, that terms only rise, and that a leader exists soon after the
// faults stop. A failing seed replays with -sim.seed=N.
func TestSafetySimulation(t *testing.T) {
	defer setMutation(t)()
	for _, v := range simVariants {
		t.Run(v.name, func(t *testing.T) {
			simworld.Seeds(t, v.name, func(t *testing.T, seed int64) map[string]int { return simulate(t, seed, v) })
		})
	}
}

// simParams is one seed's world.
type simParams struct {
	nodes              int
	fi, ii, lt         time.Duration
	faultsFor          time.Duration // faults stop after this
	calmFor            time.Duration // then the group runs fault-free this long
	faults             simworld.Faults
	partitions, crashs int

	// Per-node configurations (mixed and rolling variants): node i runs
	// cfgs[i][0] until it is rolled, then cfgs[i][1]. maxFI and maxLT are
	// the longest of every configuration, for the liveness bound.
	cfgs         [][2]simCfg
	maxFI, maxLT time.Duration
}

// simCfg is one node's timing configuration.
type simCfg struct{ fi, ii, lt time.Duration }

// newSimCfg draws a configuration as newSimParams does.
func newSimCfg(r *rand.Rand) simCfg {
	fi, lt := simworld.DrawTiming(r)
	return simCfg{fi: fi, ii: fi * time.Duration(1+r.IntN(3)), lt: lt}
}

// jitter returns c with FrequentInterval and LeaderTimeout each moved by
// up to 20%, kept valid.
func (c simCfg) jitter(r *rand.Rand) simCfg {
	f := func(d time.Duration) time.Duration { return time.Duration(float64(d) * (0.8 + 0.4*r.Float64())) }
	c.fi, c.lt = f(c.fi), f(c.lt)
	c.lt = max(c.lt, 2*c.fi+time.Millisecond)
	c.ii = max(c.ii, c.fi)
	return c
}

// setCfgs gives every node its configurations for variant v and sets the
// longest intervals.
func (p *simParams) setCfgs(r *rand.Rand, v simVariant) {
	base := simCfg{p.fi, p.ii, p.lt}
	other := base
	if v.rolling {
		other = newSimCfg(r)
	}
	p.cfgs = make([][2]simCfg, p.nodes)
	p.maxFI, p.maxLT = p.fi, p.lt
	for i := range p.cfgs {
		c := [2]simCfg{base, other}
		if v.mixed {
			c[0] = base.jitter(r)
			c[1] = c[0]
		}
		if v.spread {
			// A LeaderTimeout of a half to three times the seed's, as
			// far apart as operators' changes go.
			c[0].lt = max(time.Duration(float64(base.lt)*[]float64{0.5, 1, 2, 3}[r.IntN(4)]), 2*base.fi+time.Millisecond)
			c[1] = c[0]
		}
		p.cfgs[i] = c
		for _, x := range c {
			p.maxFI, p.maxLT = max(p.maxFI, x.fi), max(p.maxLT, x.lt)
		}
	}
}

// livenessBound is how soon after the faults stop a leader must lead
// (checkIntervals).
func (p simParams) livenessBound() time.Duration {
	return (2*p.maxLT + p.maxFI + 3*p.maxFI + 1100*time.Millisecond) * 21 / 20
}

func newSimParams(r *rand.Rand) simParams {
	fi, lt := simworld.DrawTiming(r)
	return simParams{
		nodes:     2 + r.IntN(4),
		fi:        fi,
		ii:        fi * time.Duration(1+r.IntN(3)),
		lt:        lt,
		faultsFor: 20 * time.Second,
		calmFor:   25 * time.Second, // the peer variant strikes once more half-way, and needs a liveness bound after it
		faults: simworld.Faults{
			ErrRate:   r.Float64() * 0.2,
			LostRate:  r.Float64() * 0.1,
			HangRate:  r.Float64() * 0.05,
			Latency:   time.Duration(r.Int64N(int64(fi / 2))),
			Spike:     lt + time.Duration(r.Int64N(int64(lt))),
			SpikeRate: 0.01,
		},
		partitions: 1 + r.IntN(8),
		crashs:     r.IntN(4),
	}
}

type simNode struct {
	id     string
	addr   string
	st     *simworld.Store
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{}
	closed atomic.Bool // closed on purpose (mid-takeover variant); restarted later
}

func simulate(t *testing.T, seed int64, v simVariant) map[string]int {
	counts, _ := simulateSeed(t, seed, v)
	return counts
}

// simulateSeed runs one seed of variant v and returns its counters and
// the hash of its ledger (simworld.Hash): the same on every run of the
// seed. Everything that happens at one virtual instant and touches the
// shared world (store calls, operators, scheduled faults) goes through
// one simworld.Gate, in an order drawn from the seed; every random draw
// comes from a generator of its own, seeded by the seed and used by one
// goroutine at a time.
func simulateSeed(t *testing.T, seed int64, v simVariant) (map[string]int, string) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5133c7))
	var rs *simRestorer
	if v.restore {
		rs = newSimRestorer(seed, &v) // draws the objects and the mode: storage, peer or mid-takeover
	}
	p := newSimParams(r)
	p.setCfgs(rand.New(rand.NewPCG(uint64(seed), 0xc0f6)), v)
	if rs != nil && rs.v2 {
		// The claims made for the version 2 writer's term state the
		// lease assumed for it, and the term object's ttl never falls:
		// every lease waited in this group is at least that from then on
		// (seed 13238: a stale peer after the faults waited out twice).
		p.maxLT = max(p.maxLT, noTTLLease)
	}
	if rs != nil {
		// The peer mode's last crash comes half-way through the calm: the
		// liveness bound, and a lease more (below), must fit in the half
		// after it where leases differ (up to three times the seed's).
		p.calmFor = max(p.calmFor, 2*(p.livenessBound()+p.maxLT*21/20+time.Second))
	}
	if rs != nil && rs.v2 {
		// The version 2 release the run starts from is waited out with
		// the lease assumed for records without ttl; the restores come
		// after, and a restored record without ttl is waited out so too.
		p.faultsFor += noTTLLease
		p.calmFor += 2 * noTTLLease
	}
	if v.foreign {
		p.calmFor += noTTLLease // records without ttl are waited out with the lease assumed for them
	}
	if v.deleter {
		p.calmFor += 2 * noTTLLease // a deleted lockfile: its absence, then the recreated record, waited out
	}
	w := simworld.NewWorld(p.faults)
	mem, counts := w.Mem, w.Counts
	gate := simworld.NewGate()
	w.Gate = gate
	stopGate := make(chan struct{})
	go gate.Run(stopGate)
	if rs != nil {
		rs.bind(w, gate, counts)
		if rs.v2 {
			rs.seedV2(p.lt)
		}
	}
	var (
		rw        *simworld.Rewind
		lostTerms = map[uint64]bool{} // terms of takeovers the store lost
	)
	if v.rewind {
		rw = w.UseRewind()
	}
	shared := w.Shared
	peers := simworld.NewPeerNet(rand.New(rand.NewPCG(uint64(seed), 0x9ee4)))
	var (
		ledger simworld.Ledger // the leaderships
		mu     sync.Mutex      // guards lostTerms, lastLand, lastForeign, lastDelete and wipes
		nmu    sync.Mutex      // guards nodes and incarnations
	)
	t0 := time.Now()
	faultsEnd := t0.Add(p.faultsFor)
	faulty := func() bool { return time.Now().Before(faultsEnd) }
	// lastLand is when the last write of the lockfile or its term object
	// landed: a takeover's lease starts with its term-object write.
	var lastLand time.Time
	landed := func(key string) {
		mu.Lock()
		lastLand = time.Now()
		mu.Unlock()
		rs.landed(key)
	}
	nodes := make([]*simNode, p.nodes)
	incarnations := make([]int, p.nodes)
	rolled := make([]bool, p.nodes) // node i runs its second configuration (rolling variant)
	var start func(i, incarnation int) *simNode
	sleeps := &simSleeps{}

	// restartLater starts node i again after a while, unless it was
	// restarted meanwhile.
	restartLater := func(i int, n *simNode, d time.Duration) {
		time.AfterFunc(d, func() {
			nmu.Lock()
			defer nmu.Unlock()
			if nodes[i] == n && (n.closed.Load() || n.st.Crashed()) {
				counts.Add("restart")
				incarnations[i]++
				nodes[i] = start(i, incarnations[i])
			}
		})
	}

	// start runs one incarnation of node i: campaign, hold for a while,
	// resign or lose, campaign again.
	start = func(i, incarnation int) *simNode {
		id := fmt.Sprintf("n%d", i)
		nr := rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation)))
		st := w.NewStore(nr, faulty())
		st.OnLand = landed
		st.Name = fmt.Sprintf("n%d/%d", i, incarnation)
		c := p.cfgs[i][0]
		if rolled[i] {
			c = p.cfgs[i][1]
		}
		cfg := ElectorConfig{Store: st, LockfilePath: testKey, ServerID: id, ServerAddr: id + ":1",
			FrequentInterval: c.fi, InfrequentInterval: c.ii, LeaderTimeout: c.lt, Logger: quietLogger}
		if simworld.Debug {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stdout, nil)).With("node", id)
		}
		if v.peer {
			pr := rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation+800)))
			cfg.PeerMode, cfg.PeerClient = true, &http.Client{Transport: peers.From(fmt.Sprintf("n%d/%d", i, incarnation), pr)}
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: New() = %v", seed, err)
		}
		lr := rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation+900)))
		e.newLease = func() string { return fmt.Sprintf("%016x", lr.Uint64()) } // drawn by the run loop alone
		// Each incarnation's clock runs at its own rate, within 5%.
		e.clock.Rate = simworld.ClockRate(nr, false)
		e.clock.Virtual = true
		if v.suspend {
			e.clock.Slept = sleeps.host(i, incarnation)
		}
		if v.peer {
			peers.Add(cfg.ServerAddr, PeerHandler(e))
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := &simNode{id: id, addr: cfg.ServerAddr, st: st, e: e, cancel: cancel, done: make(chan struct{})}
		hr := rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation+500)))
		var (
			cmu       sync.Mutex
			camCancel context.CancelFunc // the waiting Campaign's, if any
			leading   bool
		)
		if v.midTakeover {
			mr := rand.New(rand.NewPCG(uint64(seed), uint64(i*1000+incarnation+700)))
			st.OnPut = func() {
				// A write of a node that does not lead is a takeover (or
				// the release of one won for a withdrawn Campaign).
				cmu.Lock()
				defer cmu.Unlock()
				if leading || !faulty() {
					return
				}
				if rs != nil && mr.IntN(4) == 0 {
					rs.soon(time.Duration(mr.Int64N(int64(p.fi)))) // a restore while the takeover is written
				}
				switch x := mr.Float64(); {
				case x < 0.15 && camCancel != nil:
					counts.Add("campaign ended mid-takeover")
					camCancel()
				case x < 0.2:
					counts.Add("closed mid-takeover")
					n.closed.Store(true)
					go func() { cancel(); e.Close() }()
					restartLater(i, n, time.Duration(mr.Int64N(int64(3*p.lt))))
				}
			}
		}
		go func() {
			defer close(n.done)
			for ctx.Err() == nil {
				cctx, ccancel := context.WithCancel(ctx)
				if v.midTakeover && hr.IntN(3) == 0 && faulty() {
					time.AfterFunc(time.Duration(hr.Int64N(int64(2*p.lt))), ccancel)
				}
				cmu.Lock()
				camCancel = ccancel
				cmu.Unlock()
				l, err := e.Campaign(cctx)
				cmu.Lock()
				camCancel = nil
				cmu.Unlock()
				if err != nil {
					ccancel()
					if errors.Is(err, ErrClosed) || ctx.Err() != nil {
						return
					}
					continue // the Campaign's own context ended: campaign again
				}
				iv := ledger.Start("", id, l.Term())
				cmu.Lock()
				leading = true
				cmu.Unlock()
				context.AfterFunc(l.Context(), func() {
					cause := context.Cause(l.Context())
					switch {
					case errors.Is(cause, ErrLeaseExpired):
						counts.Add("ended: lease expired")
					case errors.Is(cause, ErrLeadershipLost):
						counts.Add("ended: lost")
					case errors.Is(cause, ErrResigned):
						counts.Add("ended: resigned")
					}
					ledger.End(iv)
				})
				hold := time.NewTimer(time.Duration(hr.Int64N(int64(20 * time.Second))))
				select {
				case <-l.Context().Done():
					if v.stepDown && ctx.Err() == nil {
						// The holder stops its work a while after the
						// context ends (s3lect run: its command exits),
						// then says so: a step-down is released then.
						// A holder asked to step down takes its time:
						// up to a FrequentInterval.
						// Its work is stopped by its lease's end at the
						// latest (s3lect run kills its command's group).
						leaseEnd := time.Now().Add(l.e.clock.RealUntil(l.e.clock.Base.Add(time.Duration(l.deadline.Load()))))
						asked := false
						if data, _, err := shared.Get(context.Background(), testKey); err == nil && errors.Is(context.Cause(l.Context()), ErrLeadershipLost) {
							rec, err := ParseRecord(data)
							asked = err == nil && rec.StepDown != "" && rec.LeaderID == id && rec.Term == l.Term()
						}
						if errors.Is(context.Cause(l.Context()), ErrAskedToStepDown) {
							asked = true // an announced step-down (section 11.5): the moment came
							counts.Add("announced step-down")
						}
						if asked {
							time.Sleep(time.Duration(hr.Int64N(int64(p.fi))))
						}
						if end := time.Now(); asked && *simStrictHolder {
							if end.After(leaseEnd) {
								end = leaseEnd
							}
							// Its work ran until end: a release must not
							// let anyone lead before.
							ledger.Extend(iv, end)
						}
						switch hr.IntN(3) {
						case 0:
							l.Resign(ctx)
						case 1:
							l.Transfer(ctx, fmt.Sprintf("n%d", hr.IntN(p.nodes+1))) // n<nodes> runs nowhere
						}
					}
				case <-ctx.Done():
				case <-hold.C:
					switch {
					case v.announce && faulty():
						simAnnouncedEnd(ctx, l, hr, p, &ledger, iv, counts)
					case faulty() && v.stepDown && hr.IntN(2) == 0:
						l.Transfer(ctx, fmt.Sprintf("n%d", hr.IntN(p.nodes+1)))
					case faulty() && hr.IntN(2) == 0:
						l.Resign(ctx)
					default:
						<-l.Context().Done() // hold until lost or stopped
					}
				}
				hold.Stop()
				<-l.exited
				ccancel()
				cmu.Lock()
				leading = false
				cmu.Unlock()
			}
		}()
		return n
	}
	// crash stops n abruptly: its live leadership ends now as far as the
	// world is concerned, and it never reaches the store again. In peer
	// mode its address refuses connections from then on, or, half the
	// time, something there keeps answering with its last record.
	crash := func(n *simNode, forceStale bool) {
		n.st.Crash()
		ledger.Kill(n.id)
		if v.peer {
			var stale []byte
			if snap := n.e.snap.Load(); snap.lead != nil && (forceStale || peers.Roll() < 0.5) {
				stale, _ = json.Marshal(peerRecord{Record: snap.rec, ETag: snap.etag})
				counts.Add("stale peer")
			}
			peers.Crash(n.addr, stale)
		}
		n.cancel()
		go n.e.Close() // reaps its goroutines; its calls go nowhere
	}

	nmu.Lock()
	for i := range nodes {
		nodes[i] = start(i, 0)
	}
	nmu.Unlock()
	node := func(i int) *simNode {
		nmu.Lock()
		defer nmu.Unlock()
		return nodes[i]
	}

	var events simworld.Schedule
	var rollFrom, rollTo time.Duration // when the rolling restart runs (rolling variant)
	// leaderOr returns the index of the node that leads now, or i if none.
	leaderOr := func(i int) int {
		if id, ok := ledger.Live(""); ok {
			return int(id[1] - '0')
		}
		return i
	}
	for range p.partitions {
		i := r.IntN(p.nodes)
		targetLeader := r.IntN(3) > 0 // most partitions cut off whoever leads
		at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
		d := time.Duration(r.Int64N(int64(3 * p.lt)))
		var cut *simNode
		events.Add(at, func() {
			if targetLeader {
				i = leaderOr(i)
			}
			counts.Add("partition")
			cut = node(i)
			cut.st.Partition(targetLeader)
		})
		events.Add(at+d, func() { cut.st.Heal() })
	}
	for range p.crashs {
		i := r.IntN(p.nodes)
		at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
		d := time.Duration(r.Int64N(int64(10 * time.Second)))
		events.Add(at, func() {
			n := node(i)
			if n.closed.Load() || n.st.Crashed() {
				return
			}
			counts.Add("crash")
			crash(n, false)
			restartLater(i, n, d)
		})
	}
	if v.rolling {
		// A rolling restart onto the second configuration: one node after
		// another is stopped (closed, or killed) and started again.
		at := time.Duration(r.Int64N(int64(p.faultsFor / 4)))
		rollFrom = at
		for _, i := range r.Perm(p.nodes) {
			at += time.Duration(r.Int64N(int64(p.faultsFor / time.Duration(2*p.nodes))))
			rollTo = at
			graceful := r.IntN(2) == 0
			d := time.Duration(r.Int64N(int64(2 * time.Second)))
			events.Add(at, func() {
				nmu.Lock()
				rolled[i] = true
				nmu.Unlock()
				n := node(i)
				if n.closed.Load() || n.st.Crashed() {
					return // it starts on the new configuration
				}
				counts.Add("rolled")
				if graceful {
					n.closed.Store(true)
					go func() { n.cancel(); n.e.Close() }()
				} else {
					crash(n, false)
				}
				restartLater(i, n, d)
			})
		}
	}
	// lastForeign is when the last record without ttl was written: it is
	// waited out with the lease assumed for such records, so the liveness
	// bound runs from its end. wipes are the times both the lockfile and
	// its term object were absent after a deletion: terms may start again
	// from there (docs/protocol.md, 1.1).
	var (
		lastForeign, lastDelete time.Time
		wipes                   []time.Time
	)
	live := func() bool {
		_, ok := ledger.Live("")
		return ok
	}
	if v.foreign {
		// A writer without terms, leases or ttl takes the lockfile over
		// with a conditional write on what it read, as the original
		// s3lect does, but whenever it likes, live lease or not; renews a
		// few times; then releases it or stops.
		for k := range 1 + r.IntN(4) {
			at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
			renewals, release := r.IntN(4), r.IntN(2) == 0
			events.Add(at, func() {
				rec := func(release bool) []byte {
					w := time.Now().UTC()
					if release {
						w = time.Time{}
					}
					b, _ := json.Marshal(struct {
						LeaderID    string    `json:"leaderID"`
						LeaderAddr  string    `json:"leaderAddr"`
						LastUpdated time.Time `json:"lastUpdated"`
					}{fmt.Sprintf("orig%d", k), "orig:1", w})
					return b
				}
				_, tag, err := mem.Get(context.Background(), testKey)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return
				}
				tag, err = mem.PutIfMatch(context.Background(), testKey, rec(false), tag)
				if err != nil {
					return
				}
				name := fmt.Sprintf("~foreign%d", k)
				counts.Add("foreign takeover")
				mu.Lock()
				lastForeign = time.Now()
				mu.Unlock()
				go func() {
					for j := range renewals + 1 {
						time.Sleep(p.fi)
						last := j == renewals
						if last && !release {
							return // it stops: its record stays
						}
						gate.Do(name, func() { tag, err = mem.PutIfMatch(context.Background(), testKey, rec(last), tag) })
						if err != nil {
							return // someone else took it
						}
						counts.Add("foreign write")
						mu.Lock()
						lastForeign = time.Now()
						mu.Unlock()
					}
				}()
			})
		}
	}
	if v.deleter {
		// Deletions of the lockfile, its term object or both. Both
		// objects are left absent only while no leadership is live: a
		// freshly started elector that finds neither cannot know of a
		// live lease (docs/protocol.md, 1.1).
		for range 1 + r.IntN(4) {
			at := time.Duration(r.Int64N(int64(p.faultsFor - 5*time.Second)))
			what := r.IntN(3)
			events.Add(at, func() {
				// Every elector is blocked (the event runs through the
				// gate): what live and exists see holds until the
				// deletions are done.
				exists := func(key string) bool {
					_, _, err := mem.Get(context.Background(), key)
					return err == nil
				}
				lock, term := exists(testKey), exists(testKey+termSuffix)
				delLock, delTerm := what != 1, what != 0
				// The term object is deleted only with no lease live: no
				// leadership reported live, and no write of either object
				// landed for a lease (a takeover's lease starts with its
				// term-object write, before Campaign returns). Deleting
				// it, or both objects, under a live lease is the limit
				// docs/protocol.md, 1.1, states.
				mu.Lock()
				quiet := time.Since(lastLand) > p.maxLT*21/20
				mu.Unlock()
				calm := quiet && !live()
				if !calm {
					delTerm = false
				}
				bothGone := (delLock || !lock) && (delTerm || !term)
				if bothGone && !calm {
					return
				}
				if delLock && lock {
					mem.Delete(testKey)
					counts.Add("lockfile deleted")
					simworld.Debugf("DELETE lockfile")
				}
				if delTerm && term {
					mem.Delete(testKey + termSuffix)
					counts.Add("term object deleted")
					simworld.Debugf("DELETE term object")
				}
				mu.Lock()
				lastDelete = time.Now()
				if bothGone {
					wipes = append(wipes, time.Now())
				}
				mu.Unlock()
			})
		}
	}
	if v.stepDown {
		// Operators run s3lect release (requestStepDown's write: the
		// record as read, plus stepDown and to, If-Match on what was
		// read), now and then two at once.
		for k := range 1 + r.IntN(6) {
			at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
			to := ""
			if x := r.IntN(p.nodes + 2); x <= p.nodes {
				to = fmt.Sprintf("n%d", x)
			}
			again := time.Duration(-1)
			if r.IntN(3) == 0 {
				again = time.Duration(r.Int64N(int64(p.fi)))
			}
			announced := r.IntN(2) == 0
			request := func(to string) {
				data, tag, err := shared.Get(context.Background(), testKey)
				if err != nil {
					return
				}
				rec, err := ParseRecord(data)
				if err != nil || rec.LastUpdated.IsZero() || rec.LeaderID == to {
					return
				}
				rec.StepDown, rec.To = fmt.Sprintf("op%d", k), to
				if announced {
					rec.ReleaseAt = max(rec.Held, 1) // s3lect release without -now (section 11.5)
				}
				b, _ := json.Marshal(rec)
				if _, err := shared.PutIfMatch(context.Background(), testKey, b, tag); err == nil {
					counts.Add("step-down request")
				}
			}
			events.Add(at, func() {
				request(to)
				if again >= 0 {
					time.AfterFunc(again, func() { request("") })
				}
			})
		}
	}
	if rs != nil {
		sw := simRestoreWorld{gate: gate, counts: counts, rollFrom: rollFrom, rollTo: rollTo, leasesDiffer: v.mixed || v.spread || v.rolling,
			leader: func() *simNode {
				if i := leaderOr(-1); i >= 0 {
					return node(i)
				}
				return nil
			},
			current: func(n *simNode) bool {
				nmu.Lock()
				defer nmu.Unlock()
				for _, m := range nodes {
					if m == n {
						return !n.closed.Load() && !n.st.Crashed()
					}
				}
				return false
			},
			restart: func(i int, d time.Duration) {
				n := node(i)
				if leaderOr(-1) == i || n.closed.Load() || n.st.Crashed() {
					return
				}
				counts.Add("follower restarted at a restore")
				crash(n, false)
				restartLater(i, n, d)
			}}
		if v.peer {
			sw.peers = peers
		}
		rs.limitB = func(data []byte) bool {
			var views, live []Record
			blind := 0
			nmu.Lock()
			for _, n := range nodes {
				if n.closed.Load() || n.st.Crashed() {
					continue
				}
				snap := n.e.snap.Load()
				if snap != nil && snap.lead != nil {
					live = append(live, Record{LeaderID: n.id, Term: snap.lead.Term()})
				}
				if top := rs.newest(); top.LeaderID == n.id {
					live = append(live, top) // perhaps not handed out yet, its lease running
				}
				switch {
				case snap == nil || snap.lead != nil:
				case snap.change.Leader.LeaderID == "":
					blind++
				default:
					views = append(views, snap.change.Leader)
				}
			}
			nmu.Unlock()
			return inLimitB(data, views, live, blind)
		}
		rs.schedule(r, p, &events, sw)
	}
	if v.suspend {
		addSuspends(r, p, &events, counts, sleeps, func(i int) (*simworld.Store, int) {
			nmu.Lock()
			defer nmu.Unlock()
			return nodes[i].st, incarnations[i]
		}, leaderOr)
	}
	if v.rewind {
		// The store crashes now and then, loses its last one or two
		// acknowledged writes, and is back after an outage.
		for range 1 + r.IntN(4) {
			at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
			lost := 1 + r.IntN(2)
			// An OS crash and reboot: the store is gone for at least a
			// LeaderTimeout, as every lease from before it ran out. (A
			// store that loses acknowledged writes and is back sooner
			// breaks the store contract in a way no follower can see:
			// docs/protocol.md, section 2.)
			outage := p.lt + time.Duration(r.Int64N(int64(p.lt)))
			events.Add(at, func() {
				if rewindCrash(rw, lost, outage, func(term uint64) {
					mu.Lock()
					defer mu.Unlock()
					lostTerms[term] = true
				}) {
					counts.Add("store rewound")
				}
			})
		}
	}
	// The scheduled faults and operators act through the gate, each at a
	// quiescent moment of its instant.
	for i := range events {
		events[i].Fn = gate.Wrap("~event", events[i].Fn)
	}
	events.Run(t0)
	time.Sleep(faultsEnd.Sub(time.Now()))

	// Faults stop: heal partitions and the peer transport, restart the
	// crashed and the closed, end random faults.
	peers.Heal()
	nmu.Lock()
	for i, n := range nodes {
		if n.st.Calm() || n.closed.Load() {
			incarnations[i]++
			nodes[i] = start(i, incarnations[i])
		}
	}
	nmu.Unlock()
	lastFault := faultsEnd
	if v.peer {
		// Once calm, the leader dies for good and something at its address
		// keeps answering with its last record: a follower must still
		// take over within the bound.
		time.Sleep(p.calmFor / 2)
		if i := leaderOr(-1); i >= 0 {
			counts.Add("stale peer after the faults")
			lastFault = time.Now()
			crash(node(i), true)
		}
		time.Sleep(p.calmFor / 2)
	} else {
		time.Sleep(p.calmFor)
	}
	gate.Sync()

	ivs := ledger.Snapshot()[""] // before Close below ends the live ones
	nmu.Lock()
	final := slices.Clone(nodes)
	nmu.Unlock()
	for _, n := range final {
		n.cancel()
		n.e.Close()
		<-n.done
	}
	gate.Sync() // the crashed and closed incarnations' Close calls
	close(stopGate)
	mu.Lock()
	if !lastForeign.IsZero() {
		// A record without ttl is waited out with the lease assumed for
		// it from each elector's first sight, and electors restarted when
		// the faults stop see it first then.
		lastFault = latest(lastFault, latest(lastForeign, faultsEnd).Add(max(p.maxLT, noTTLLease)*21/20))
	}
	if last := rs.last(); !last.IsZero() {
		// A restored record, or a release below a claimed term, is waited
		// out from its first sight, and a takeover that finds a term
		// claimed since waits out a lease more (docs/protocol.md, 1.1).
		l := p.maxLT * 21 / 20
		if rs.v2 {
			l = max(p.maxLT, noTTLLease) * 21 / 20 // the version 2 writer's records have no ttl
		}
		lastFault = latest(lastFault, latest(faultsEnd.Add(l), last.Add(2*l)))
	}
	if rs != nil && rs.v2 {
		// The version 2 release, which may still be there, is waited
		// out with the lease assumed for it from each elector's first
		// sight (electors restarted when the faults stop see it first
		// then), and a takeover refused at the claim of its term (one
		// made for it by a takeover that failed after) waits out that
		// claim's lease, at least noTTLLease (docs/protocol.md, 1.2).
		l := max(p.maxLT, noTTLLease) * 21 / 20
		lastFault = latest(lastFault, faultsEnd.Add(2*l))
	}
	if !lastDelete.IsZero() {
		// An absence is watched from its first sight, and once more from
		// the takeover's read of a changed term object, then the
		// recreated lockfile's leadership waits a lease before it is
		// handed out; a deleted record nobody saw is assumed to hold the
		// longest lease.
		l := max(p.maxLT, noTTLLease) * 21 / 20
		lastFault = latest(lastFault, latest(faultsEnd.Add(2*l), lastDelete.Add(3*l)))
	}
	if rs != nil && (v.spread || rs.v2) {
		// A takeover that finds a term claimed since it first saw the
		// lockfile waits out a lease anew (docs/protocol.md, 1.1): with
		// the wait before it and a recreated lockfile's, or a stale
		// peer's, a third lease, which the bound's FrequentIntervals
		// cover only while a lease is at most about five of them (seed
		// 2602: a lease of ten; seed 13238: the 15 s of a version 2
		// history, a stale peer after the faults).
		lastFault = lastFault.Add(p.maxLT * 21 / 20)
	}
	allowed := slices.Clone(wipes)
	lost := maps.Clone(lostTerms)
	mu.Unlock()
	out := counts.Counts()
	hash := simworld.Hash(ivs, out)
	if *simHashes {
		t.Logf("seed %d (%s): ledger %s", seed, v.name, hash)
	}
	if err := checkIntervals(p, ivs, lastFault, func(term uint64) bool { return lost[term] }, allowed); err != nil {
		t.Errorf("seed %d (%s): %v\nparams %+v\nledger %s:%s\nreplay with -run 'TestSafetySimulation/%s' -sim.seed=%d",
			seed, v.name, err, p, hash, simworld.Format(ivs, "15:04:05.000000000"), v.name, seed)
	}
	return out, hash
}

// rewindCrash crashes the rewind store, losing its last lost writes for
// outage, and calls lostTerm with the term of each takeover it lost. It
// reports whether anything was lost.
func rewindCrash(rw *simworld.Rewind, lost int, outage time.Duration, lostTerm func(uint64)) bool {
	kept, gone := rw.Crash(lost, outage)
	before := uint64(0)
	for i := len(kept) - 1; i >= 0; i-- {
		if kept[i].Key == testKey {
			if rec, err := ParseRecord(kept[i].Data); err == nil {
				before = rec.Term
			}
			break
		}
	}
	for _, w := range gone {
		if rec, err := ParseRecord(w.Data); err == nil && w.Key == testKey && rec.Term > before {
			lostTerm(rec.Term)
		}
	}
	return len(gone) > 0
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// checkIntervals reports overlapping leaderships, a term that does not
// rise, or no steady leader within the liveness bound after the faults
// stop at healed.
//
// A term may repeat, or a lower one follow, only when lostTerm says the
// store lost the takeovers that used the higher ones, or after a wipe (a
// time both the lockfile and its term object were deleted): their
// successors cannot have known them (docs/protocol.md, section 1). Every
// other term must exceed every term before it that the store kept.
func checkIntervals(p simParams, ivs []simworld.Tenure, healed time.Time, lostTerm func(uint64) bool, wipes []time.Time) error {
	if i := simworld.Overlap(ivs); i > 0 {
		prev, cur := ivs[i-1], ivs[i]
		return fmt.Errorf("%s term %d overlaps %s term %d:%s", prev.Node, prev.Term, cur.Node, cur.Term, simworld.Format(ivs, "15:04:05.000"))
	}
	var kept *simworld.Tenure // the earlier leadership with the highest term the store kept
	for i := 1; i < len(ivs); i++ {
		prev, cur := &ivs[i-1], &ivs[i]
		if !lostTerm(prev.Term) && (kept == nil || prev.Term > kept.Term) {
			kept = prev
		}
		for _, w := range wipes {
			if kept != nil && w.After(kept.Start) && !w.After(cur.Start) {
				kept = nil // terms may start again after a wipe
			}
		}
		if kept != nil && cur.Term <= kept.Term {
			return fmt.Errorf("term went from %d (%s) to %d (%s):%s", kept.Term, kept.Node, cur.Term, cur.Node, simworld.Format(ivs, "15:04:05.000"))
		}
	}
	// Liveness: once faults stop, a leader must appear within two
	// LeaderTimeouts + FrequentInterval + the retry budget (three attempts of at most
	// FrequentInterval and 1.1 s of waits), and then keep leading.
	// Clock rates within 5% stretch every wait by as much.
	//
	// A lockfile that is absent while its term object exists (a takeover
	// raised the term and failed before its write, or the lockfile was
	// deleted) is watched for a lease from the raise, and the leadership
	// that recreates it is handed out a lease after the write
	// (docs/protocol.md, 4): one LeaderTimeout more.
	bound := p.livenessBound()
	if len(ivs) == 0 {
		return errors.New("no leader ever")
	}
	if last := ivs[len(ivs)-1]; !last.End.IsZero() || last.Start.After(healed.Add(bound)) {
		return fmt.Errorf("no steady leader within %v of the faults stopping at %s:%s", bound, healed.Format("15:04:05.000"), simworld.Format(ivs, "15:04:05.000"))
	}
	return nil
}
