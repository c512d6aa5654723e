//go:build s3lect_mutations

package pool

import (
	"testing"

	"github.com/s3lect/s3lect/internal/simworld"
)

// setMutation sets the mutation -sim.mutate names, and returns a function
// that clears it.
func setMutation(t *testing.T) func() {
	t.Helper()
	return simworld.SetMutation(t, map[string]*bool{"margin0": &mutNoMargin, "latereply": &mutLateReply, "noreread": &mutNoReread, "nottl": &mutNoTTL, "noclearance": &mutNoClearance,
		"resignwaits": &mutResignWaits, "absentaged": &mutAbsentAged,
		"nointent": &mutNoIntent, "stalemembers": &mutStaleMembers,
		"noduplicatecheck": &mutNoDuplicateCheck, "serialrelease": &mutSerialRelease,
		"keepmembers":    &mutKeepMembers,
		"norestorecheck": &mutNoRestoreCheck, "nomemberttl": &mutNoMemberTTL,
		"nolist": &mutNoList, "stalelist": &mutStaleList, "keepstrays": &mutKeepStrays,
		"peerpartial": &mutPeerPartial, "nodoubt": &mutNoDoubt, "peertrusted": &mutPeerTrusted, "nosessionmark": &mutNoSessionMark, "nomemberstamp": &mutNoMemberStamp, "restartlooks": &mutRestartLooks, "peerunlisted": &mutPeerUnlisted, "peermembers": &mutPeerMembers,
		"peernosum": &mutPeerNoSum, "joininstep": &mutJoinInStep, "peerthisround": &mutPeerThisRound,
		"unlistedwaits": &mutUnlistedWaits, "settlewaits": &mutSettleWaits, "orphanherd": &mutOrphanHerd, "stalerounds": &mutStaleRounds, "unreleasedwaits": &mutUnreleasedWaits, "fixedlistwait": &mutFixedListWait, "joinrush": &mutJoinRush, "eagerlooks": &mutEagerLooks, "forgetlook": &mutForgetLook, "listfaillooks": &mutListFailLooks, "failedlistunread": &mutFailedListUnread, "stalenamed": &mutStaleNamed, "staleanysession": &mutStaleAnySession, "releasedfirst": &mutReleasedFirst, "staleunproven": &mutStaleUnproven}, "")
}
