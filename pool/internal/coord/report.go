package coord

import "time"

// Reported is a worker's report of its objects (peer mode, 4.8): a hint
// for when to read, never a sighting, since a report can name a write's
// ETag before it happens. Its Nonce is kept: a read that shows the write
// carrying it dates that write from the report (SessionRead). A report
// creates no key: one for an ID no listing of this era has shown only
// brings the next listing forward, to a FrequentInterval after the last.
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
	if e.Session != k.sight && (k.cur == nil || len(k.page.hist) > 0 || c.haunted(k)) {
		k.wantGet = true // new, owing this coordinator an acknowledgement, or a ghost's key
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
