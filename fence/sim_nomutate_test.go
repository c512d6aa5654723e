//go:build !s3lect_mutations

package fence

import "testing"

// setMutation refuses -sim.mutate: the mutations are compiled in only with
// -tags s3lect_mutations (mutations.go).
func setMutation(t *testing.T) func() {
	t.Helper()
	if *simMutate != "" {
		t.Fatalf("-sim.mutate=%s needs the mutations compiled in: go test -tags s3lect_mutations -run TestFenceSimulation ./fence -sim.mutate=%s", *simMutate, *simMutate)
	}
	return func() {}
}
