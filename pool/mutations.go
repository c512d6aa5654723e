//go:build !s3lect_mutations

package pool

// Mutations break one rule of the shard lease each, to show what the
// simulation catches (docs/protocol.md, section 10). In every build but the
// simulation's mutation runs they are constants, false: nothing can switch
// a rule off. Built with -tags s3lect_mutations (mutations_on.go), they
// are variables that -sim.mutate sets:
//
//	go test -tags s3lect_mutations -run TestShardSimulation -sim.mutate=NAME ./pool
const (
	mutNoMargin         = false // the session lease runs the whole LeaderTimeout
	mutLateReply        = false // a renewal whose reply came after the lease's end still extends it
	mutNoReread         = false // a takeover trusts the owner's session object as read before the shard record
	mutNoTTL            = false // a takeover waits its own LeaderTimeout, not the owner's when longer
	mutNoClearance      = false // an absent shard record is created without reading every member's session first
	mutResignWaits      = false // a leadership ended by a handover or Run's end is over for Resign only once its release is written
	mutAbsentAged       = false // an absent session object is aged as a sighting, per shard, from the first read after the shard record's that found it absent, not buried
	mutNoIntent         = false // a claim is written without listing it in the session first, and clearance ignores the others' listed claims
	mutStaleMembers     = false // clearance reads the sessions of the member list as the tick read it, not a fresh one
	mutNoDuplicateCheck = false // a session overwritten by another process of the same ID is not looked at
	mutSerialRelease    = false // Run's end releases the shards one at a time, each with the full retry schedule
	mutKeepMembers      = false // members whose sessions are over stay on the member list for ever
	mutNoRestoreCheck   = false // a sighting seen again after failed reads, or an older write of a session restored, counts as unchanged or current
	mutNoMemberTTL      = false // the member list states no ttl: a worker that never read a member's records waits out its own lease only
	mutNoList           = false // the sessions are watched by a read of each member's object every interval, not one listing
	mutStaleList        = false // a sighting counts from its first listing even when the fresh read before a claim returns another ETag
	mutKeepStrays       = false // a claim whose outcome stayed unknown, or that landed for an ended session, is left standing: the worker neither leads nor releases it
	mutPeerPartial      = false // peer mode: a hub's digest that leaves a live worker out stands in for a listing all the same
	mutNoDoubt          = false // peer mode: a listing that shows a session unchanged which the hub said renewed is not acted on
	mutPeerTrusted      = false // peer mode: digests are taken in again for a worker a listing showed one wrong about (doubt)
	mutNoSessionMark    = false // a worker counts itself listed whatever session the member list names for it
	mutNoMemberStamp    = false // the member list is written without a random value: its earlier bytes, and ETag, can come back
	mutRestartLooks     = false // a member list that only names a new session of a member makes every worker look
	mutPeerUnlisted     = false // peer mode: a worker not listed in its session skips reading the member list when the hub names the one it knows
	mutPeerMembers      = false // peer mode: the member list is read only every InfrequentInterval, whatever the digests say of it
	mutPeerNoSum        = false // peer mode: a digest's content is ignored: a read is aged from the digest that first named its ETag, whatever content it gave
	mutJoinInStep       = false // a worker whose write of the member list lost retries a quarter interval later, as every other loser does
	mutPeerThisRound    = false // peer mode: a hub's digest names only the reports of this round, not a late worker's of the round before
	mutUnlistedWaits    = false // a record naming a live session that lists nothing there is set aside until that session could be over, not looked at again half an interval later
	mutSettleWaits      = false // a leadership ended by its session is over for its holder only when the loop takes its end in, after the tick in progress
	mutOrphanHerd       = false // every worker at its share takes up an orphan at the orphan wait, two workers claiming one shard go by ID alone, and one taking up an orphan does not yield it
	mutStaleRounds      = false // every claim round of a look takes the look's first view, not one with what the rounds before it read
	mutFixedListWait    = false // a tick waits a quarter interval for its listing, however long listings take, and looks when it runs out
	mutJoinRush         = false // a worker that leads nothing claims a FrequentInterval after it is listed, and looks at every change, while the others still join the member list
	mutEagerLooks       = false // every worker looks at once when a worker runs out, those at their share too
	mutForgetLook       = false // a look that finds this worker may not act yet (off the member list, or just listed) leaves no look due when it may
	mutListFailLooks    = false // a failed listing forgets who the listings showed live, and makes its tick a look
	mutFailedListUnread = false // a failed listing that is no news reads nothing, not even the objects whose last read no listing has moved past
	mutUnreleasedWaits  = false // a shard whose release failed waits for this worker's orphan rank like any other orphan, though only this worker can free it
	mutStaleNamed       = false // a record older than another write of its shard (a restore) still holds claims off while the session it names lives
	mutStaleAnySession  = false // a stale record holds no claim off even when it names an earlier session of its owner than the one its object shows
	mutReleasedFirst    = false // a released session clears a record that names an earlier session of its worker at once, not after a lease of sightings not naming it
	mutStaleUnproven    = false // a stale record holds no claim off as soon as it is found stale, not a lease after
)
