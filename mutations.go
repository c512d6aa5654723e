//go:build !s3lect_mutations

package s3lect

// Mutations break one rule of the protocol each, to measure what the
// safety simulation catches (docs/testing.md, "The protocol's evidence"). In every build
// but the simulation's mutation runs they are constants, false: the rules
// are compiled as written and nothing can switch one off. Built with
// -tags s3lect_mutations (mutations_on.go), they are variables that the
// simulation's -sim.mutate flag sets:
//
//	go test -tags s3lect_mutations -run 'TestSafetySimulation/VARIANT$' -sim.mutate=NAME .
const (
	mutDeltaZero    = false // no stretch of the leader's reported time (δ = 0)
	mutMarginZero   = false // no safety margin on the leader's lease
	mutETagOnly     = false // a sighting is its ETag alone, whatever the bytes
	mutPeerNoCheck  = false // a follower that relies on the peer never checks the takeover time
	mutIgnoreTTL    = false // a follower waits its own LeaderTimeout whatever the record says (version 2)
	mutNoTermObject = false // takeovers neither read nor raise the term object (version 2)

	mutStepNoWait      = false // a step-down request is released at once, without waiting for the holder (handover.go)
	mutNoHandoverHold  = false // a resigner may take its own released record back at once (handover.go)
	mutNoReleaseReread = false // a refused release is not followed by a read for a step-down request over it (heartbeat.go)
	mutStepEndFirst    = false // storage mode: a refused renewal ends the leadership before its read, so an announced step-down request is not honoured (heartbeat.go)
	mutStepRenewAny    = false // after a refused renewal, the leader renews over a step-down request on any leadership, not only its own (handover.go)

	mutAnnounceTakeover    = false // a follower takes an announced release over at the announced moment, without the release (announce.go)
	mutAnnounceRelease     = false // the leader releases at the announced moment, without waiting for the holder (announce.go)
	mutAnnounceNoLead      = false // Announce returns at once in storage mode, before the followers have read the announcement (announce.go)
	mutNoReleaseWatch      = false // followers ignore an announcement: they read at their usual pace (announce.go)
	mutNoAnnouncedTransfer = false // a member not named by an announced transfer waits the whole transfer window (handover.go)
	mutMonoClock           = false // the local clock does not count a suspend of the host (lease.Clock.MonoOnly)
	mutExLeaderShortcut    = false // an ex-leader takes its own last acknowledged write over at once (version 3's T8/E5)
	mutSightNoToken        = false // a sighting ignores the store's token: a restore of exact bytes looks unchanged (store.Sighter)
	mutNoTermClaims        = false // takeovers raise the term object without creating their term's claim (version 3)
	mutClaimNoWait         = false // a term claimed since the view was first seen does not restart its wait
	mutReleaseAtOnce       = false // a release is taken at once even when a higher term was claimed since (version 3's T2)
	mutPeerAdoptToken      = false // a view heard from the peer takes the first store token read for it as its own (version 3)
	mutClaimOwnTTL         = false // a record below a claimed term is waited out for its own ttl, not the longest lease known
	mutNoGapClaims         = false // a takeover claims only its own term, not the terms a writer without claims used (version 2)
	mutRestartNoClaimTTL   = false // a wait restarted for a claim found does not take the highest claim's ttl
)
