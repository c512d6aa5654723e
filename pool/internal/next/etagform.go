package next

import "github.com/s3lect/s3lect/pool/internal/coord"

// warnETagForms logs, once per worker, that the store listed an ETag in
// another form than a read returned it (quotes, case, a W/ prefix). The
// coordinator compares them in one form (coord's sameForm), so the pool
// is not slowed; the warning names the store's departure from
// store.Lister's contract, which other tools may not survive.
func (p *Pool) warnETagForms(c *coord.Coordinator) {
	listed, read := c.ETagForms()
	if listed == "" && read == "" || p.etagForms.Swap(true) {
		return
	}
	p.log.Warn("the store lists ETags in another form than it returns them on GET (store.Lister asks for one form); the pool compares them in one form",
		"listed", listed, "read", read)
}
