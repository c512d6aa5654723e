package coord

import "time"

// Reported is a worker's report of its objects (peer mode): a hint for
// when to read, never a sighting. It may ask for a read where a listing's
// entry would, but it never sets the key's sighting nor its first sight:
// only the coordinator's own listings and reads start a wait (4.3), so a
// report that names a write before it happens (on S3 an ETag is the hash
// of a predictable body) cannot start that write's wait early. Its Nonce,
// a random value of the write it reports, is kept: once a read shows the
// write that carries it, the write's wait counts from the report, which
// came after the write was sent (only its writer, or a reader of it, knew
// the Nonce). Before the era's first listing it is dropped.
//
// Nor does a report create a key: anyone who reaches the handler can
// report any ID, and a key the era knows is one its start waits to read
// (4.1), forever if the store refuses the key. A report for an ID no
// listing of this era has shown only brings the next listing forward, to
// a FrequentInterval after the last one: a new worker is read as soon as
// a listing shows it, and made-up IDs cost at most a listing an interval.
func (c *Coordinator) Reported(now time.Time, id string, e Entry) []Effect {
	if c.down || !c.listed || e.Session == "" {
		return nil
	}
	e = Entry{Session: sameForm(e.Session), News: sameForm(e.News), Nonce: e.Nonce}
	k := c.keys[id]
	if k == nil {
		if at := c.listSent.Add(c.cfg.FrequentInterval); at.Before(c.nextLst) {
			c.nextLst = at
		}
		return c.after(now, nil)
	}
	if e.Nonce != "" && e.Nonce != k.rnonce {
		// The first report of a write's Nonce: only a read that shows
		// that write, with that Nonce, makes it count (SessionRead).
		k.rnonce, k.rtag, k.rAt = e.Nonce, e.Session, now
	}
	if e.Session != k.sight && (k.cur == nil || len(k.page.hist) > 0) {
		k.wantGet = true // new, or owing this coordinator an acknowledgement
	}
	if e.News != k.news {
		k.news = e.News // news is only ever a hint to read
		k.wantGet = k.wantGet || !k.departed
	}
	return c.after(now, nil)
}

// PageTag returns the ETag of worker id's page as this coordinator last
// wrote or read it ("" when it has not).
func (c *Coordinator) PageTag(id string) string {
	if k := c.keys[id]; k != nil && k.page.read && !k.page.writing {
		return k.page.etag
	}
	return ""
}
