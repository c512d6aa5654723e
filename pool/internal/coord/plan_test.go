package coord

import "fmt"

// The tests check the planner's index against a plan from scratch at
// every event; the measurements at scale (measure_test.go) turn it off.
func init() { planCheck = (*Coordinator).checkIndex }

// checkIndex panics if the index differs from the held shards and the
// pages' unknown shards computed from scratch.
func (c *Coordinator) checkIndex() {
	held := map[string]bool{}
	for _, g := range c.ghosts {
		for s := range g.holds {
			held[s] = true
		}
	}
	for id, k := range c.keys {
		if k.cur != nil {
			c.holds(k, held)
		}
		invalid := 0
		for s := range k.page.shards {
			if !c.shards[s] {
				invalid++
			}
		}
		if e := c.idx.keys[id]; e == nil || e.invalid != invalid {
			panic(fmt.Sprintf("plan index: key %s: %d unknown shards on its page, the index says otherwise", id, invalid))
		}
	}
	nfree := 0
	for r, s := range c.order {
		free := c.idx.free[r/64]&(1<<(r%64)) != 0
		if free == held[s] || (c.idx.count[s] > 0) != held[s] {
			panic(fmt.Sprintf("plan index: shard %s held %v, the index says free %v (count %d)", s, held[s], free, c.idx.count[s]))
		}
		if free {
			nfree++
		}
	}
	if nfree != c.idx.nfree || len(held) != len(c.idx.count) {
		panic(fmt.Sprintf("plan index: %d free, %d held; the index says %d free, %d held", nfree, len(held), c.idx.nfree, len(c.idx.count)))
	}
}
