// Package pool runs a worker's share of many shards, one s3lect election
// per shard, and spreads the shards over the workers without a
// coordinator.
//
// Every worker runs one Pool over the same shard names, each with its own
// ServerID. A Pool watches every shard's lockfile and campaigns for a
// shard only once its lease is vacant, after a delay that grows with how
// many shards this worker leads beyond the least loaded worker it can see
// (the leaders of the shards it watches; a worker that leads nothing
// counts itself). A busy worker therefore lets a lighter one take a free
// shard first, and workers that start together take shards in turns. A
// per-shard jitter, derived from the shard and the ServerID, breaks ties
// without randomness.
//
// The election, not the pool, guarantees that a shard has at most one
// live leader: the pool only decides when to campaign. A pool does not
// take shards from a live worker: a worker that joins later gets shards
// as they fall vacant (a leader that resigns or dies), not before.
package pool

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
)

// Config configures a Pool.
type Config struct {
	// Shards names the shards. Every worker of a pool uses the same names.
	// Required; names must be unique and non-empty.
	Shards []string

	// Elector returns the elector configuration of one shard: its
	// LockfilePath must differ per shard, and its ServerID must be this
	// worker's, the same for every shard. Required.
	Elector func(shard string) s3lect.ElectorConfig

	// Work runs the shard while this worker leads it, in its own
	// goroutine. ctx is the leadership's context: Work must return soon
	// after it ends. If Work returns while the leadership is live, the
	// pool resigns it. The pool campaigns for the shard again only after
	// Work has returned. Required.
	Work func(ctx context.Context, shard string, lead *s3lect.Leadership)

	// Step is the delay added per shard this worker leads beyond the
	// least loaded worker it sees. It must exceed the time a takeover
	// write takes. Default: the electors' LeaderTimeout / 16.
	Step time.Duration
}

// Pool owns one worker's electors, one per shard.
type Pool struct {
	cfg    Config
	id     string
	shards []*shard

	mu      sync.Mutex
	leaders map[string]string // shard -> the leader this worker knows of, "" if none
	gone    map[string]bool   // workers seen to lose a shard to expiry or release, until they win one again
	changed chan struct{}     // closed and replaced when leaders changes
	lastWin time.Time         // when this worker last won a shard
	slot    chan struct{}     // capacity 1: held by the one campaign this worker starts at a time
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type shard struct {
	name   string
	e      *s3lect.Elector
	jitter float64 // in [0, 1): this worker's tie-breaker for this shard
}

// New checks cfg and creates the electors. It starts nothing.
func New(cfg Config) (*Pool, error) {
	switch {
	case len(cfg.Shards) == 0:
		return nil, errors.New("pool: Config.Shards is empty; name at least one shard")
	case cfg.Elector == nil:
		return nil, errors.New("pool: Config.Elector is nil; give a function that returns each shard's ElectorConfig")
	case cfg.Work == nil:
		return nil, errors.New("pool: Config.Work is nil; give the function that runs a shard while this worker leads it")
	case cfg.Step < 0:
		return nil, fmt.Errorf("pool: Config.Step %v is negative", cfg.Step)
	}
	p := &Pool{cfg: cfg, leaders: map[string]string{}, gone: map[string]bool{}, changed: make(chan struct{}), slot: make(chan struct{}, 1)}
	paths := map[string]string{}
	for _, name := range cfg.Shards {
		if name == "" {
			return nil, p.fail(errors.New("pool: Config.Shards holds an empty name"))
		}
		if _, dup := p.leaders[name]; dup {
			return nil, p.fail(fmt.Errorf("pool: Config.Shards names shard %q twice", name))
		}
		p.leaders[name] = ""
		ec := cfg.Elector(name)
		if ec.ServerID == "" || (p.id != "" && ec.ServerID != p.id) {
			return nil, p.fail(fmt.Errorf("pool: shard %q: ServerID %q; every shard of a worker needs the same non-empty ServerID (%q)", name, ec.ServerID, p.id))
		}
		p.id = ec.ServerID
		if other, dup := paths[ec.LockfilePath]; dup {
			return nil, p.fail(fmt.Errorf("pool: shards %q and %q share LockfilePath %q; give each shard its own", other, name, ec.LockfilePath))
		}
		paths[ec.LockfilePath] = name
		if cfg.Step == 0 {
			lt := ec.LeaderTimeout
			if lt == 0 {
				lt = s3lect.DefaultLeaderTimeout
			}
			p.cfg.Step = lt / 16
		}
		e, err := s3lect.New(ec)
		if err != nil {
			return nil, p.fail(fmt.Errorf("pool: shard %q: %w", name, err))
		}
		sum := sha256.Sum256([]byte(name + "\x00" + ec.ServerID))
		jitter := float64(binary.BigEndian.Uint64(sum[:])>>11) / (1 << 53)
		p.shards = append(p.shards, &shard{name: name, e: e, jitter: jitter})
	}
	return p, nil
}

// fail closes the electors made so far and returns err.
func (p *Pool) fail(err error) error {
	for _, s := range p.shards {
		s.e.Close()
	}
	return err
}

// Run campaigns for shards and runs Work for those this worker leads,
// until ctx ends. Then it ends every leadership (Work's contexts are
// cancelled), waits for Work to return, releases the lockfiles, closes
// the electors and returns nil. Call it once.
func (p *Pool) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, s := range p.shards {
		wg.Go(func() { p.runShard(ctx, s) })
	}
	wg.Wait()
	var errs []error
	for _, s := range p.shards {
		errs = append(errs, s.e.Close())
	}
	return errors.Join(errs...)
}

// Leading returns the shards this worker leads, sorted.
func (p *Pool) Leading() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for name, id := range p.leaders {
		if id == p.id {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Electors returns the pool's electors, in the order of Config.Shards,
// for health checks and metrics (s3lect.HealthHandler, prom.NewCollector).
func (p *Pool) Electors() []*s3lect.Elector {
	out := make([]*s3lect.Elector, len(p.shards))
	for i, s := range p.shards {
		out[i] = s.e
	}
	return out
}

// setLeader records shard's leader and wakes the shards waiting to
// campaign.
func (p *Pool) setLeader(name, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.leaders[name]
	if old == id {
		return
	}
	p.leaders[name] = id
	if id == "" && old != p.id {
		p.gone[old] = true
	}
	if id != "" {
		delete(p.gone, id)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// turn returns when this worker campaigns for s, vacant since vacant, and
// a channel closed when that may change.
func (p *Pool) turn(s *shard, vacant time.Time) (time.Time, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	mine, others := 0, map[string]int{}
	for _, id := range p.leaders {
		switch {
		case id == p.id:
			mine++
		case id != "" && !p.gone[id]:
			others[id]++
		}
	}
	lowest := 0 // a worker this one cannot see leads nothing
	if len(others) > 0 {
		lowest = mine
		for _, n := range others {
			lowest = min(lowest, n)
		}
	}
	excess := float64(max(mine-lowest, 0)) + s.jitter
	due := vacant.Add(time.Duration(excess * float64(p.cfg.Step)))
	if !p.lastWin.IsZero() {
		// One takeover per Step at most: workers that cannot yet see each
		// other still take shards at the same pace.
		due = later(due, p.lastWin.Add(time.Duration((1+s.jitter)*float64(p.cfg.Step))))
	}
	return due, p.changed
}

// runShard watches one shard and campaigns for it when it is vacant and
// this worker's turn has come.
func (p *Pool) runShard(ctx context.Context, s *shard) {
	changes := s.e.Observe(ctx)
	var cur s3lect.Change
	known := false
	take := func(c s3lect.Change) {
		cur, known = c, true
		p.setLeader(s.name, c.Leader.LeaderID)
	}
	for {
		// Wait for the shard to fall vacant.
		for !known || cur.Leader.LeaderID != "" || cur.Err != nil {
			c, ok := <-changes
			if !ok {
				return
			}
			take(c)
		}
		// Wait this worker's turn, as long as it stays vacant.
		vacant := time.Now()
		timer := time.NewTimer(0)
		turn := false
		for !turn && cur.Leader.LeaderID == "" {
			due, wake := p.turn(s, vacant)
			timer.Reset(time.Until(due))
			select {
			case <-timer.C:
				turn = p.claimSlot(s, vacant, changes, take)
			case c, ok := <-changes:
				if !ok {
					timer.Stop()
					return
				}
				take(c)
			case <-wake:
			}
			timer.Stop()
		}
		if !turn {
			continue
		}
		if !p.campaign(ctx, s, changes, take) { // releases the slot
			return
		}
		for known && cur.IsLeader { // the leadership's end is announced after Work returned
			c, ok := <-changes
			if !ok {
				return
			}
			take(c)
		}
	}
}

// claimSlot waits for the worker's campaign slot, which one campaign holds
// at a time, then checks that s's turn is still due. It returns whether
// it holds the slot; false means s must wait again (a change arrived, or
// the turn moved).
func (p *Pool) claimSlot(s *shard, vacant time.Time, changes <-chan s3lect.Change, take func(s3lect.Change)) bool {
	_, wake := p.turn(s, vacant)
	select {
	case p.slot <- struct{}{}:
	case c, ok := <-changes:
		if ok {
			take(c)
		}
		return false
	case <-wake:
		return false
	}
	if due, _ := p.turn(s, vacant); due.After(time.Now()) {
		<-p.slot
		return false
	}
	return true
}

// campaign campaigns for s until it wins, another worker is seen leading,
// or ctx ends; a won leadership runs Work until it ends. It returns false
// when ctx has ended.
func (p *Pool) campaign(ctx context.Context, s *shard, changes <-chan s3lect.Change, take func(s3lect.Change)) bool {
	// The slot is given back when the campaign is decided, or after Step
	// if it is still waiting (a takeover that must wait out a lease).
	release := sync.OnceFunc(func() { <-p.slot })
	defer release()
	slow := time.AfterFunc(p.cfg.Step, release)
	defer slow.Stop()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		l   *s3lect.Leadership
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := s.e.Campaign(cctx)
		res <- result{l, err}
	}()
	var r result
	for waiting := true; waiting; {
		select {
		case r = <-res:
			waiting = false
		case c, ok := <-changes:
			if !ok {
				changes = nil // closed with ctx; the Campaign ends too
				continue
			}
			take(c)
			if c.Leader.LeaderID != "" && !c.IsLeader {
				cancel() // another worker won the shard
			}
		}
	}
	if r.err != nil {
		return ctx.Err() == nil
	}
	p.mu.Lock()
	p.lastWin = time.Now()
	p.mu.Unlock()
	p.setLeader(s.name, p.id)
	release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.cfg.Work(r.l.Context(), s.name, r.l)
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case c, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			take(c)
		}
	}
	// Work returned: if it did so while still leading, give the shard up.
	r.l.Resign(ctx)
	<-r.l.Done()
	return ctx.Err() == nil
}
