//go:build s3lect_mutations

package fence

import (
	"testing"

	"github.com/s3lect/s3lect/internal/simworld"
)

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	return simworld.SetMutation(t, map[string]*bool{"noterm": &mutNoTermCheck}, "")
}
