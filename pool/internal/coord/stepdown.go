package coord

import (
	"fmt"
	"time"
)

// When an era ends (docs/pool-protocol.md 4.5, 4.6).

// stepDown ends the era. Its effect's Term is the highest later era the
// era saw (0 if none): the executor hands it to its Elector, so that the
// next election starts above it (4.6).
func (c *Coordinator) stepDown(now time.Time, err error) []Effect {
	c.down = true
	return []Effect{{Op: OpStepDown, Err: err, Term: c.later}}
}

// stuck says why the era must step down, if it must: a kind of store
// call it still owes has not succeeded since one sent LeaderTimeout ago
// (4.5). Each kind counts alone: a coordinator whose listings succeed but
// whose page writes or session reads all fail decides nothing that
// lands.
func (c *Coordinator) stuck(now time.Time) error {
	for op, sent := range c.failing {
		if sent.IsZero() {
			continue
		}
		if !c.owes(Op(op)) {
			c.failing[op] = time.Time{} // nothing of that kind is wanted
			continue
		}
		if Op(op) == OpList && c.listing && now.Sub(c.listSent) < c.cfg.LeaderTimeout {
			continue // its answer decides (in peer mode listings are LeaderTimeout/2 apart)
		}
		if d := now.Sub(sent); d > c.cfg.LeaderTimeout {
			return fmt.Errorf("no %s call sent in the last %v succeeded", Op(op), d)
		}
	}
	return nil
}

// owes says whether the era still needs a call of op to succeed.
func (c *Coordinator) owes(op Op) bool {
	switch op {
	case OpList:
		return true
	case OpGetRoster:
		return c.roster.reading || !c.roster.read
	case OpPutRoster:
		return c.roster.writing || c.roster.dirty
	}
	for _, k := range c.keys {
		switch {
		case op == OpGetSession && (k.getting || k.wantGet),
			op == OpGetPage && (k.paging || !k.page.read && !k.departed),
			op == OpPutPage && (k.page.writing || k.page.dirty):
			return true
		}
	}
	return false
}

// ok notes that a call of op succeeded.
func (c *Coordinator) ok(op Op) { c.failing[op] = time.Time{} }
