//go:build s3lect_mutations

package pool

// The mutations of mutations.go as variables, for the simulation's
// -sim.mutate flag. Only a test binary built with -tags s3lect_mutations
// has them.
var (
	mutNoMargin         bool // the session lease runs the whole LeaderTimeout
	mutLateReply        bool // a renewal whose reply came after the lease's end still extends it
	mutNoReread         bool // a takeover trusts the owner's session object as read before the shard record
	mutNoTTL            bool // a takeover waits its own LeaderTimeout, not the owner's when longer
	mutNoClearance      bool // an absent shard record is created without reading every member's session first
	mutResignWaits      bool // a leadership ended by a handover or Run's end is over for Resign only once its release is written
	mutAbsentAged       bool // an absent session object is aged as a sighting, per shard, from the first read after the shard record's that found it absent, not buried
	mutNoIntent         bool // a claim is written without listing it in the session first, and clearance ignores the others' listed claims
	mutStaleMembers     bool // clearance reads the sessions of the member list as the tick read it, not a fresh one
	mutNoDuplicateCheck bool // a session overwritten by another process of the same ID is not looked at
	mutSerialRelease    bool // Run's end releases the shards one at a time, each with the full retry schedule
	mutKeepMembers      bool // members whose sessions are over stay on the member list for ever
	mutNoRestoreCheck   bool // a sighting seen again after failed reads, or an older write of a session restored, counts as unchanged or current
	mutNoMemberTTL      bool // the member list states no ttl: a worker that never read a member's records waits out its own lease only
	mutNoList           bool // the sessions are watched by a read of each member's object every interval, not one listing
	mutStaleList        bool // a sighting counts from its first listing even when the fresh read before a claim returns another ETag
	mutKeepStrays       bool // a claim whose outcome stayed unknown, or that landed for an ended session, is left standing: the worker neither leads nor releases it
	mutPeerPartial      bool // peer mode: a hub's digest that leaves a live worker out stands in for a listing all the same
	mutNoDoubt          bool // peer mode: a listing that shows a session unchanged which the hub said renewed is not acted on
	mutPeerTrusted      bool // peer mode: digests are taken in again for a worker a listing showed one wrong about (doubt)
	mutNoSessionMark    bool // a worker counts itself listed whatever session the member list names for it
	mutNoMemberStamp    bool // the member list is written without a random value: its earlier bytes, and ETag, can come back
	mutRestartLooks     bool // a member list that only names a new session of a member makes every worker look
	mutPeerUnlisted     bool // peer mode: a worker not listed in its session skips reading the member list when the hub names the one it knows
	mutPeerMembers      bool // peer mode: the member list is read only every InfrequentInterval, whatever the digests say of it
	mutPeerNoSum        bool // peer mode: a digest's content is ignored: a read is aged from the digest that first named its ETag, whatever content it gave
	mutJoinInStep       bool // a worker whose write of the member list lost retries a quarter interval later, as every other loser does
	mutPeerThisRound    bool // peer mode: a hub's digest names only the reports of this round, not a late worker's of the round before
	mutUnlistedWaits    bool // a record naming a live session that lists nothing there is set aside until that session could be over, not looked at again half an interval later
	mutSettleWaits      bool // a leadership ended by its session is over for its holder only when the loop takes its end in, after the tick in progress
	mutOrphanHerd       bool // every worker at its share takes up an orphan at the orphan wait, two workers claiming one shard go by ID alone, and one taking up an orphan does not yield it
	mutStaleRounds      bool // every claim round of a look takes the look's first view, not one with what the rounds before it read
	mutFixedListWait    bool // a tick waits a quarter interval for its listing, however long listings take, and looks when it runs out
	mutJoinRush         bool // a worker that leads nothing claims a FrequentInterval after it is listed, and looks at every change, while the others still join the member list
	mutEagerLooks       bool // every worker looks at once when a worker runs out, those at their share too
	mutForgetLook       bool // a look that finds this worker may not act yet (off the member list, or just listed) leaves no look due when it may
	mutListFailLooks    bool // a failed listing forgets who the listings showed live, and makes its tick a look
	mutFailedListUnread bool // a failed listing that is no news reads nothing, not even the objects whose last read no listing has moved past
	mutUnreleasedWaits  bool // a shard whose release failed waits for this worker's orphan rank like any other orphan, though only this worker can free it
	mutStaleNamed       bool // a record older than another write of its shard (a restore) still holds claims off while the session it names lives
	mutStaleAnySession  bool // a stale record holds no claim off even when it names an earlier session of its owner than the one its object shows
	mutReleasedFirst    bool // a released session clears a record that names an earlier session of its worker at once, not after a lease of sightings not naming it
	mutStaleUnproven    bool // a stale record holds no claim off as soon as it is found stale, not a lease after
)
