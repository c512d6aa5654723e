package coord

import "time"

// Reported is a worker's report of its objects (peer mode): a hint, as a
// listing's entry is, never a decision (4.3 acts on reads). Before the
// era's first listing it is dropped.
func (c *Coordinator) Reported(now time.Time, id string, e Entry) []Effect {
	if c.down || !c.listed || e.Session == "" {
		return nil
	}
	c.entry(now, c.k(id), e)
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
