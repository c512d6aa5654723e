package coord

// Ghosts (docs/pool-protocol.md 4.3): sessions whose object was written
// over, deleted or put back, held until a fresh read shows them over.

import "time"

// ghost is a session whose object was written over (or deleted, or put
// back to an earlier write): its writes fail unless an operator puts its
// last write back. Its holds stay held until a read of its key sent at or
// after until shows no later write of it (docs/pool-protocol.md, 4.3).
type ghost struct {
	id      string // its key
	session string
	seq     uint64 // the highest write of it the coordinator read
	until   time.Time
	wait    time.Duration
	holds   map[string]bool
	all     bool
	done    bool
	// ending: a read sent after the wait showed no later write while a
	// listing was out; over once that listing is in, if it shows no
	// write on the key that no read returned (Listed).
	ending bool
}

// readGhosts takes in what a read of key id showed (s, if ok) for its
// ghosts (4.3), and reports whether it revived one: a later write of the
// ghost's session. unread: a listing showed a write that no read returned.
func (c *Coordinator) readGhosts(now time.Time, id string, k *key, s Session, ok, unread bool) (revived bool) {
	for i := range c.ghosts {
		g := &c.ghosts[i]
		switch {
		case g.id != id || g.done:
		case ok && s.Session == g.session && (s.Seq > g.seq || s.Closed):
			// A later write of the ghost's session: its last write was put
			// back and it wrote again. It is live again, and holds every
			// shard until it has applied a page written from now on.
			// (Closed: over at once, by newView.)
			g.done, revived = true, true
			delete(k.gone, g.session)
			if k.cur != nil && k.cur.session == g.session {
				k.cur = nil
			}
		case unread && g.until.Before(now.Add(g.wait)):
			// A write listed that no read returned, and that the session
			// the key shows cannot account for: it may have been a later
			// write of the ghost's session, written over since (by an
			// operator, or a twin's new session), and the ghost may have
			// renewed again over it before this read. Wait a lease from
			// this read's return: every such write landed before it. An
			// end a read found while a listing was out is off.
			g.until, g.ending = now.Add(g.wait), false
		case !k.getAt.Before(g.until) && c.listing:
			// A listing is out: it may show a write of the ghost's that
			// landed before this read and was written over since (4.3).
			g.ending = true
		case !k.getAt.Before(g.until):
			g.done = true // no later write, by a read sent after its wait
		}
	}
	return revived
}

// ghost ends k's live session as written over.
func (c *Coordinator) ghost(now time.Time, id string, k *key) {
	v := k.cur
	g := ghost{id: id, session: v.session, seq: v.seq, until: now.Add(v.wait), wait: v.wait, holds: map[string]bool{}}
	g.all = c.holds(k, g.holds)
	c.ghosts = append(c.ghosts, g)
	k.gone[v.session] = v.seq
	k.cur = nil
}

// hidden makes a ghost, at the era's start, of every session that a page
// of an earlier era names on a key that showed no live session of it: its
// object may have been deleted, to be put back later (on S3 its next
// write then succeeds), so it may still lead any shard (4.1).
func (c *Coordinator) hidden(now time.Time) {
	for _, id := range sortedKeys(c.keys) {
		k := c.keys[id]
		if old := k.page.old; old != "" && !k.departed && !k.over(old) && (k.cur == nil || k.cur.session != old) {
			c.ghosts = append(c.ghosts, ghost{id: id, session: old, until: now.Add(c.lmax), wait: c.lmax, holds: map[string]bool{}, all: true})
		}
	}
}

// over reports whether this era took session sess, on key k, to be over.
func (k *key) over(sess string) bool {
	_, ok := k.gone[sess]
	return ok
}
