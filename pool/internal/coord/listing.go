package coord

import (
	"slices"
	"time"
)

// Listed is the result of OpList: the workers' objects by worker ID.
func (c *Coordinator) Listed(now time.Time, entries map[string]Entry, err error) []Effect {
	c.listing = false
	if err != nil || c.down {
		c.ended(false)
		return c.after(now, nil)
	}
	c.ok(OpList)
	entries = c.sameForms(entries)
	for _, id := range sortedKeys(entries) {
		e := entries[id]
		k := c.k(id)
		if !c.listed && e.Session != "" && c.roster.closed[id] == e.Session {
			// A closed session, by the roster: nothing to read (4.7).
			k.sight, k.seen, k.news, k.departed, k.skipped = e.Session, now, e.News, true, true
			continue
		}
		if k.rnonce != "" && e.Session != k.rtag {
			k.rnonce, k.rtag = "", "" // the reported write was superseded: it dates nothing (4.8)
		}
		c.entry(now, k, e)
		if !c.listed {
			k.wantGet = true
		}
	}
	for _, id := range sortedKeys(c.keys) {
		if _, ok := entries[id]; !ok {
			k := c.keys[id]
			k.rnonce, k.rtag = "", ""
			if k.sight != "" || k.cur != nil {
				k.sight, k.seen, k.wantGet = "", now, true
			}
		}
	}
	ids := slices.DeleteFunc(sortedKeys(c.keys), func(id string) bool { return c.keys[id].departed })
	if len(ids) > 0 {
		c.sweep++
		c.keys[ids[c.sweep%len(ids)]].wantGet = true // one session a listing, in turn: news that got lost
	}
	if !c.gated && c.gateSent.IsZero() && !c.allRead.IsZero() && !c.listSent.Before(c.allRead.Add(c.lmax)) {
		// The gate listing: every key it shows at an ETag this era has
		// not read is read before the first grant (4.1).
		c.gateSent, c.gateKeys = c.listSent, map[string]bool{}
		for _, id := range sortedKeys(entries) {
			if k := c.keys[id]; !k.departed && entries[id].Session != k.readTag {
				c.gateKeys[id], k.wantGet = true, true
			}
		}
	}
	c.ended(true)
	c.listed = true
	return c.after(now, nil)
}

// ended settles the ghosts a read found ending while a listing was out:
// over if that listing came in (ok) showing no write on their key that
// no read returned; otherwise their key is read again.
func (c *Coordinator) ended(ok bool) {
	for i := range c.ghosts {
		if g := &c.ghosts[i]; g.ending {
			k := c.keys[g.id]
			g.ending, g.done = false, ok && k.listed == "" && k.unread == 0
		}
	}
}

// haunted reports whether key k has a ghost whose wait runs: each write
// a listing shows there is read, so that only a write that lands between
// the listing and the read extends the wait (4.3).
func (c *Coordinator) haunted(k *key) bool {
	return slices.ContainsFunc(c.ghosts, func(g ghost) bool { return !g.done && c.keys[g.id] == k })
}

// entry takes in what a listing, or a worker's report, says of a key.
func (c *Coordinator) entry(now time.Time, k *key, e Entry) {
	if v := k.cur; v != nil && c.listSent.Before(k.readAt) && e.Session != "" && (e.Session == v.etag || e.Session == v.prev) {
		// A listing sent before the key's last read returned, showing a
		// write of the session in view that a read returned: an older
		// view of the key, not a write no read returned (4.3). Those
		// bytes are that session's, never a ghost's.
		e.Session = k.sight
	}
	if e.Session != k.sight {
		k.sight, k.seen, k.departed = e.Session, now, false
		if k.listed != "" {
			k.unread++ // a write listed, no read returned it, and now another
		} else if k.unread == 0 {
			k.listedSent, k.listedSeq = c.listSent, k.sentSeq
		}
		k.listed, k.listedAt = e.Session, now
		if k.cur == nil || len(k.page.hist) > 0 || e.Session == "" || c.haunted(k) {
			k.wantGet = true // new, vanished (its news listed), or owing this coordinator an acknowledgement
		}
	}
	if e.News != k.news {
		k.news = e.News
		k.wantGet = k.wantGet || !k.departed
	}
}
