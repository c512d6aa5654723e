//go:build s3lect_mutations

package s3lect

import "testing"

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	muts := map[string]*bool{"delta0": &mutDeltaZero, "margin0": &mutMarginZero, "etagonly": &mutETagOnly,
		"peernocheck": &mutPeerNoCheck, "nottl": &mutIgnoreTTL, "noterm": &mutNoTermObject,
		"stepnowait": &mutStepNoWait, "nohold": &mutNoHandoverHold,
		"noreread": &mutNoReleaseReread}
	if *simMutate == "" {
		return func() {}
	}
	m, ok := muts[*simMutate]
	if !ok {
		t.Fatalf("-sim.mutate=%s: want one of delta0, margin0, etagonly, peernocheck, nottl, noterm, stepnowait, nohold, noreread", *simMutate)
	}
	*m = true
	return func() { *m = false }
}
