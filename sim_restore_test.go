package s3lect

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store/memstore"
)

// The safety simulation's variants of issue 43: hosts that are suspended
// (suspender) and operators who restore earlier versions of the lockfile
// and its term object (restorer).

func init() {
	simVariants = append(simVariants,
		simVariant{name: "suspender", suspend: true},
		simVariant{name: "restorer", restore: true},
	)
}

// simRestorer is the restorer variant's operator: 1 to 8 times a run it
// puts back one of the last four versions of the lockfile, its term
// object or both (S3 versioning's restore, a backup sync), as the seed
// draws: always the lockfile, always the term object, always both, or
// any of the three each time. The seed also draws the mode: storage,
// peer mode (over a transport that fails, stalls and answers stale), or
// mid-takeover (Campaigns ended and electors closed during takeovers),
// where a takeover's write also sets off a restore of the lockfile
// within a FrequentInterval, one time in four. Every restore runs
// through the gate. Term claims are never restored: a claim has only
// one version.
//
// The seed also draws the leases (newSimRestorer): one LeaderTimeout for
// every node, or each node's own, within 20% of the seed's (mixedlease)
// or a half to three times the seed's (spread: a group left mid-way
// through a configuration change), or a rolling change onto another (rolling), where a restore of an older leadership's record
// states a shorter lease than the live one's (protocol.md 2.1, the
// longest lease known). And one world in three starts from a bucket a
// version 2 writer used (seedV2): a version 3 leadership at term 1
// released, then a version 2 writer's takeover at term 2 and its release,
// both in the versions the operator may restore; there half the restores
// also restart a follower, which then knows no term but what it reads
// (protocol.md 1.2, the version 2 writer's terms claimed for it).
type simRestorer struct {
	what int // 0 lockfile, 1 term object, 2 both, 3 any
	r    *rand.Rand
	v2   bool // the bucket's history has a version 2 writer's term 2 (seedV2)

	// kept holds, per object, its last eight versions that landed, and
	// for the lockfile its last four releases apart: the backups an
	// operator may restore. Only the gated writes touch it.
	kept     map[string][][]byte
	releases [][]byte
	before   []byte // the lockfile's last version before the last takeover
	top      Record // the landed lockfile write with the highest term: its leadership may be live before it is handed out
	mem      *memstore.Store

	put func(key string, data []byte) // set by bind
	// limitB reports whether putting data back in the lockfile could
	// fall in protocol.md 2.1's limit (b): set by the run.
	limitB func(data []byte) bool
	fire   func(keys []string, early bool) // set by bind; early: the lockfile from before the last takeover, if kept
	soonFn func(d time.Duration)           // set by bind
	mu     sync.Mutex
	at     time.Time // the last restore
}

var simRestoreWhat = [...]string{"lockfile", "term object", "both", "any"}

// newSimRestorer draws the restorer's objects and mode for seed, and sets
// v's peer or midTakeover flag for the mode.
func newSimRestorer(seed int64, v *simVariant) *simRestorer {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7e5707e))
	rs := &simRestorer{what: r.IntN(4), r: r}
	switch r.IntN(3) {
	case 1:
		v.peer = true
	case 2:
		v.midTakeover = true
	}
	// The leases and the version 2 history, from a generator of their
	// own so that the draws above stay as they were.
	wr := rand.New(rand.NewPCG(uint64(seed), 0x7e5707f))
	switch wr.IntN(4) {
	case 1:
		v.mixed = true
	case 2:
		v.spread = true
	case 3:
		v.rolling = true
	}
	rs.v2 = wr.IntN(3) == 0
	return rs
}

// simV2Term is the term of the version 2 writer's takeover in seedV2.
const simV2Term = 2

// seedV2 writes, before any node starts, the history of a group upgraded
// from version 2: a version 3 leadership at term 1 (its claim, the term
// object, its release, with lease lt), then a version 2 writer's takeover
// at term 2 (a lease, no ttl, no claim) and its release. The restorer
// keeps each version as it would a landed write.
func (rs *simRestorer) seedV2(lt time.Duration) {
	ttl := lt.Milliseconds()
	term := []byte(fmt.Sprintf(`{"term":1,"by":"v3","lease":"00000000000000a1","ttl":%d}`, ttl))
	rs.mem.Set(fmt.Sprintf("%s%s.%020d", testKey, termSuffix, 1), term)
	rs.mem.Set(testKey+termSuffix, term)
	rs.landed(testKey + termSuffix)
	for _, rec := range []string{
		fmt.Sprintf(`{"leaderID":"v3","leaderAddr":"v3:1","lastUpdated":"0001-01-01T00:00:00Z","term":1,"lease":"00000000000000a1","held":3000,"ttl":%d}`, ttl),
		`{"leaderID":"v2","leaderAddr":"v2:1","lastUpdated":"2000-01-01T00:00:01Z","term":2,"lease":"00000000000000b2","held":0}`,
		`{"leaderID":"v2","leaderAddr":"v2:1","lastUpdated":"0001-01-01T00:00:00Z","term":2,"lease":"00000000000000b2","held":1000}`,
	} {
		rs.mem.Set(testKey, []byte(rec))
		rs.landed(testKey)
	}
}

// v2Unclaimed reports whether no version 3 takeover has followed the
// version 2 writer's yet: until one that read its record takes over (and
// claims its term), a restore can hide it (protocol.md 12, a version 2
// term not yet claimed), and the restorer leaves restores out. The first
// takeover claims a term above the version 2 writer's, and it read that
// writer's release (the lockfile holds nothing else until then). Its
// claim, not the one of the version 2 term it makes for it, is what is
// looked for: a mutation that makes none must still meet the restores.
func (rs *simRestorer) v2Unclaimed() bool {
	if !rs.v2 {
		return false
	}
	_, _, err := rs.mem.Get(context.Background(), fmt.Sprintf("%s%s.%020d", testKey, termSuffix, simV2Term+1))
	return err != nil
}

// bind gives the restorer the world it acts on, before any node starts.
func (rs *simRestorer) bind(w *simworld.World, gate *simworld.Gate, counts *simworld.Tally) {
	rs.mem = w.Mem
	rs.put = func(key string, data []byte) {
		w.Mem.Set(key, data)
		counts.Add(key[len(testKey):] + " restored")
		simworld.Debugf("RESTORE %s: %s", key, data)
		rs.mu.Lock()
		rs.at = time.Now()
		rs.mu.Unlock()
	}
	rs.fire = func(keys []string, early bool) {
		if rs.v2Unclaimed() {
			counts.Add("restore left out: version 2 term unclaimed")
			return
		}
		for _, key := range keys {
			data := rs.older(key)
			if early && key == testKey {
				if b := rs.beforeTakeover(); b != nil {
					data = b
				}
			}
			switch {
			case data == nil:
			case key == testKey && rs.limitB != nil && rs.limitB(data):
				counts.Add("restore left out: limit (b)")
			default:
				rs.put(key, data)
			}
		}
	}
	rs.soonFn = func(d time.Duration) {
		time.AfterFunc(d, gate.Wrap("~restore", func() { rs.fire([]string{testKey}, false) }))
	}
	counts.Add("restorer: " + simRestoreWhat[rs.what])
	if rs.v2 {
		counts.Add("restorer: version 2 history")
	}
}

// simRestoreWorld is what the restorer's attacks need of the run: the
// node that leads now (nil if none), whether a node is still the
// incarnation that runs (not crashed, closed or restarted), restart
// (crash node i unless it leads or is down, and start it again after d),
// and, in peer mode, the peer transport (nil otherwise).
type simRestoreWorld struct {
	leader  func() *simNode
	current func(*simNode) bool
	restart func(i int, d time.Duration)
	peers   *simworld.PeerNet
	gate    *simworld.Gate
	counts  *simworld.Tally

	// rollFrom and rollTo bound the rolling restart, if any (rollTo 0:
	// none): half the restores fall in it or a lease after, when the
	// nodes run different leases.
	rollFrom, rollTo time.Duration
	// leasesDiffer says the nodes' LeaderTimeouts differ (mixed, spread
	// or rolling worlds): every timed restore then cuts the leader off,
	// and half of them put back the lockfile as it was before the last
	// takeover (the backup from before the last failover, an older
	// leadership's record): the case where a restored record's shorter
	// lease matters (protocol.md 2.1, the longest lease known).
	leasesDiffer bool
}

// schedule draws the run's timed restores, all before the faults stop.
// Half of them (all where leases differ) cut the leader of the moment off the store as they land
// (the moment its lease is longest past what others see), for two
// leases. In peer mode it also draws 1 to 3 of the root review's
// stale-peer attacks: the leader's peer endpoint goes stale (something at
// its address answers with its record of the moment) while it goes on
// renewing in the store; a FrequentInterval to a lease later the
// operator puts that record back in the store, and half the time cuts the
// leader off then; both end two leases later.
func (rs *simRestorer) schedule(r *rand.Rand, p simParams, events *simworld.Schedule, sw simRestoreWorld) {
	cutOff := func(n *simNode, restore func()) {
		if n == nil || !sw.current(n) {
			return
		}
		sw.counts.Add("leader cut off at a restore")
		n.st.Partition(false)
		time.AfterFunc(2*p.maxLT, sw.gate.Wrap("~restore", func() {
			if sw.current(n) {
				n.st.Heal()
				if restore != nil {
					restore()
				}
			}
		}))
	}
	// In a world with a version 2 history no term is claimed for a
	// lease assumed for the version 2 release (noTTLLease): the restores
	// come after it.
	var shift time.Duration
	if rs.v2 {
		shift = noTTLLease
	}
	for range 1 + r.IntN(8) {
		at := shift + time.Duration(r.Int64N(int64(p.faultsFor-shift-5*time.Second)))
		if end := min(sw.rollTo+2*p.maxLT, p.faultsFor-5*time.Second); sw.rollTo > 0 && end > sw.rollFrom && r.IntN(2) == 0 {
			at = sw.rollFrom + time.Duration(r.Int64N(int64(end-sw.rollFrom)))
		}
		cut := r.IntN(2) == 0 || sw.leasesDiffer
		early := sw.leasesDiffer && r.IntN(2) == 0
		restart, i, d := rs.v2 && r.IntN(2) == 0, r.IntN(p.nodes), time.Duration(r.Int64N(int64(p.fi)))
		events.Add(at, func() { // the events run through the gate
			rs.fire(rs.keys(), early)
			if cut {
				cutOff(sw.leader(), nil)
			}
			if restart {
				sw.restart(i, d)
			}
		})
	}
	if sw.peers == nil {
		return
	}
	for range 1 + r.IntN(3) {
		at := shift + time.Duration(r.Int64N(int64(p.faultsFor-shift-10*time.Second)))
		later := p.fi + time.Duration(r.Int64N(int64(p.lt-p.fi))) // after a renewal the stale peer does not show, before the takeover time
		cut := r.IntN(2) == 0
		events.Add(at, func() {
			n := sw.leader()
			if n == nil || !sw.current(n) {
				return
			}
			data, etag, err := rs.mem.Get(context.Background(), testKey)
			if err != nil {
				return
			}
			rec, err := ParseRecord(data)
			if err != nil || rec.LeaderID != n.id || rec.LastUpdated.IsZero() {
				return
			}
			body, _ := json.Marshal(peerRecord{Record: rec, ETag: etag})
			sw.peers.Crash(n.addr, body)
			sw.counts.Add("stale peer of a live leader")
			time.AfterFunc(later, sw.gate.Wrap("~restore", func() {
				if rs.v2Unclaimed() {
					sw.counts.Add("stale peer's record not restored: version 2 term unclaimed")
					return
				}
				if rs.limitB(data) {
					sw.counts.Add("stale peer's record not restored: limit (b)")
					return // the stale endpoint stays until the node restarts
				}
				rs.put(testKey, data)
				sw.counts.Add("stale peer's record restored")
				back := func() { sw.peers.Add(n.addr, PeerHandler(n.e)) }
				if cut {
					cutOff(n, back)
				} else {
					time.AfterFunc(2*p.maxLT, sw.gate.Wrap("~restore", func() {
						if sw.current(n) {
							back()
						}
					}))
				}
			}))
		})
	}
}

// landed keeps the version of key that a node's write has just put
// there (simworld.Store.OnLand: under the gate, so it is that write's).
func (rs *simRestorer) landed(key string) {
	if rs == nil || (key != testKey && key != testKey+termSuffix) {
		return
	}
	data, _, err := rs.mem.Get(context.Background(), key)
	if err != nil {
		return
	}
	keep := func(v [][]byte, n int) [][]byte {
		v = append(v, data)
		if len(v) > n {
			v = v[1:]
		}
		return v
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.kept == nil {
		rs.kept = map[string][][]byte{}
	}
	if v := rs.kept[key]; key == testKey && len(v) > 0 {
		prev, err1 := ParseRecord(v[len(v)-1])
		rec, err2 := ParseRecord(data)
		if err1 == nil && err2 == nil && rec.Term > prev.Term {
			rs.before = v[len(v)-1] // a takeover landed: what it replaced
		}
	}
	if rec, err := ParseRecord(data); key == testKey && err == nil && rec.Term >= rs.top.Term {
		rs.top = rec
	}
	rs.kept[key] = keep(rs.kept[key], 8)
	if rec, err := ParseRecord(data); key == testKey && err == nil && rec.LastUpdated.IsZero() {
		rs.releases = keep(rs.releases, 4)
	}
}

// older returns a version of key to put back, or nil: for the lockfile,
// one time in three one of its last releases; otherwise one of its last
// versions but the current one, the more recent the likelier (half the
// time the one before the last).
func (rs *simRestorer) older(key string) []byte {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if key == testKey && len(rs.releases) > 0 && rs.r.IntN(3) == 0 {
		return rs.releases[rs.r.IntN(len(rs.releases))]
	}
	v := rs.kept[key]
	for i := len(v) - 2; i >= 0; i-- {
		if i == 0 || rs.r.IntN(2) == 0 {
			return v[i]
		}
	}
	return nil
}

// beforeTakeover returns the last version of the lockfile from before
// the current leadership's takeover (a lower term), or nil: the backup
// taken before the last failover.
func (rs *simRestorer) beforeTakeover() []byte {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.before
}

// newest returns the leadership of the landed lockfile write with the
// highest term (zero if none).
func (rs *simRestorer) newest() Record {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return Record{LeaderID: rs.top.LeaderID, Term: rs.top.Term}
}

// keys returns the objects the next restore puts back.
func (rs *simRestorer) keys() []string {
	what := rs.what
	if what == 3 {
		what = rs.r.IntN(3)
	}
	switch what {
	case 0:
		return []string{testKey}
	case 1:
		return []string{testKey + termSuffix}
	}
	return []string{testKey, testKey + termSuffix}
}

// soon restores the lockfile d from now (mid-takeover mode).
func (rs *simRestorer) soon(d time.Duration) { rs.soonFn(d) }

// last returns when the last restore happened (zero: none, or no
// restorer).
func (rs *simRestorer) last() time.Time {
	if rs == nil {
		return time.Time{}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.at
}

// simSleeps keeps each node incarnation's suspends: while one lasts its
// monotonic clock stands still and its calls wait (simworld.Store.Pause);
// real time, which its wall clock and its local clock (lease.Clock, which
// counts suspends) follow, goes on.
type simSleeps struct {
	mu sync.Mutex
	m  map[[2]int][]simSleep // by node and incarnation
}

type simSleep struct {
	at time.Time
	d  time.Duration
}

// host returns node i's incarnation's lease.Clock.Slept: how much real
// time its suspends have taken so far.
func (s *simSleeps) host(i, incarnation int) func() time.Duration {
	return func() time.Duration {
		s.mu.Lock()
		defer s.mu.Unlock()
		var d time.Duration
		now := time.Now()
		for _, z := range s.m[[2]int{i, incarnation}] {
			if now.After(z.at) {
				d += min(now.Sub(z.at), z.d)
			}
		}
		return d
	}
}

// suspend suspends node i's incarnation now for d.
func (s *simSleeps) suspend(i, incarnation int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[2]int][]simSleep{}
	}
	k := [2]int{i, incarnation}
	s.m[k] = append(s.m[k], simSleep{time.Now(), d})
}

// addSuspends schedules 1 to 4 suspends of up to two LeaderTimeouts,
// most of the leader of the moment, some right after a renewal, all over
// before the faults stop.
func addSuspends(r *rand.Rand, p simParams, events *simworld.Schedule, counts *simworld.Tally, sleeps *simSleeps,
	node func(i int) (*simworld.Store, int), leaderOr func(int) int) {
	for range 1 + r.IntN(4) {
		i := r.IntN(p.nodes)
		targetLeader := r.IntN(3) > 0
		cutAfter := r.IntN(3) == 0 // cut off the store right after its next write lands, as in the issue
		at := time.Duration(r.Int64N(int64(p.faultsFor - 10*time.Second)))
		d := min(time.Duration(r.Int64N(int64(2*p.maxLT))), p.faultsFor-at-time.Second)
		var cut *simworld.Store
		events.Add(at, func() {
			if targetLeader {
				i = leaderOr(i)
			}
			st, inc := node(i)
			if st.Crashed() {
				return
			}
			counts.Add("suspend")
			sleeps.suspend(i, inc, d)
			st.Pause(d)
			if cutAfter {
				cut = st
				st.Partition(true)
			}
		})
		events.Add(at+d+p.maxLT, func() {
			if cut != nil {
				cut.Heal()
			}
		})
	}
}

// inLimitB reports whether a restore of data, a version of the lockfile,
// falls in protocol.md 2.1's limit (b), which the simulation leaves out:
// a record of the live leadership (live: a running node holds a
// leadership of that ServerID and term, its context live or ending, or
// it is the newest takeover's and its node runs: a takeover's lease
// runs before its leadership is handed out, seed 16614) that
// some follower has seen, but only in versions with less held time
// (nothing tells the restore from a renewal to it, so section 3.2 counts
// from its earlier sightings), or that a follower may know of without
// the simulation seeing which version (it shows no leader now: its
// takeover time has passed). views are the records the running followers
// show (Leader(): their current view); live are the running leaders'
// records.
//
// A record of a leadership that is not live is never left out: 3.2 may
// count from it too early, but what it lets a follower overtake is a
// lease nobody holds, and every leadership that is live then has a
// higher term (it took over after), which the rules of 1.1 and 2.1
// (claims, the longest lease known) must wait out, and the simulation
// tests them.
func inLimitB(data []byte, views, live []Record, blind int) bool {
	rec, err := ParseRecord(data)
	if err != nil || rec.LastUpdated.IsZero() || rec.Lease == "" {
		return false // a release or a record without a lease: 3.2 does not apply
	}
	if !slices.ContainsFunc(live, func(l Record) bool { return l.LeaderID == rec.LeaderID && l.Term == rec.Term }) {
		return false
	}
	if blind > 0 {
		return true
	}
	for _, v := range views {
		if v.LeaderID == rec.LeaderID && v.Term == rec.Term && v.Lease == rec.Lease && v.Held < rec.Held {
			return true
		}
	}
	return false
}
