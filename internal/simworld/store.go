package simworld

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// ErrInjected is what a call failed by the faults returns (wrapped when
// it stands for a lost reply).
var ErrInjected = errors.New("injected fault")

// Faults are a world's random store faults, drawn for each call while the
// faults last.
type Faults struct {
	ErrRate  float64 // a call fails before it reaches the store
	LostRate float64 // a call's reply is lost after the call landed
	HangRate float64 // the connection stalls until the caller gives up

	Latency   time.Duration // each way of a call takes up to this
	Spike     time.Duration // added to the way there of a call in SpikeRate
	SpikeRate float64

	// ListLag: listings lag behind the writes by up to this, each key as
	// an earlier listing showed it, left out, or stuck at one ETag for a
	// while (Store.List). Zero: listings are current.
	ListLag time.Duration
}

// World is what the nodes of one seed share: the objects, the faults and
// the record of what happened to them.
type World struct {
	Mem     *memstore.Store // the objects; an operator acts on it directly
	Shared  store.Store     // what the nodes' calls reach: Mem, or Rewind
	Rewind  *Rewind         // set by UseRewind: the store loses acknowledged writes
	Faults  Faults
	Counts  *Tally
	History *History // the last writes of each key, for restores
	// Gate, if set, orders the calls that reach the shared store at one
	// virtual instant by the stores' names (Store.Name), so that a seed
	// replays exactly (Gate).
	Gate *Gate

	lists listLog
}

// NewWorld returns a world on an empty memstore with faults f.
func NewWorld(f Faults) *World {
	mem := memstore.New()
	return &World{Mem: mem, Shared: mem, Faults: f, Counts: &Tally{}, History: &History{}}
}

// UseRewind makes the nodes' calls reach a Rewind store instead of Mem.
func (w *World) UseRewind() *Rewind {
	w.Rewind = &Rewind{}
	w.Shared = w.Rewind
	return w.Rewind
}

// Store is one node incarnation's view of the world's store, with faults.
// A call sent before its caller gave up may still land. It lists (store.Lister)
// when the shared store does.
type Store struct {
	w *World
	// OnPut is called as each write starts, before its faults are drawn:
	// under the world's Gate, at that draw's still moment of its instant,
	// so that what it reads of its node (whether it leads yet) does not
	// depend on which goroutine the Go scheduler ran first.
	OnPut  func()
	OnLand func(key string) // called as each write lands
	// Name orders this store's calls among the others' at one instant,
	// under the world's Gate: unique per node incarnation ("n2/1").
	Name string

	mu          sync.Mutex
	r           *rand.Rand
	faulty      bool      // the random faults apply
	down        bool      // crashed or partitioned: new calls never reach the store
	crashed     bool      // for good: calls hang for ever from the caller's view
	cutNext     bool      // partition this node right after its next write lands
	pausedUntil time.Time // the process is stopped: nothing is sent or received before
}

// NewStore returns a node incarnation's store, drawing its faults from r;
// faulty says whether the faults apply yet (they stop with Calm).
func (w *World) NewStore(r *rand.Rand, faulty bool) *Store {
	return &Store{w: w, r: r, faulty: faulty}
}

// Crash stops the node abruptly: its calls never reach the store again.
func (s *Store) Crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down, s.crashed = true, true
}

// Crashed reports whether Crash was called.
func (s *Store) Crashed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crashed
}

// Partition cuts the node off the store, at once or, with afterWrite,
// right after its next write lands: the most dangerous moment, as others
// may see the write at once while its writer's lease still runs from
// before it was sent.
func (s *Store) Partition(afterWrite bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if afterWrite {
		s.cutNext = true
	} else {
		s.down = true
	}
}

// Heal ends a partition (not a crash).
func (s *Store) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down, s.cutNext = s.crashed, false
}

// Calm ends the faults: partitions heal and the random faults stop. It
// reports whether the node crashed (it is to be started again).
func (s *Store) Calm() (crashed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down, s.faulty, s.cutNext = s.crashed, false, false
	return s.crashed
}

// Pause stops the process for d: calls are held until then, and replies
// read then.
func (s *Store) Pause(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pausedUntil = time.Now().Add(d)
}

// resume waits while the process is paused.
func (s *Store) resume() {
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

// roll draws one call's faults.
func (s *Store) roll() (fail, lost, hang bool, before, after time.Duration, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false, false, false, 0, 0, true
	}
	if !s.faulty {
		return
	}
	f, c := &s.w.Faults, s.w.Counts
	fail = s.r.Float64() < f.ErrRate
	lost = s.r.Float64() < f.LostRate
	hang = s.r.Float64() < f.HangRate
	if f.Latency > 0 {
		before = time.Duration(s.r.Int64N(int64(f.Latency)))
		after = time.Duration(s.r.Int64N(int64(f.Latency)))
	}
	if s.r.Float64() < f.SpikeRate {
		before += f.Spike
		c.Add("latency spike")
	}
	switch {
	case fail:
		c.Add("error")
	case lost:
		c.Add("lost reply")
	case hang:
		c.Add("stalled connection")
	}
	return
}

// call runs op as a remote call: it reaches the store after a delay and
// its reply comes back after another, unless the caller gives up first,
// in which case op may still land.
//
// Under the world's Gate, the faults are drawn and the call lands each at
// a still moment of its instant, in the order of the store's name and
// what (the operation and key): two goroutines of one node that call at
// one instant (a resumed process's renewer and reader) draw in one order.
// start, if not nil, runs just before the draw, in the same still moment.
func call[T any](ctx context.Context, s *Store, what string, start func(), op func() (T, error)) (T, error) {
	var zero T
	inner := op
	op = func() (v T, err error) {
		s.w.Gate.Do(s.Name+" "+what, func() { v, err = inner() })
		return v, err
	}
	var (
		fail, lost, hang, down bool
		before, after          time.Duration
	)
	s.w.Gate.Do(s.Name+" "+what, func() {
		if start != nil {
			start()
		}
		fail, lost, hang, before, after, down = s.roll()
	})
	if down || hang {
		<-ctx.Done()
		return zero, ctx.Err()
	}
	if fail {
		return zero, ErrInjected
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
			return zero, fmt.Errorf("reply lost: %w", ErrInjected)
		}
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.resume()
	rw := s.w.Rewind
	if rw.Down() {
		return nil, "", ErrStoreDown
	}
	ep := rw.epochNow()
	type got struct {
		data []byte
		etag string
	}
	g, err := call(ctx, s, "get "+key, nil, func() (got, error) {
		if !rw.sameEpoch(ep) {
			return got{}, ErrStoreDown // the server crashed with the request in flight
		}
		d, e, err := s.w.Shared.Get(context.Background(), key)
		return got{d, e}, err
	})
	return g.data, g.etag, err
}

// GetSighting implements store.Sighter where the shared store does
// (memstore); elsewhere the token is "".
func (s *Store) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	sg, ok := s.w.Shared.(store.Sighter)
	if !ok {
		data, etag, err := s.Get(ctx, key)
		return data, etag, "", err
	}
	s.resume()
	rw := s.w.Rewind
	if rw.Down() {
		return nil, "", "", ErrStoreDown
	}
	ep := rw.epochNow()
	type got struct {
		data        []byte
		etag, token string
	}
	g, err := call(ctx, s, "get "+key, nil, func() (got, error) {
		if !rw.sameEpoch(ep) {
			return got{}, ErrStoreDown
		}
		d, e, tk, err := sg.GetSighting(context.Background(), key)
		return got{d, e, tk}, err
	})
	return g.data, g.etag, g.token, err
}

func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.resume()
	rw := s.w.Rewind
	if rw.Down() {
		return "", ErrStoreDown
	}
	ep := rw.epochNow()
	return call(ctx, s, "put "+key, s.OnPut, func() (string, error) {
		if !rw.sameEpoch(ep) {
			return "", ErrStoreDown // the server crashed with the request in flight
		}
		tag, err := s.w.Shared.PutIfMatch(context.Background(), key, data, etag)
		if err == nil {
			s.w.History.add(key, data)
			if s.OnLand != nil {
				s.OnLand(key)
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil && s.cutNext {
			s.cutNext, s.down = false, true
		}
		return tag, err
	})
}

// List lists the keys under prefix. While the faults last, in a world
// with a ListLag, each key is shown as an earlier listing (of any node)
// found it, or left out when that listing did not have it, or stuck at
// one ETag for a while: a store whose listings lag behind its writes.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.resume()
	lister, ok := s.w.Shared.(store.Lister)
	if !ok {
		return nil, errors.New("simworld: the shared store does not list")
	}
	lag := s.w.Faults.ListLag
	return call(ctx, s, "list "+prefix, nil, func() ([]store.Entry, error) {
		now, err := lister.List(context.Background(), prefix)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		lagging := s.faulty && lag > 0
		var pick, mix uint64
		if lagging {
			pick, mix = s.r.Uint64(), s.r.Uint64()
		}
		s.mu.Unlock()
		old := s.w.lists.add(prefix, now, lag, pick)
		if !lagging {
			return now, nil
		}
		var out []store.Entry
		r := rand.New(rand.NewPCG(mix, 11))
		for _, e := range now {
			tag, frozen := s.w.lists.frozen(e, r, lag)
			if frozen {
				s.w.Counts.Add("stale listing")
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

// History keeps the last writes that landed of every key, for an
// operator who restores older versions.
type History struct {
	mu sync.Mutex
	m  map[string][][]byte
}

func (h *History) add(key string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string][][]byte{}
	}
	v := append(h.m[key], data)
	if len(v) > 4 {
		v = v[1:]
	}
	h.m[key] = v
}

// Older returns a write of key older than its last, drawn by r, or nil.
func (h *History) Older(key string, r *rand.Rand) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.m[key]
	if len(v) < 2 {
		return nil
	}
	return v[r.IntN(len(v)-1)]
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
