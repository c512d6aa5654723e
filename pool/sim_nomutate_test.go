//go:build !s3lect_mutations

package pool

import (
	"testing"

	"github.com/s3lect/s3lect/internal/simworld"
)

// setMutation refuses -sim.mutate: the mutations are compiled in only with
// -tags s3lect_mutations (mutations.go).
func setMutation(t *testing.T) func() {
	t.Helper()
	return simworld.SetMutation(t, nil, "go test -tags s3lect_mutations -run TestShardSimulation ./pool -sim.mutate=NAME")
}
