package coord

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/s3lect/s3lect/store"
)

// plan writes the pages that move the pool toward an even spread.
func (c *Coordinator) plan(now time.Time, fx []Effect) []Effect {
	// Every live session that has no page of this era gets one first,
	// naming what it leads (those it leads at another term, or that are
	// not shards any more, it drops).
	for _, id := range sortedKeys(c.keys) {
		k := c.keys[id]
		if k.cur == nil || !k.cur.applied.Less(k.cur.need) || !k.page.read || k.page.writing || len(k.page.hist) > 0 && !k.page.dirty {
			continue
		}
		want := map[string]uint64{}
		for s, t := range k.cur.leads {
			if c.shards[s] {
				want[s] = t
			}
		}
		fx = c.write(id, k, want, fx)
	}
	if !c.Ready(now) {
		return fx
	}
	// A session that applied its latest page and does not list one of
	// its shards gave it up (its Work returned): it starts it again only
	// on a newer page, so the shard is free.
	for _, id := range sortedKeys(c.keys) {
		k := c.keys[id]
		if k.cur == nil || len(k.page.hist) > 0 || k.page.writing || k.cur.applied.Era != c.term {
			continue
		}
		for _, s := range sortedKeys(k.page.shards) {
			if _, ok := k.cur.leads[s]; !ok {
				k.page.shards = maps.Clone(k.page.shards)
				delete(k.page.shards, s)
			}
		}
	}
	held := map[string]bool{}
	for _, g := range c.ghosts {
		for s := range g.holds {
			held[s] = true
		}
	}
	var live []string
	for _, id := range sortedKeys(c.keys) {
		k := c.keys[id]
		if k.cur == nil {
			continue
		}
		c.holds(k, held)
		live = append(live, id)
	}
	if len(live) == 0 {
		return fx
	}
	assigned := 0
	for _, id := range live {
		assigned += len(c.keys[id].page.shards)
	}
	if assigned == 0 && now.Before(c.lastNew.Add(c.cfg.FrequentInterval)) && now.Before(c.first.Add(c.cfg.LeaderTimeout)) {
		return fx // a cold start: let the pool assemble first
	}
	// Targets: ⌊N/W⌋ each, one more for the N mod W that have most now.
	n, w := len(c.order), len(live)
	byCount := slices.Clone(live)
	slices.SortStableFunc(byCount, func(a, b string) int { return len(c.keys[b].page.shards) - len(c.keys[a].page.shards) })
	target := map[string]int{}
	for i, id := range byCount {
		target[id] = n / w
		if i < n%w {
			target[id]++
		}
		target[id] = min(target[id], c.capacity) // a page must fit an object
	}
	want := map[string]map[string]uint64{}
	var takers []string // live workers below their target, whose page is not being written
	for _, id := range live {
		k := c.keys[id]
		mine := slices.DeleteFunc(sortedKeys(k.page.shards), func(s string) bool { return !c.shards[s] })
		slices.SortFunc(mine, func(a, b string) int { return c.rank[a] - c.rank[b] })
		m := map[string]uint64{}
		for _, s := range mine[:min(len(mine), target[id])] {
			m[s] = k.page.shards[s]
		}
		want[id] = m
		if len(m) < target[id] && !k.page.writing {
			takers = append(takers, id)
		}
	}
	slices.SortStableFunc(takers, func(a, b string) int {
		return (target[b] - len(want[b])) - (target[a] - len(want[a]))
	})
	// Grant the free shards: back to the worker that had one if it takes,
	// else round the takers, most short first.
	next := 0
	for _, s := range c.order {
		if len(takers) == 0 {
			break
		}
		if held[s] {
			continue
		}
		to := c.owner[s]
		if !slices.Contains(takers, to) {
			to = takers[next%len(takers)]
			next++
		}
		if c.grants+1 >= 1<<32 {
			return append(fx, c.stepDown(now, errors.New("the era has granted 2^32 shards"))...)
		}
		c.grants++
		want[to][s] = c.term<<32 | c.grants
		c.owner[s] = to
		if len(want[to]) >= target[to] {
			takers = slices.DeleteFunc(takers, func(id string) bool { return id == to })
		}
	}
	for _, id := range live {
		k := c.keys[id]
		if !k.page.writing && (k.page.dirty || !maps.Equal(want[id], k.page.shards)) {
			fx = c.write(id, k, want[id], fx)
		}
	}
	return fx
}

func (c *Coordinator) write(id string, k *key, shards map[string]uint64, fx []Effect) []Effect {
	if k.page.writing || !k.page.read {
		return fx
	}
	c.n++
	ver := Ver{c.term, c.n}
	k.page.shards = shards
	k.page.hist = append(k.page.hist, histEntry{ver: ver, shards: shards})
	k.page.writing, k.page.dirty = true, false
	p := Page{V: wireVersion, Ver: ver, ID: id, Session: k.cur.session, Shards: shards, MaxTTL: c.maxTTL, By: c.cfg.Mark}
	return append(fx, Effect{Op: OpPutPage, Key: id, Data: Marshal(p), IfMatch: k.page.etag, Ver: ver})
}

// SetShards changes the shards the pool runs.
func (c *Coordinator) SetShards(shards []string) {
	c.shards = map[string]bool{}
	for _, s := range shards {
		c.shards[s] = true
	}
	c.order = slices.Clone(shards)
	slices.SortFunc(c.order, func(a, b string) int {
		ha, hb := shardHash(a), shardHash(b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return cmpString(a, b)
	})
	c.rank = map[string]int{}
	longest := 0
	for i, s := range c.order {
		c.rank[s] = i
		longest = max(longest, len(Marshal(s)))
	}
	c.capacity = PageCapacity(longest)
}

// PageCapacity is how many shards whose names take at most encoded bytes
// in JSON (quotes included) one page, or one session object, can list
// within store.MaxObjectSize: a worker never leads more. An entry takes
// the name, a colon, a term of at most 20 digits and a comma; 1 KiB is
// kept for the rest of the object.
func PageCapacity(encoded int) int {
	return (store.MaxObjectSize - 1024) / (encoded + 22)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// shardHash orders the shards the same way in every era, and scatters
// names that sort together.
func shardHash(s string) uint64 {
	sum := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(sum[:])
}
