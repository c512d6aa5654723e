//go:build s3lect_mutations

package s3lect

// The mutations of mutations.go as variables, for the simulation's
// -sim.mutate flag. Only a test binary built with -tags s3lect_mutations
// has them.
var (
	mutDeltaZero    bool // no stretch of the leader's reported time (δ = 0)
	mutMarginZero   bool // no safety margin on the leader's lease
	mutETagOnly     bool // a sighting is its ETag alone, whatever the bytes
	mutPeerNoCheck  bool // a follower that relies on the peer never checks the takeover time
	mutIgnoreTTL    bool // a follower waits its own LeaderTimeout whatever the record says (version 2)
	mutNoTermObject bool // takeovers neither read nor raise the term object (version 2)

	mutStepNoWait      bool // a step-down request is released at once, without waiting for the holder (handover.go)
	mutNoHandoverHold  bool // a resigner may take its own released record back at once (handover.go)
	mutNoReleaseReread bool // a refused release is not followed by a read for a step-down request over it (heartbeat.go)
	mutStepEndFirst    bool // storage mode: a refused renewal ends the leadership before its read, so an announced step-down request is not honoured (heartbeat.go)
	mutStepRenewAny    bool // after a refused renewal, the leader renews over a step-down request on any leadership, not only its own (handover.go)

	mutAnnounceTakeover    bool // a follower takes an announced release over at the announced moment, without the release (announce.go)
	mutAnnounceRelease     bool // the leader releases at the announced moment, without waiting for the holder (announce.go)
	mutAnnounceNoLead      bool // Announce returns at once in storage mode, before the followers have read the announcement (announce.go)
	mutNoReleaseWatch      bool // followers ignore an announcement: they read at their usual pace (announce.go)
	mutNoAnnouncedTransfer bool // a member not named by an announced transfer waits the whole transfer window (handover.go)
	mutMonoClock           bool // the local clock does not count a suspend of the host (lease.Clock.MonoOnly)
	mutExLeaderShortcut    bool // an ex-leader takes its own last acknowledged write over at once (version 3's T8/E5)
	mutSightNoToken        bool // a sighting ignores the store's token: a restore of exact bytes looks unchanged (store.Sighter)
	mutNoTermClaims        bool // takeovers raise the term object without creating their term's claim (version 3)
	mutClaimNoWait         bool // a term claimed since the view was first seen does not restart its wait
	mutReleaseAtOnce       bool // a release is taken at once even when a higher term was claimed since (version 3's T2)
	mutPeerAdoptToken      bool // a view heard from the peer takes the first store token read for it as its own (version 3)
	mutClaimOwnTTL         bool // a record below a claimed term is waited out for its own ttl, not the longest lease known
	mutNoGapClaims         bool // a takeover claims only its own term, not the terms a writer without claims used (version 2)
	mutRestartNoClaimTTL   bool // a wait restarted for a claim found does not take the highest claim's ttl
)
