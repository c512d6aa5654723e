package s3lect

// The claims a version 3 takeover makes for the terms a version 2 writer
// used and did not claim (docs/protocol.md 1.2, row C26), apart from the
// campaign's own steps (campaign.go).

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
)

// claimGap creates the claim of term, one a version 2 writer used and
// did not claim, below the takeover's own (section 1.2). Its ttl is the
// longest lease that writer may hold: one without ttl is waited out for
// at least noTTLLease.
func (c *core) claimGap(term uint64, now time.Time, emit func(effect)) {
	var own termObject
	json.Unmarshal(c.camp.hint.data, &own)
	data, _ := json.Marshal(termObject{Term: term, By: own.By, Lease: own.Lease, TTL: max(own.TTL, lease.TTLMillis(noTTLLease))})
	c.sh.send(doClaimTerm{write: c.sh.write(data, "", [32]byte{}), term: term, gap: true}, now, emit)
}

// gapClaimDone takes in the create of the claim of term, a version 2
// writer's (section 1.2). Created: the claim of the term below is made
// next, down to just above the term object's, then the takeover's own.
// Refused: a takeover claimed the term, and it may have done so after
// this elector first saw its view (a version 2 writer's term was never
// claimed before), so it counts as a refused claim: the highest claim is
// found and the view waited out anew.
func (c *core) gapClaimDone(ev evStore, term uint64, now time.Time, emit func(effect)) {
	switch {
	case c.camp.id == 0 || c.camp.term.Term <= term || c.camp.withdrawn != nil || c.sh.closing:
		c.camp.term = Record{}
		c.answerWithdrawn(emit)
	case ev.err == nil && term-1 > c.camp.floor:
		c.claimGap(term-1, now, emit)
	case ev.err == nil:
		h := c.camp.hint
		c.sh.send(doClaimTerm{write: c.sh.write(h.data, "", [32]byte{}), term: c.camp.term.Term}, now, emit)
	case errors.Is(ev.err, store.ErrPreconditionFailed):
		c.camp.term = Record{}
		c.sh.send(doFindTerm{c.sh.nextGen(), term}, now, emit)
	default:
		c.camp.term = Record{}
		c.termFailed(ev.err, now, emit)
	}
}
