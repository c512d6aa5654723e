package pool

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a worker's view of its pool, and its counters since New.
type Stats struct {
	// Pool is the pool's Prefix, and Worker this worker's ID.
	Pool, Worker string

	// Owned is the number of shards this worker leads now.
	Owned int

	// Workers is, for every worker this one counts as live at its last
	// look (itself included while its session lives), the number of
	// shards that worker owns by its session record.
	Workers map[string]int

	// Balanced reports that, at the last look, every shard was owned and
	// every live worker owned ⌊N/W⌋ or ⌈N/W⌉ of them.
	Balanced bool

	// Claims counts the shards this worker took: vacant, handed over, or
	// taken over from a worker whose session had ended.
	Claims uint64
	// Handovers counts the shards this worker gave up to balance the pool.
	Handovers uint64
	// Releases counts shard records this worker wrote released (after a
	// handover, a Resign, Work returning, or Run's end).
	Releases uint64
	// Expired counts leaderships that ended because the session lease ran
	// out or was lost.
	Expired uint64
	// Sessions counts the sessions this worker opened.
	Sessions uint64

	// Rebalances counts the times this worker saw the pool go from
	// unbalanced to balanced, and LastRebalance is how long the last of
	// them took, from the first look that found it unbalanced.
	Rebalances    uint64
	LastRebalance time.Duration

	// Gets and Puts count the store call attempts of this worker, and
	// Lists its listings of the session objects (on a store that
	// implements store.Lister: one per FrequentInterval in steady state).
	Gets, Puts, Lists uint64

	// Looks counts this worker's looks: the ticks that read every
	// member's session object. On a store that lists, a settled pool's
	// workers look only when something changes (a death, a join, a leave,
	// a worker off its share, a shard left unowned), so a rising count
	// with nothing changing explains reads above two per interval.
	Looks uint64
}

// recorder keeps a pool's counters and last view for Stats.
type recorder struct {
	claims, handovers, released, expired, sessions atomic.Uint64
	gets, puts, lists, looks                       atomic.Uint64

	mu            sync.Mutex
	workers       map[string]int
	balanced      bool
	rebalances    uint64
	lastRebalance time.Duration
}

func (r *recorder) call(op string, _ error) {
	switch op {
	case "get":
		r.gets.Add(1)
	case "list":
		r.lists.Add(1)
	default:
		r.puts.Add(1)
	}
}

// count adds one to a counter.
func (r *recorder) count(c counter) {
	switch c {
	case countLook:
		r.looks.Add(1)
	case countHandover:
		r.handovers.Add(1)
	case countClaim:
		r.claims.Add(1)
	case countReleased:
		r.released.Add(1)
	case countExpired:
		r.expired.Add(1)
	}
}

func (r *recorder) rebalanced(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rebalances++
	r.lastRebalance = d
}

func (r *recorder) setView(v view, balanced bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers = maps.Clone(v.counts)
	r.balanced = balanced
}

// Stats returns the worker's figures. It waits for nothing.
func (p *Pool) Stats() Stats {
	r := &p.stats
	s := Stats{Pool: p.cfg.Prefix, Worker: p.cfg.ID, Owned: len(p.Leading()),
		Claims: r.claims.Load(), Handovers: r.handovers.Load(), Releases: r.released.Load(),
		Expired: r.expired.Load(), Sessions: r.sessions.Load(), Gets: r.gets.Load(), Puts: r.puts.Load(), Lists: r.lists.Load(), Looks: r.looks.Load()}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Workers = maps.Clone(r.workers)
	s.Balanced = r.balanced
	s.Rebalances, s.LastRebalance = r.rebalances, r.lastRebalance
	return s
}
