package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// flaky is one writer's link.
type flaky struct {
	st    *ledger
	rng   *rand.Rand
	mu    *sync.Mutex
	stale bool
	wg    *sync.WaitGroup
}

var errFlaky = errors.New("outcomes: connection reset")

func (f *flaky) roll(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(n)
}

func (f *flaky) Get(ctx context.Context, key string) ([]byte, string, error) {
	switch r := f.roll(20); {
	case r == 0:
		return nil, "", errFlaky
	case r < 4 && f.stale:
		f.st.mu.Lock()
		vs := f.st.versions[key]
		f.st.mu.Unlock()
		if len(vs) == 0 {
			return nil, "", store.ErrNotFound
		}
		v := vs[f.roll(len(vs))]
		return []byte(v[0]), v[1], nil
	}
	return f.st.Get(ctx, key)
}

func (f *flaky) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	switch r := f.roll(20); {
	case r == 0:
		return "", errFlaky // before the store
	case r == 1:
		_, err := f.st.PutIfMatch(ctx, key, data, etag)
		if err != nil {
			return "", err
		}
		return "", errFlaky // landed, reply lost
	case r == 2:
		d := time.Duration(f.roll(10_000)) * time.Millisecond
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			time.Sleep(d)
			_, _ = f.st.PutIfMatch(context.Background(), key, data, etag)
		}()
		return "", errFlaky // on its way
	}
	return f.st.PutIfMatch(ctx, key, data, etag)
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
				if t.Failed() {
					t.Fatalf("seed %d", seed)
				}
			}
			t.Logf("%s: %+v", variant, total)
		})
	}
}

type outcomeStats struct{ calls, ok, fenced, failed, landed, dups int }

func outcomeWorld(t *testing.T, seed uint64, stale bool) (st outcomeStats) {
	rng := rand.New(rand.NewPCG(seed, 27))
	var mu sync.Mutex
	var base store.Store = memstore.New()
	if seed%2 == 1 {
		base = &simStore{objs: map[string][]byte{}, tags: map[string]string{}, revisions: true}
	}
	l := &ledger{Store: base, t: t, landed: map[string][]landing{}, versions: map[string][][2]string{}, ids: map[string]bool{}, allowDups: stale}
	var late, writers sync.WaitGroup
	var n int
	keys := []string{"a", "b"}
	for w := range 8 {
		term := uint64(1 + w/2 + rng.IntN(2)) // pairs share a term; successors start later
		link := &flaky{st: l, rng: rand.New(rand.NewPCG(seed, uint64(w))), mu: &mu, stale: stale, wg: &late}
		fw, _ := New(link, term)
		writers.Add(1)
		go func() {
			defer writers.Done()
			time.Sleep(time.Duration(w*700+link.roll(2000)) * time.Millisecond)
			for range 12 {
				key := keys[link.roll(len(keys))]
				mu.Lock()
				n++
				data := fmt.Appendf(nil, "call %d term %d", n, term)
				mu.Unlock()
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
				mu.Lock()
				st.calls++
				switch {
				case err == nil:
					st.ok++
				case errors.Is(err, ErrFenced):
					st.fenced++
				default:
					st.failed++
				}
				mu.Unlock()
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
				time.Sleep(time.Duration(link.roll(1500)) * time.Millisecond)
			}
		}()
	}
	writers.Wait()
	late.Wait()
	for _, h := range l.landed {
		st.landed += len(h)
	}
	st.dups = l.dups
	return st
}
