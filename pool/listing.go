package pool

import (
	"context"
	"strings"

	"github.com/s3lect/s3lect/pool/internal/coord"
)

// listWorkers is the coordinator's listing (OpList): the sessions under
// workers/ and their hints under news/, two listings of those
// sub-prefixes rather than one of the whole Prefix. The pool's other
// keys are never listed: the pages (one per worker), the roster, and
// the coordinator election's lockfile with its term claims, one object
// per takeover, which nothing deletes and which would otherwise grow
// every listing for good (docs/pool-protocol.md, 4.5).
func (p *Pool) listWorkers(ctx context.Context) (map[string]coord.Entry, error) {
	m := map[string]coord.Entry{}
	for _, dir := range []string{"workers/", "news/"} {
		es, err := p.calls.List(ctx, p.cfg.Prefix+dir)
		if err != nil {
			return nil, err
		}
		for _, en := range es {
			id, ok := strings.CutPrefix(en.Key, p.cfg.Prefix+dir)
			id, json := strings.CutSuffix(id, ".json")
			if !ok || !json || id == "" || strings.Contains(id, "/") {
				continue // not dir/<ID>.json
			}
			x := m[id]
			if dir == "workers/" {
				x.Session = en.ETag
			} else {
				x.News = en.ETag
			}
			m[id] = x
		}
	}
	return m, nil
}

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
