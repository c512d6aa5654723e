//go:build s3lect_mutations

package fence

import "testing"

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	muts := map[string]*bool{"noterm": &mutNoTermCheck}
	if *simMutate == "" {
		return func() {}
	}
	m, ok := muts[*simMutate]
	if !ok {
		t.Fatalf("-sim.mutate=%s: want noterm", *simMutate)
	}
	*m = true
	return func() { *m = false }
}
