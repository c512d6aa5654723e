package pool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The watch (docs/pool-protocol.md, "Spreading the shards" and "Cost"):
// on a store that lists, a worker watches the pool with one listing of
// the session objects and one read of the member list per
// FrequentInterval, and reads the session objects themselves only in a
// look, when one is due. A listing is a hint: what it shows ages a
// sighting only once a fresh read returns the same ETag (peerView.update).

// listFailed takes in a listing that failed. It breaks every listed
// sighting's age, as a failed read breaks a sighting's: the next listing's
// count from its own return, and no read is aged from a listing before
// it (the object may have changed and been put back while no listing
// could see). What the listings showed still says who is live (lhint,
// liveUntil), so that one failed listing is no news (missedListing).
//
// It returns the workers whose objects the tick reads instead (when it
// does not look): those whose last read no listing has moved past, a
// listing since showing that very ETag or none having run. Their
// sighting's age rests on the next observation: when a failed listing
// was a look, its reads were that observation, and without one, a
// renewal and an exact restore of the bytes read before it could both
// fall in the two intervals to the next listing, widening the exact
// restore's overlap (docs/pool-protocol.md, "What is not covered") from
// one interval to two (a review's test: 8.2 s of overlap;
// TestAFailedListingKeepsTheRestoreBound). In a settled pool that is nobody: every renewal moves the
// listings past the last read (lchanged).
func (c *core) listFailed() (reread []string) {
	c.listFails++
	for w, pv := range c.peers {
		if pv.read && pv.sight.ETag != "" && !pv.lchanged && !pv.gap && !mutFailedListUnread {
			reread = append(reread, w)
		}
		switch {
		case mutListFailLooks:
			pv.lhint, pv.lhintAt = "", time.Time{}
		case pv.lsight != "" && pv.lhint != pv.lsight:
			pv.lhint, pv.lhintAt = pv.lsight, pv.lseenAt
		}
		pv.lsight, pv.lseenAt, pv.lsum = "", time.Time{}, ""
	}
	slices.Sort(reread)
	return reread
}

// missedListing reports whether this tick's listing is the first failed
// one in a row: the tick then looks only if one is due by what the
// listings showed before (lookDue), not for the failure itself. On
// MinIO, 100 workers listing 100 keys each interval on two cores saw
// listings run past their wait about once in 250 (all at once when the
// store stalled), and each made its tick a look: a read of every member's
// session object, 0.8 GET per worker per interval above the target of 2
// reads. From a second failure in a row, every tick looks again, as on a
// store that does not list.
func (c *core) missedListing() bool {
	return c.listFails == 1 && !mutListFailLooks
}

// listWait is how long a tick waits for its listing before it gives it
// up (missedListing): twice the longest recent listing (listTook), at least a
// quarter interval and at most half of one. A look reads every member's
// session object, so on a store whose listings of many keys take longer
// than a quarter interval (100 workers on MinIO sharing two cores with
// it) a fixed quarter made every late listing a hundred reads, and those
// reads made the next listings later still. Half an interval keeps the
// tick, begun at most a quarter interval after the renewals' slot
// (watchOffset), inside its interval.
func (c *core) listWait() time.Duration {
	if mutFixedListWait {
		return c.cp.fi / 4
	}
	return min(c.cp.fi/2, max(c.cp.fi/4, 2*c.listTook))
}

// noteListTook takes in how long a listing took (d), or that it ran out
// of its wait (timedOut): a listing cut off took at least its wait, so
// the next wait doubles, up to listWait's bound. listTook shrinks by an
// eighth at each listing that was quicker.
func (c *core) noteListTook(d time.Duration, timedOut bool, wait time.Duration) {
	if timedOut {
		d = max(d, wait)
	}
	c.listTook = decayingMax(c.listTook, d)
}

// decayingMax is the largest recent duration: d when longer than old,
// else old shrunk by an eighth (the store's round trip, a look's time to
// its intent, a listing's time).
func decayingMax(old, d time.Duration) time.Duration { return max(d, old-old/8) }

// applyListing takes in a listing of the session objects returned at at:
// each worker's listed ETag, first listed when it changed. In peer mode
// it also checks what the hub said against the store (doubt).
func (c *core) applyListing(entries []store.Entry, at time.Time) {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		w, ok := strings.CutPrefix(e.Key, c.cp.sessions)
		w, ok2 := strings.CutSuffix(w, ".json")
		if !ok || !ok2 || w == "" || strings.Contains(w, "/") || w == c.cp.id || e.ETag == "" {
			continue
		}
		seen[w] = true
		pv := c.listed(w, e.ETag, "", at)
		c.doubt(pv, e.ETag, at)
	}
	for w, pv := range c.peers {
		if !seen[w] && w != c.cp.id {
			pv.lsight, pv.lseenAt, pv.lsum, pv.lhint, pv.lhintAt = "", time.Time{}, "", "", time.Time{}
			if pv.read && pv.sight.ETag != "" {
				pv.lchanged = true
			}
		}
	}
	c.listAt = at
}

// listed takes in one worker's session ETag as a listing of the store
// (sum "") or a hub's digest (sum: the content it names) returned at at
// showed it. A digest that names the ETag with other content than the one
// that first named it starts the sighting anew.
func (c *core) listed(w, etag, sum string, at time.Time) *peerView {
	pv := c.peers[w]
	if pv == nil {
		pv = &peerView{}
		c.peers[w] = pv
	}
	if pv.lsight != etag || pv.lseenAt.IsZero() || sum != "" && pv.lsum != "" && sum != pv.lsum && !mutPeerNoSum {
		pv.lsight, pv.lseenAt, pv.lsum = etag, at, sum
	}
	if etag != pv.lhint {
		pv.lhint, pv.lhintAt = "", time.Time{}
	}
	if pv.read && etag != pv.sight.ETag {
		pv.lchanged = true
	}
	return pv
}

// lookDue reports whether this tick must look, by what the listing and the
// member list show against the last look: the member list changed (a
// join, a leave); a worker came alive or its session ran out (the live
// set changed); a live worker held, as last read, less or more than a
// fair share (the pool is not settled: settleAt and settleStuck pace
// it); this worker holds other than its share; a shard it set aside is
// due (lookAt); or, for the live worker with the lowest ID, a member
// whose session is over may be taken off the list (pruneAt paces it).
func (c *core) lookDue(now time.Time) bool {
	why := c.lookReason(now)
	if why != "" && c.cp.debug {
		var came, went []string
		if live := c.view(now, true).live; !slices.Equal(live, c.lookLive) {
			for _, id := range live {
				if !slices.Contains(c.lookLive, id) {
					came = append(came, id)
				}
			}
			for _, id := range c.lookLive {
				if !slices.Contains(live, id) {
					went = append(went, id)
				}
			}
		}
		c.note(slog.LevelDebug, "looking", "why", why, "came alive", came, "ran out", went)
	}
	return why != ""
}

// lookReason is lookDue's reason to look ("": none), for the Debug log.
func (c *core) lookReason(now time.Time) string {
	switch {
	case !slices.Equal(c.members, c.lookMembers) || c.membersSum != c.lookSum:
		return "the member list changed"
	case !c.lookAt.IsZero() && !now.Before(c.lookAt):
		return "a shard set aside is due"
	}
	v := c.view(now, true)
	if c.deferLook(v) {
		return ""
	}
	if !slices.Equal(v.live, c.lookLive) {
		return "the live workers changed"
	}
	if !settled(v, c.cp.n) && !c.settleStuck && !now.Before(c.settleAt) {
		return "a worker is off its share"
	}
	if !c.listedAt.IsZero() && !now.Before(c.listedAt.Add(c.cp.fi)) && v.counts[c.cp.id] != v.targets[c.cp.id] {
		return "this worker is off its share"
	}
	if v.live[0] == c.cp.id && !now.Before(c.pruneAt) {
		for _, m := range c.members {
			if m != c.cp.id && !slices.Contains(v.live, m) {
				return "a member to take off the list"
			}
		}
	}
	return ""
}

// deferLook reports whether this tick's look waits for the next one:
// when since the last look workers only ran out (none came alive, the
// member list unchanged) and this worker holds its share in v, once for
// each live set. Such a worker has nothing to claim or hand over; those
// below their share look at once, and the others an interval later,
// after those claims, when the look still starts the orphan wait of any
// shard they left. When all 99 survivors of a death looked at once, each
// reading 100 session objects, a store serving 2,000 calls a second was
// saturated for seconds, its listings ran past their wait (each tick a
// look: more reads), and the dead worker's shards were led again 2.4 to
// 3.0 leases after the crash (TestCrashOnABusyStore).
func (c *core) deferLook(v view) bool {
	if mutEagerLooks || slices.Equal(v.live, c.lookLive) || slices.Equal(v.live, c.deferLive) || v.counts[c.cp.id] != v.targets[c.cp.id] {
		return false
	}
	for _, id := range v.live {
		if !slices.Contains(c.lookLive, id) {
			return false // a worker came alive: shares fall, some hand over
		}
	}
	c.deferLive = slices.Clone(v.live)
	return true
}

// settled reports whether every live worker of v holds ⌊N/W⌋ to ⌈N/W⌉
// of the n shards, as last read.
func settled(v view, n int) bool {
	w := len(v.live)
	for _, id := range v.live {
		if c := v.counts[id]; c < n/w || c > (n+w-1)/w {
			return false
		}
	}
	return true
}

// looked notes what a look saw, for lookDue.
func (c *core) looked(v view, now time.Time) {
	c.lookLive, c.lookMembers, c.lookAt, c.lookSum = slices.Clone(v.live), slices.Clone(c.members), time.Time{}, c.membersSum
	c.deferLive = nil
	// A pool not settled is looked at again at the next tick, then after
	// one interval, two, four... up to four leases while it stays so; and
	// not at all for that reason once a look found the same counts as the
	// one before (stuck: a live worker that cannot claim its share, a
	// shard nobody can take, would otherwise make every worker read every
	// session object again and again; a worker off its own share still
	// looks, and any change of the live set or the member list ends it).
	ok := settled(v, c.cp.n)
	c.settleStuck = !ok && maps.Equal(v.counts, c.lookCounts)
	c.lookCounts = maps.Clone(v.counts)
	if c.settleWait == 0 || ok {
		c.settleWait = c.cp.fi
	}
	if !ok {
		c.settleAt = now.Add(c.settleWait - c.cp.fi/2)
		c.settleWait = min(2*c.settleWait, 4*c.cp.lt)
	}
	if c.pruneWait == 0 {
		c.pruneWait = c.cp.fi
	}
	for _, m := range c.members {
		if m != c.cp.id && !slices.Contains(v.live, m) {
			// A member stays on the list (its object lists a term still
			// needed, or is absent): try again later, less and less often.
			c.pruneAt = now.Add(c.pruneWait)
			c.pruneWait = min(2*c.pruneWait, 4*c.cp.lt)
			return
		}
	}
	c.pruneAt, c.pruneWait = time.Time{}, c.cp.fi
}

// pending returns when a look is next due for the shards this look set
// aside (zero: none): a shard to try again (notBefore), or one unowned in
// this look's view that the orphan rule may take.
func (c *core) pending(v view, now time.Time) time.Time {
	var at time.Time
	orphanWait := c.orphanWait(v)
	for name, sv := range c.shards {
		if sv.candSince.IsZero() || sv.foreign || c.mine[name] != nil {
			continue
		}
		// The orphan wait first (a look then finds most such shards owned
		// after all, and forgets them); once it has run, the wait of this
		// worker's rank (orphanRank).
		t := later(sv.notBefore, sv.candSince.Add(orphanWait))
		if !t.After(now) && (t.Before(at) || at.IsZero()) {
			t = later(t, sv.candSince.Add(orphanWait+c.orphanRank(v, name, orphanWait)))
		}
		if sv.notBefore.After(now) {
			t = earliest(t, sv.notBefore)
		}
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}

// leaveMembers tells the others that this worker has stopped, through
// the member list, which they read every interval, once Run has released
// its session (released: the record as written). With every shard
// released too (clean), it takes itself off the list; otherwise it stays
// a member (a term of its own lives on in its object) and names its
// released session under Left. Either way the list changes, and the
// others look at once instead of waiting for its session object to stand
// still for a lease. It leaves the list alone when the session object
// holds anything else by then: a new process of this ID has opened a
// session there, and its entry is its own (the list is read before the
// session object, and written over the list as read). A write refused by
// another change of the list is tried again, within a quarter
// LeaderTimeout in all.
func (p *Pool) leaveMembers(released []byte, clean bool) {
	rec, err := parseSession(released)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.lt/4)
	defer cancel()
	for range 4 {
		data, tag, err := p.get(ctx, p.keyMembers)
		if err != nil || tag == "" {
			return
		}
		m, err := parseMembers(data)
		if err != nil || !slices.Contains(m.Workers, p.cfg.ID) {
			return
		}
		if cur, _, err := p.get(ctx, p.keySession); err != nil || !bytes.Equal(cur, released) {
			return
		}
		if clean {
			m.Workers = slices.DeleteFunc(slices.Clone(m.Workers), func(w string) bool { return w == p.cfg.ID })
			m.TTL, m.Left, m.Sessions = maps.Clone(m.TTL), maps.Clone(m.Left), maps.Clone(m.Sessions)
			delete(m.TTL, p.cfg.ID)
			delete(m.Left, p.cfg.ID)
			delete(m.Sessions, p.cfg.ID)
		} else {
			m.Left = maps.Clone(m.Left)
			if m.Left == nil {
				m.Left = map[string]string{}
			}
			m.Left[p.cfg.ID] = rec.Session
		}
		_, err = p.put(ctx, p.keyMembers, stampMembers(encode(m)), tag, sha256.Sum256(data), time.Time{})
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrPreconditionFailed) {
			p.log.Info("cannot tell the others through the member list that this worker stopped; they wait for its session to look over", "err", err)
			return
		}
	}
}

// The watch's timing (docs/pool-protocol.md, "When a takeover is due"):
// when a worker reads, never how long it waits after a sighting. A crash
// failover is the time from the dead worker's last renewal to a
// survivor's first sight of it, plus the lease, plus the look that
// claims: the first is kept short by listing just after the renewals land
// (watchOffset), the last by starting the look's slow part before the
// lease runs out (lookAhead).

// noteRTT takes in the round trip of a session renewal: rtt keeps the
// largest recent one, shrinking by an eighth at each renewal that was
// quicker.
func (p *Pool) noteRTT(d time.Duration) {
	old := time.Duration(p.rtt.Load())
	p.rtt.Store(int64(decayingMax(old, d)))
}

// watchOffset is how long after the renewals' slot (the wall clock's
// multiples of FrequentInterval) a worker lists the session objects: a
// sixteenth of an interval (wall clocks a little apart) plus twice the
// store's recent round trip (the others' renewals land about as late as
// this worker's own), and at most a quarter interval. A renewal that lands
// after the listing is first seen an interval later, and a death found
// that much later.
func (p *Pool) watchOffset() time.Duration {
	return min(p.fi/4, p.fi/16+2*time.Duration(p.rtt.Load()))
}

// notePreLook takes in how long a look begun ahead of a session's end
// took from its tick's start to its intent written, for lookAhead: the
// largest recent one, shrinking by an eighth at each that was quicker.
func (c *core) notePreLook(d time.Duration) {
	c.preLook = decayingMax(c.preLook, d)
}

// expiring returns the latest moment up to horizon at which a worker live
// in this worker's view (at now) stops counting as alive, or now when
// none does: the look of this tick is then taken as of that moment (its
// view counts those workers dead, and its claims wait for it before they
// read the sessions that must clear them).
func (c *core) expiring(now, horizon time.Time) time.Time {
	asOf := now
	for id, pv := range c.peers {
		if id == c.cp.id || !pv.read && !slices.Contains(c.members, id) {
			continue
		}
		if until := pv.liveUntil(c.cp.lt, c.memberTTL[id]); until.After(now) && !until.After(horizon) {
			asOf = later(asOf, until)
		}
	}
	return asOf
}

// stable reports whether the pool is settled as far as this tick saw it,
// so that the watch may slow down to InfrequentInterval: this tick
// listed the sessions and did not look; every live worker holds its
// share, ⌊N/W⌋ or ⌈N/W⌉, and together all N, as last read; nothing is
// due (lookAt); and every other live worker's session object showed a
// new ETag at this tick's listing (a renewal: a session that missed one
// is watched every FrequentInterval, from its expected renewal to its
// lease's end).
func (c *core) stable(v view, listed, look bool) bool {
	if !listed || look || !c.lookAt.IsZero() || !settled(v, c.cp.n) {
		return false
	}
	sum := 0
	for _, id := range v.live {
		sum += v.counts[id]
		if id == c.cp.id {
			continue
		}
		if pv := c.peers[id]; pv == nil || pv.lsight == "" || pv.lseenAt.Before(c.listAt) {
			return false
		}
	}
	return sum == c.cp.n
}

// infrequentSlot returns the first local time at least half a
// FrequentInterval after now at which the wall clock reads a multiple of
// InfrequentInterval. A stable pool's workers all tick then (on the
// renewal slot at or after it), so that the survivors of a death all find
// it at the same listing and take their deficits together; on phases of
// their own, the last to find it set the failover (in examples/report,
// 10 workers, 3.3 to 3.7 × LeaderTimeout at the median instead of about
// 2.8 with an InfrequentInterval of twice the lease).
func (p *Pool) infrequentSlot(now time.Time) time.Time {
	after := now.Add(p.fi / 2)
	wall := time.Now().Add(after.Sub(p.now()))
	next := wall.Truncate(p.ii)
	for next.Before(wall) {
		next = next.Add(p.ii)
	}
	return after.Add(next.Sub(wall))
}

// Peer mode's watch (docs/pool-protocol.md, "Peer mode"; the wire is in
// peer.go).

// storeDue reports whether a tick in peer mode must list the store even
// when the hub's digest stands in for a listing: InfrequentInterval after
// the last listing. A digest taken in first ages nothing the listing
// shows the same.
func (c *core) storeDue(now time.Time) bool {
	return !now.Before(c.storeAt)
}

// covers reports whether d names every worker live in v but this one. A
// digest that leaves a live worker out (a death, a worker that cannot
// reach the hub, a hub with another view) says nothing of it: taken for a
// listing, that worker's last listed write would age until it counted as
// dead and every worker looked (read every session object), again and
// again while it lives. The store's listing shows whether it renews.
func (c *core) covers(d digest, v view) bool {
	if mutPeerPartial {
		return true
	}
	for _, id := range v.live {
		if id != c.cp.id && d.Sessions[id].ETag == "" {
			return false
		}
	}
	return true
}

// applyDigest takes in a hub's digest returned at at as a listing of the
// workers it names (listed): every ETag it names was written before the
// worker reported it, so before at, and, as a listed one, ages a sighting
// only once a fresh read returns it with the content the digest names. It
// says nothing of the workers it does not name, and takes in none that is
// neither a member nor read (anyone who reaches a hub can report).
func (c *core) applyDigest(d digest, at time.Time) {
	for w, r := range d.Sessions {
		if w == c.cp.id || r.ETag == "" || c.peers[w] == nil && !slices.Contains(c.members, w) {
			continue
		}
		if pv := c.peers[w]; pv != nil && pv.distrusted && !mutPeerTrusted {
			continue
		}
		pv := c.listed(w, r.ETag, r.Sum, at)
		if r.ETag != pv.stag {
			pv.peerNew = true
		}
	}
	c.listAt = at
}

// doubt checks a listing of the store against what the hubs said: a
// worker whose session object the store shows unchanged since the last
// listing, while a digest named another ETag for it in between, was said
// to renew when it did not (a hub that lies, or a listing that lags). The
// hubs' digests are then not used for four leases: the store is listed
// every interval.
//
// The digests are not taken in for that worker either, until the store
// (a listing, or a read in a look) shows its object changed, not gone:
// that a hub was wrong about it once is reason enough, and its renewals
// show in the store. Without
// that, something that answers at a dead worker's address with an old
// digest naming the worker (a process of another time, a proxy's cache),
// or a hub that keeps making up renewals for it, kept the worker live
// for ever: each time the doubt ran out, the digest's ETag was news
// against the listing's and counted as a renewal for a lease, the dead
// worker counted live with the shards its last record listed, and nobody
// claimed them (seed 889456 of the shard simulation: 64 shards unled for
// 90 s; TestPeerDistrust and TestPeerOldDigestAtADeadHubsAddress,
// -sim.mutate=peertrusted). A live worker the hub was right about, behind
// a listing that lagged, is trusted again at the next listing that shows
// its renewal.
func (c *core) doubt(pv *peerView, etag string, at time.Time) {
	if pv == nil {
		return
	}
	switch {
	case pv.peerNew && pv.stag == etag && !mutNoDoubt:
		c.doubtUntil = at.Add(4 * c.cp.lt)
		pv.distrusted = true
		c.note(slog.LevelWarn, "the hub of peer mode said a worker renewed its session, but the store shows it unchanged; listing the store every interval for four leases")
	case pv.stag != etag && etag != "":
		pv.distrusted = false
	}
	pv.stag, pv.peerNew = etag, false
}
