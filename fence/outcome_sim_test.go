package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestCallOutcomes is a simulation that checks what TestFenceSimulation
// does not, the outcome each call reports, besides the order of landed
// terms. Per call (its data unique):
//
//   - Put returned nil: a body with its data had landed on the key.
//   - Seal returned nil: the key had landed a write of its term or higher.
//   - ErrFenced: the key had landed a write of a higher term.
//   - no write ID lands twice (a lost reply's resend lands at most once).
//
// and, as TestFenceSimulation, the terms landed on a key never decrease.
// The links lose replies, fail before or after the store, deliver PUTs up
// to 10 s late, and (variant stale) answer reads with any earlier version
// of the key, as an eventually consistent store could.

type landing struct {
	term    uint64
	write   string
	deleted bool
	data    []byte
}

// ledger records every write that lands, in the store's order.
type ledger struct {
	store.Store
	mu        sync.Mutex
	t         *testing.T
	landed    map[string][]landing
	versions  map[string][][2]string // key: every body and ETag it held
	ids       map[string]bool
	dups      int
	allowDups bool // stale reads: counted, not failed
}

func (l *ledger) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tag, err := l.Store.PutIfMatch(ctx, key, data, etag)
	if err != nil {
		return tag, err
	}
	v, derr := decode(data)
	if derr != nil || !v.fenced {
		l.t.Errorf("key %q: a body the fence did not write landed: %q", key, data)
		return tag, err
	}
	if h := l.landed[key]; len(h) > 0 && v.term < h[len(h)-1].term {
		l.t.Errorf("key %q: term %d landed after term %d", key, v.term, h[len(h)-1].term)
	}
	if l.ids[v.write] {
		l.dups++
		if !l.allowDups {
			l.t.Errorf("key %q: write %s landed a second time", key, v.write)
		}
	}
	l.ids[v.write] = true
	l.landed[key] = append(l.landed[key], landing{v.term, v.write, v.deleted, bytes.Clone(v.data)})
	l.versions[key] = append(l.versions[key], [2]string{string(data), tag})
	return tag, err
}

func (l *ledger) snapshot(key string) []landing {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]landing(nil), l.landed[key]...)
}

// flaky is one writer's link: its own random source, and a step of the
// scheduler for each call that reaches the shared ledger.
type flaky struct {
	st    *ledger
	rng   *rand.Rand // the writer's own
	sched *simworld.Sched
	name  string
	stale bool
	gs    *sync.WaitGroup
	late  int
}

var errFlaky = errors.New("outcomes: connection reset")

func (f *flaky) roll(n int) int { return f.rng.IntN(n) }

func (f *flaky) Get(ctx context.Context, key string) (data []byte, etag string, err error) {
	r := f.roll(20)
	if r == 0 {
		return nil, "", errFlaky
	}
	pick := f.rng.Uint64()
	f.sched.Step(f.name, func() {
		if r < 4 && f.stale {
			vs := f.st.versions[key]
			if len(vs) == 0 {
				err = store.ErrNotFound
				return
			}
			v := vs[pick%uint64(len(vs))]
			data, etag = []byte(v[0]), v[1]
			return
		}
		data, etag, err = f.st.Get(ctx, key)
	})
	return data, etag, err
}

func (f *flaky) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (tag string, err error) {
	switch r := f.roll(20); {
	case r == 0:
		return "", errFlaky // before the store
	case r == 1:
		f.sched.Step(f.name, func() { _, err = f.st.PutIfMatch(ctx, key, data, etag) })
		if err != nil {
			return "", err
		}
		return "", errFlaky // landed, reply lost
	case r == 2:
		d := time.Duration(f.roll(10_000)) * time.Millisecond
		f.late++
		name := fmt.Sprintf("%s/late-%d", f.name, f.late)
		f.gs.Add(1)
		go func() {
			defer f.gs.Done()
			time.Sleep(d)
			f.sched.Step(name, func() { _, _ = f.st.PutIfMatch(context.Background(), key, data, etag) })
		}()
		return "", errFlaky // on its way
	}
	f.sched.Step(f.name, func() { tag, err = f.st.PutIfMatch(ctx, key, data, etag) })
	return tag, err
}

func TestCallOutcomes(t *testing.T) {
	for _, variant := range []string{"fresh", "stale"} {
		t.Run(variant, func(t *testing.T) {
			var total outcomeStats
			_, n := simworld.SeedRange()
			for seed := range uint64(n / 4) {
				synctest.Test(t, func(t *testing.T) {
					st := outcomeWorld(t, seed, variant == "stale")
					total.calls += st.calls
					total.ok += st.ok
					total.fenced += st.fenced
					total.failed += st.failed
					total.landed += st.landed
					total.dups += st.dups
				})
			}
			t.Logf("%s: %+v", variant, total)
		})
	}
}

// TestCallOutcomesReplay runs one seed of each variant 20 times and wants
// one ledger hash.
func TestCallOutcomesReplay(t *testing.T) {
	for _, stale := range []bool{false, true} {
		hashes := map[uint64]int{}
		for range 20 {
			synctest.Test(t, func(t *testing.T) { hashes[outcomeWorld(t, 5, stale).hash]++ })
		}
		if len(hashes) != 1 {
			t.Errorf("stale=%v seed 5, 20 runs: %d different ledger hashes %v; want 1", stale, len(hashes), hashes)
		}
	}
}

type outcomeStats struct {
	calls, ok, fenced, failed, landed, dups int
	hash                                    uint64
}

func outcomeWorld(t *testing.T, seed uint64, stale bool) (st outcomeStats) {
	rng := rand.New(rand.NewPCG(seed, 27))
	sched := simworld.NewSched(seed)
	var base store.Store = memstore.New()
	if seed%2 == 1 {
		base = &simStore{objs: map[string][]byte{}, tags: map[string]string{}, revisions: true}
	}
	l := &ledger{Store: base, t: t, landed: map[string][]landing{}, versions: map[string][][2]string{}, ids: map[string]bool{}, allowDups: stale}
	var gs sync.WaitGroup
	var n int // in steps only
	keys := []string{"a", "b"}
	for w := range 8 {
		term := uint64(1 + w/2 + rng.IntN(2)) // pairs share a term; successors start later
		name := fmt.Sprintf("writer-%d", w)
		link := &flaky{st: l, rng: rand.New(rand.NewPCG(seed, uint64(w))), sched: sched, name: name, stale: stale, gs: &gs}
		fw, _ := New(link, term)
		gs.Add(1)
		go func() {
			defer gs.Done()
			time.Sleep(time.Duration(w*700+link.roll(2000)) * time.Millisecond)
			for range 12 {
				key := keys[link.roll(len(keys))]
				var data []byte
				sched.Step(name, func() {
					n++
					data = fmt.Appendf(nil, "call %d term %d", n, term)
				})
				op := link.roll(6)
				var err error
				switch op {
				case 0:
					err = fw.Seal(t.Context(), key)
				case 1:
					err = fw.Delete(t.Context(), key)
				default:
					err = fw.Put(t.Context(), key, data)
				}
				sched.Step(name, func() { st.check(t, sched, l, term, op, key, data, err) })
				time.Sleep(time.Duration(link.roll(1500)) * time.Millisecond)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		gs.Wait()
		close(done)
	}()
	sched.Run(done)
	for _, h := range l.landed {
		st.landed += len(h)
	}
	st.dups = l.dups
	st.hash = sched.Hash()
	if t.Failed() {
		t.Logf("seed %d failed (replay: go test -run TestCallOutcomes ./fence -sim.seeds=%d); the ledger's last 60 lines:\n%s",
			seed, 4*(seed+1), strings.Join(sched.Ledger(60), "\n"))
	}
	return st
}

// check counts one call's outcome and checks it against what landed.
func (st *outcomeStats) check(t *testing.T, sched *simworld.Sched, l *ledger, term uint64, op int, key string, data []byte, err error) {
	st.calls++
	switch {
	case err == nil:
		st.ok++
	case errors.Is(err, ErrFenced):
		st.fenced++
	default:
		st.failed++
	}
	sched.Record("term %d op %d %s %q: %v", term, op, key, data, err == nil)
	h := l.snapshot(key)
	top := uint64(0)
	if len(h) > 0 {
		top = h[len(h)-1].term
	}
	switch {
	case errors.Is(err, ErrFenced):
		if top <= term {
			t.Errorf("term %d op %d on %q: ErrFenced (%v) but the key's last landed term is %d", term, op, key, err, top)
		}
	case err != nil:
	case op == 0:
		if top < term {
			t.Errorf("term %d: Seal(%q) returned nil but the key's last landed term is %d", term, key, top)
		}
	case op >= 2:
		found := false
		for _, x := range h {
			found = found || (x.term == term && !x.deleted && bytes.Equal(x.data, data))
		}
		if !found {
			t.Errorf("term %d: Put(%q, %q) returned nil but never landed", term, key, data)
		}
	}
}
