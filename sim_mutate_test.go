//go:build s3lect_mutations

package s3lect

import (
	"testing"

	"github.com/s3lect/s3lect/internal/simworld"
)

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	return simworld.SetMutation(t, map[string]*bool{"delta0": &mutDeltaZero, "margin0": &mutMarginZero, "etagonly": &mutETagOnly,
		"peernocheck": &mutPeerNoCheck, "nottl": &mutIgnoreTTL, "noterm": &mutNoTermObject,
		"stepnowait": &mutStepNoWait, "nohold": &mutNoHandoverHold,
		"noreread": &mutNoReleaseReread, "stependfirst": &mutStepEndFirst, "steprenewany": &mutStepRenewAny, "anntakeover": &mutAnnounceTakeover, "annrelease": &mutAnnounceRelease,
		"annnolead": &mutAnnounceNoLead, "nowatch": &mutNoReleaseWatch, "noanntransfer": &mutNoAnnouncedTransfer,
		"monoclock": &mutMonoClock, "exleader": &mutExLeaderShortcut, "notoken": &mutSightNoToken,
		"noclaims": &mutNoTermClaims, "claimnowait": &mutClaimNoWait, "releaseatonce": &mutReleaseAtOnce, "peertoken": &mutPeerAdoptToken,
		"claimownttl": &mutClaimOwnTTL, "nogapclaims": &mutNoGapClaims, "restartnoclaimttl": &mutRestartNoClaimTTL}, "")
}
