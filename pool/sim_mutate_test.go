//go:build s3lect_mutations

package pool

import (
	"maps"
	"slices"
	"testing"
)

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	muts := map[string]*bool{"margin0": &mutNoMargin, "latereply": &mutLateReply, "noreread": &mutNoReread, "nottl": &mutNoTTL, "noclearance": &mutNoClearance,
		"resignwaits": &mutResignWaits, "absentaged": &mutAbsentAged,
		"nointent": &mutNoIntent, "stalemembers": &mutStaleMembers,
		"noduplicatecheck": &mutNoDuplicateCheck, "serialrelease": &mutSerialRelease,
		"keepmembers":    &mutKeepMembers,
		"norestorecheck": &mutNoRestoreCheck, "nomemberttl": &mutNoMemberTTL,
		"nolist": &mutNoList, "stalelist": &mutStaleList, "keepstrays": &mutKeepStrays}
	if *simMutate == "" {
		return func() {}
	}
	m, ok := muts[*simMutate]
	if !ok {
		t.Fatalf("-sim.mutate=%s: want one of %s", *simMutate, slices.Sorted(maps.Keys(muts)))
	}
	*m = true
	return func() { *m = false }
}
