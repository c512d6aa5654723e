package shardlead

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
)

type nop struct{}

func (nop) Extend(time.Time) {}
func (nop) End(error)        {}
func (nop) Exit(error)       {}

// TestRegistered: a Maker comes back with its type; asking for another
// type is a panic that names both.
func TestRegistered(t *testing.T) {
	Register(Maker[*int](func(clock lease.Clock) Factory[*int] {
		return func(context.Context, uint64, time.Time, func()) (*int, Control) { n := 7; return &n, nop{} }
	}))
	l, _ := Registered[*int]()(lease.NewClock())(t.Context(), 1, time.Now(), nil)
	if *l != 7 {
		t.Fatalf("the registered Maker's leadership = %d; want 7", *l)
	}
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "*string") || !strings.Contains(r, "Maker[*int]") {
			t.Errorf("Registered[*string]() panicked with %q; want a message naming *string and what was registered", r)
		}
	}()
	Registered[*string]()
}
