//go:build s3lect_mutations

package pool

import "testing"

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	muts := map[string]*bool{"margin0": &mutNoMargin, "latereply": &mutLateReply, "noreread": &mutNoReread, "nottl": &mutNoTTL, "noclearance": &mutNoClearance}
	if *simMutate == "" {
		return func() {}
	}
	m, ok := muts[*simMutate]
	if !ok {
		t.Fatalf("-sim.mutate=%s: want one of margin0, latereply, noreread, nottl, noclearance", *simMutate)
	}
	*m = true
	return func() { *m = false }
}
