package simworld

// Sched runs the goroutines of a simulation inside a testing/synctest
// bubble one step at a time, in an order drawn from a seed, so that a seed
// replays the same history every time. (Gate, beside it, orders the calls
// that reach a shared store at one instant by name instead, with no
// draw; it serves the root simulation, whose seeds were explored with it.
// Sched serves the fence simulations, whose exploration is the order.)
//
// How it works:
//
// A goroutine of the simulation does everything that touches state shared
// with other goroutines (a store call, a fault, a counter) inside
// Sched.Step, and between steps touches only its own state, sleeps on the
// bubble's timers or waits on the bubble's channels. The bubble's root
// goroutine runs Sched.Run. At each instant of virtual time Run waits until
// every other goroutine of the bubble is durably blocked (synctest.Wait),
// then grants one pending step, chosen by the seed among the pending steps
// sorted by their goroutines' names, and waits again. What the goroutines
// do then depends only on the seed: not on the runtime's scheduling, on
// which goroutine a timer woke first, or on select's random choice among
// ready cases inside a step's caller (each is resolved before the pick).
//
// Each simulation keeps a ledger: the steps granted, with their virtual
// times, and whatever the simulation adds with Record. Hash is an FNV-1a
// hash of it, which a test prints per seed so that two runs of a seed can
// be compared; Ledger returns its lines, for printing when a seed fails.
//
// The rules a simulation must keep, or replays diverge:
//   - a goroutine's name is unique among those pending at once, and is a
//     function of the seed's history (a parent names its children);
//   - randomness comes from Sched.Rand inside a step, or from a source the
//     goroutine owns, seeded from the seed and its name;
//   - no map is ranged over where the order matters, and no global random
//     source is used.

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing/synctest"
	"time"
)

// Sched orders the steps of one simulation. Make it inside the bubble
// whose goroutines use it.
type Sched struct {
	rng   *rand.Rand
	start time.Time
	wake  chan struct{} // a pending step was added; buffered 1

	mu      sync.Mutex // guards pending
	pending []*step

	// Owned by Run, and by the step it granted while it runs.
	h      hash.Hash64
	ledger []string
	steps  int
}

type step struct {
	name  string
	grant chan struct{}
}

// NewSched returns a scheduler whose choices come from seed.
func NewSched(seed uint64) *Sched {
	return &Sched{
		rng:   rand.New(rand.NewPCG(seed, 0xde7e)),
		start: time.Now(),
		wake:  make(chan struct{}, 1),
		h:     fnv.New64a(),
	}
}

// Step runs fn once Run grants it, alone: no other step runs meanwhile.
// name is the calling goroutine's, unique among the goroutines with a step
// pending. Step must be called from a goroutine of the bubble other than
// Run's.
func (s *Sched) Step(name string, fn func()) {
	st := &step{name: name, grant: make(chan struct{})}
	s.mu.Lock()
	for _, p := range s.pending {
		if p.name == name {
			s.mu.Unlock()
			panic(fmt.Sprintf("simworld: two steps pending for %q: goroutine names must be unique", name))
		}
	}
	s.pending = append(s.pending, st)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-st.grant
	fn()
}

// Run grants pending steps one at a time until done is closed and no step
// is pending. It must be called from the bubble's root goroutine, which
// must not call synctest.Wait itself meanwhile.
func (s *Sched) Run(done <-chan struct{}) {
	for {
		synctest.Wait()
		s.mu.Lock()
		n := len(s.pending)
		s.mu.Unlock()
		if n == 0 {
			select {
			case <-s.wake:
				continue
			case <-done:
				synctest.Wait()
				s.mu.Lock()
				n = len(s.pending)
				s.mu.Unlock()
				if n == 0 {
					return
				}
				continue
			}
		}
		s.mu.Lock()
		slices.SortFunc(s.pending, func(a, b *step) int { return strings.Compare(a.name, b.name) })
		i := s.rng.IntN(len(s.pending))
		st := s.pending[i]
		s.pending = slices.Delete(s.pending, i, i+1)
		s.mu.Unlock()
		s.steps++
		s.record(fmt.Sprintf("%v step %s", time.Since(s.start), st.name))
		close(st.grant)
	}
}

// Rand is the scheduler's random source, for draws made inside a step (or
// by Run's goroutine before Run).
func (s *Sched) Rand() *rand.Rand { return s.rng }

// Record adds a line to the ledger, with the virtual time. Call it inside
// a step, or from Run's goroutine when Run is not running.
func (s *Sched) Record(format string, args ...any) {
	s.record(fmt.Sprintf("%v ", time.Since(s.start)) + fmt.Sprintf(format, args...))
}

func (s *Sched) record(line string) {
	s.h.Write([]byte(line))
	s.h.Write([]byte{'\n'})
	s.ledger = append(s.ledger, line)
}

// Hash returns the hash of the ledger so far.
func (s *Sched) Hash() uint64 { return s.h.Sum64() }

// Steps returns how many steps Run granted.
func (s *Sched) Steps() int { return s.steps }

// Ledger returns the ledger's lines, at most the last n of them (all when
// n <= 0).
func (s *Sched) Ledger(n int) []string {
	if n > 0 && len(s.ledger) > n {
		return s.ledger[len(s.ledger)-n:]
	}
	return s.ledger
}
