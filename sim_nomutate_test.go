//go:build !s3lect_mutations

package s3lect

import "testing"

// setMutation refuses -sim.mutate: the mutations are compiled in only with
// -tags s3lect_mutations (mutations.go).
func setMutation(t *testing.T) func() {
	t.Helper()
	if *simMutate != "" {
		t.Fatalf("-sim.mutate=%s needs the mutations compiled in: go test -tags s3lect_mutations -run 'TestSafetySimulation/VARIANT$' -sim.mutate=%s .",
			*simMutate, *simMutate)
	}
	return func() {}
}
