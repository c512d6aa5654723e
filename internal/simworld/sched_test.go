package simworld_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
)

// world runs eight goroutines that wake at the same instants (every 10 ms
// of virtual time, some of them at once) and append their names to one
// shared slice, a step at a time. The goroutines' sleeps come from
// worldSeed, the scheduler's choices from seed. It returns the order and
// the hash.
func world(t *testing.T, seed, worldSeed uint64) (order string, hash uint64) {
	var got []string
	synctest.Test(t, func(t *testing.T) {
		s := simworld.NewSched(seed)
		var wg sync.WaitGroup
		for g := range 8 {
			name := fmt.Sprintf("g%d", g)
			rng := rand.New(rand.NewPCG(worldSeed, uint64(g)))
			wg.Go(func() {
				for range 5 {
					time.Sleep(time.Duration(rng.IntN(3)) * 10 * time.Millisecond)
					s.Step(name, func() {
						got = append(got, name)
						s.Record("%s appends", name)
					})
				}
			})
		}
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		s.Run(done)
		if s.Steps() != 40 {
			t.Errorf("Steps() = %d; want 40", s.Steps())
		}
		if n := len(s.Ledger(0)); n != 80 {
			t.Errorf("the ledger has %d lines; want 80 (40 steps, 40 records)", n)
		}
		hash = s.Hash()
	})
	return strings.Join(got, " "), hash
}

func TestASeedReplaysItsHistory(t *testing.T) {
	order, hash := world(t, 1, 1)
	for i := range 20 {
		o, h := world(t, 1, 1)
		if o != order || h != hash {
			t.Fatalf("run %d of seed 1: order %q, hash %016x; want %q, %016x as in the first run", i+2, o, h, order, hash)
		}
	}
}

func TestSeedsChooseTheOrder(t *testing.T) {
	orders := map[string]bool{}
	for seed := range uint64(10) {
		o, _ := world(t, seed, 1)
		orders[o] = true
	}
	if len(orders) < 5 {
		t.Fatalf("10 seeds of the scheduler over one world gave %d different orders; want the seed to choose among the steps pending at once", len(orders))
	}
}

func TestTwoStepsPendingUnderOneNamePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simworld.NewSched(1)
		recovered := make(chan any, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				defer func() { recovered <- recover() }()
				s.Step("same", func() {})
			})
		}
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		s.Run(done)
		panics := 0
		for range 2 {
			if r := <-recovered; r != nil {
				panics++
			}
		}
		if panics != 1 {
			t.Fatalf("two goroutines stepping as %q: %d panicked; want 1", "same", panics)
		}
	})
}
