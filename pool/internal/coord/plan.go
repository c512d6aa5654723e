package coord

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"maps"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/s3lect/s3lect/store"
)

// plan writes the pages that move the pool toward an even spread.
//
// Its work per event grows with the workers and the shards that change
// hands, not with all the shards: which shards are held, and by how many
// sessions and ghosts, is kept between events (planIndex) and brought up
// to date only for the keys whose session, leads, page or unacknowledged
// pages changed; the free shards are a bitset in the order of grants.
// Its decisions are those of a plan computed from scratch at every event
// (the simulation checks the index against one, planCheck).
func (c *Coordinator) plan(now time.Time, fx []Effect) []Effect {
	ids := sortedKeys(c.keys)
	fx = c.firstPages(ids, fx)
	if !c.Ready(now) {
		return fx
	}
	c.givenUp(ids)
	c.syncHolds()
	if planCheck != nil {
		planCheck(c)
	}
	var live []string
	assigned := 0
	for _, id := range ids {
		if k := c.keys[id]; k.cur != nil {
			live = append(live, id)
			assigned += len(k.page.shards)
		}
	}
	if len(live) == 0 {
		return fx
	}
	if assigned == 0 && now.Before(c.lastNew.Add(c.cfg.FrequentInterval)) && now.Before(c.first.Add(c.cfg.LeaderTimeout)) {
		return fx // a cold start: let the pool assemble first
	}
	target := c.targets(live)
	want, owned, takers := c.keep(live, target)
	if err := c.grant(target, want, owned, takers); err != nil {
		return append(fx, c.stepDown(now, err)...)
	}
	for _, id := range live {
		k := c.keys[id]
		if !k.page.writing && (k.page.dirty || owned[id] && !maps.Equal(want[id], k.page.shards)) {
			fx = c.write(id, k, want[id], false, fx)
		}
	}
	return fx
}

// firstPages writes every live session that has no page of this era its
// first, naming what it leads (those it leads at another term, or that
// are not shards any more, it drops), less what another keeps (others).
// At an era's start they wait until every session of its first listing
// is read, so that each first page knows what the others list.
func (c *Coordinator) firstPages(ids []string, fx []Effect) []Effect {
	if c.allRead.IsZero() {
		return fx
	}
	var o *others // built once a first page is due
	for _, id := range ids {
		k := c.keys[id]
		if k.cur == nil || !k.cur.took.Less(k.cur.need) || !k.page.read || k.page.writing || len(k.page.hist) > 0 && !k.page.dirty {
			continue
		}
		if o == nil {
			o = c.others()
		}
		want := map[string]uint64{}
		for s, t := range k.cur.leads {
			if c.shards[s] && !o.keep(c, id, s, t) {
				want[s] = t
			}
		}
		fx = c.write(id, k, want, true, fx)
	}
	return fx
}

// others is what the live sessions lead and are given, for first pages:
// for each shard, the highest term a session lists it at and how many
// list it at that term, and for how many a page of this era names it.
type others struct {
	top   map[string]uint64
	atTop map[string]int
	named map[string]int
}

func (c *Coordinator) others() *others {
	o := &others{top: map[string]uint64{}, atTop: map[string]int{}, named: map[string]int{}}
	for _, k := range c.keys {
		if k.cur == nil {
			continue
		}
		for s, t := range k.cur.leads {
			switch {
			case t > o.top[s]:
				o.top[s], o.atTop[s] = t, 1
			case t == o.top[s]:
				o.atTop[s]++
			}
		}
		if k.page.session == k.cur.session {
			for s := range k.page.shards {
				o.named[s]++
			}
		}
	}
	return o
}

// keep reports whether another than session id, which lists shard s at
// term t, keeps s: an early session's first page then leaves it out.
// Another live session keeps it if it lists s at a term at least t
// (grants raise terms, so the latest grant wins, and a crashed worker's
// stale session takes nothing from the shard's new owner; at equal terms,
// an election's term repeated, neither keeps it), if a page of this era
// names s for it (a first page included, at an earlier era's term), and
// a ghost (not one holding every shard) keeps what it holds. Two may
// lead s only where an operator put a session's writes back (section
// 7); the first pages end that, across a change of coordinator too.
func (o *others) keep(c *Coordinator, id, s string, t uint64) bool {
	if t < o.top[s] || o.atTop[s] > 1 {
		return true
	}
	if k := c.keys[id]; o.named[s] > 1 || o.named[s] == 1 && !(k.page.session == k.cur.session && k.page.shards[s] > 0) {
		return true
	}
	return slices.ContainsFunc(c.ghosts, func(g ghost) bool { return !g.done && !g.all && g.holds[s] })
}

// givenUp frees the shards a session gave up: one that took its
// latest page and does not list one of its shards (its Work returned)
// starts it again only on a newer page. Looked at again only when its
// leads or its page changed.
func (c *Coordinator) givenUp(ids []string) {
	x := &c.idx
	for _, id := range ids {
		k := c.keys[id]
		if k.cur == nil || len(k.page.hist) > 0 || k.page.writing || k.cur.took.Era != c.term {
			continue
		}
		e := x.entry(id)
		if sameMap(e.scanLeads, k.cur.leads) && sameMap(e.scanShards, k.page.shards) {
			continue
		}
		for _, s := range sortedKeys(k.page.shards) {
			if _, ok := k.cur.leads[s]; !ok {
				k.page.shards = maps.Clone(k.page.shards)
				delete(k.page.shards, s)
			}
		}
		e.scanLeads, e.scanShards = k.cur.leads, k.page.shards
	}
}

// targets gives each live worker ⌊N/W⌋ shards, one more for the N mod W
// that have most now, at most what a page holds; a leaving worker's
// session (4.4) none, and it is not counted.
func (c *Coordinator) targets(live []string) map[string]int {
	byCount := slices.DeleteFunc(slices.Clone(live), func(id string) bool { return c.keys[id].cur.leaving })
	n, w := len(c.order), len(byCount)
	slices.SortStableFunc(byCount, func(a, b string) int { return len(c.keys[b].page.shards) - len(c.keys[a].page.shards) })
	target := make(map[string]int, len(live))
	if w == 0 {
		return target // every worker leaves: none takes a shard
	}
	for i, id := range byCount {
		target[id] = n / w
		if i < n%w {
			target[id]++
		}
		target[id] = min(target[id], c.capacity) // a page must fit an object
	}
	return target
}

// keep returns what each live worker keeps: its page, unless it names
// more than its target or shards the pool no longer runs; then the first
// of its shards by rank, up to the target. A page kept as it is is
// shared with want until a grant adds to it (owned). takers are the live
// workers below their target whose page is not being written, most short
// first.
func (c *Coordinator) keep(live []string, target map[string]int) (want map[string]map[string]uint64, owned map[string]bool, takers []string) {
	x := &c.idx
	want, owned = make(map[string]map[string]uint64, len(live)), map[string]bool{}
	for _, id := range live {
		k := c.keys[id]
		var m map[string]uint64
		if e := x.keys[id]; e.invalid == 0 && len(k.page.shards) <= target[id] {
			m = k.page.shards
			if m == nil {
				m, owned[id] = map[string]uint64{}, true
			}
		} else {
			// Kept first: the shards whose home (planIndex) is not a
			// live worker short of its target; then by rank.
			away := func(s string) bool {
				h := x.home[s]
				hk := c.keys[h]
				return h != "" && h != id && hk != nil && hk.cur != nil && len(hk.page.shards) < target[h]
			}
			mine := slices.DeleteFunc(sortedKeys(k.page.shards), func(s string) bool { return !c.shards[s] })
			slices.SortFunc(mine, func(a, b string) int {
				if aa, ab := away(a), away(b); aa != ab {
					if aa {
						return 1
					}
					return -1
				}
				return c.rank[a] - c.rank[b]
			})
			m = map[string]uint64{}
			for _, s := range mine[:min(len(mine), target[id])] {
				m[s] = k.page.shards[s]
			}
			owned[id] = true
		}
		want[id] = m
		if len(m) < target[id] && !k.page.writing {
			takers = append(takers, id)
		}
	}
	slices.SortStableFunc(takers, func(a, b string) int {
		return (target[b] - len(want[b])) - (target[a] - len(want[a]))
	})
	return want, owned, takers
}

// grant adds the free shards to want, in rank order: each to its home if
// that worker takes, else back to the worker that had it if it takes,
// else round the takers, most short first.
func (c *Coordinator) grant(target map[string]int, want map[string]map[string]uint64, owned map[string]bool, takers []string) error {
	x := &c.idx
	if x.home == nil {
		x.home = map[string]string{}
	}
	taker := map[string]bool{}
	for _, id := range takers {
		taker[id] = true
	}
	next := 0
	for wi := 0; wi < len(x.free) && len(takers) > 0 && x.nfree > 0; wi++ {
		for word := x.free[wi]; word != 0 && len(takers) > 0; word &= word - 1 {
			s := c.order[wi*64+bits.TrailingZeros64(word)]
			prev := c.owner[s]
			to := prev
			if taker[x.home[s]] {
				to = x.home[s]
			}
			if !taker[to] {
				to = takers[next%len(takers)]
				next++
			}
			if pk := c.keys[prev]; prev != "" && prev != to && x.home[s] == "" && (pk == nil || pk.cur == nil || pk.cur.leaving) {
				x.home[s] = prev // its worker is gone (left, or its session over): it may come back
			}
			if to == x.home[s] {
				delete(x.home, s)
			}
			if c.grants+1 >= 1<<32 {
				return errors.New("the era has granted 2^32 shards")
			}
			c.grants++
			if !owned[to] {
				want[to], owned[to] = maps.Clone(want[to]), true
			}
			want[to][s] = c.term<<32 | c.grants
			c.owner[s] = to
			if len(want[to]) >= target[to] {
				takers = slices.DeleteFunc(takers, func(id string) bool { return id == to })
				delete(taker, to)
			}
		}
	}
	return nil
}

func (c *Coordinator) write(id string, k *key, shards map[string]uint64, soon bool, fx []Effect) []Effect {
	if k.page.writing || !k.page.read {
		return fx
	}
	c.n++
	ver := Ver{c.term, c.n}
	k.page.shards = shards
	k.page.hist = append(k.page.hist, histEntry{ver: ver, shards: shards})
	k.page.writing, k.page.dirty = true, false
	p := Page{V: wireVersion, Ver: ver, ID: id, Session: k.cur.session, Shards: shards, Soon: soon, MaxTTL: c.maxTTL, By: c.cfg.Mark}
	for s := range shards {
		if h := c.idx.home[s]; h != "" && h != id {
			if p.Homes == nil {
				p.Homes = map[string]string{}
			}
			p.Homes[s] = h
		}
	}
	return append(fx, Effect{Op: OpPutPage, Key: id, Data: pageData(p), IfMatch: k.page.etag, Ver: ver})
}

// pageData encodes page p, leaving its Homes out if the page would not
// fit an object with them: a hint only, the page's shards come first.
func pageData(p Page) []byte {
	data := Marshal(p)
	if len(data) > store.MaxObjectSize {
		p.Homes = nil
		data = Marshal(p)
	}
	return data
}

// SetShards changes the shards the pool runs.
func (c *Coordinator) SetShards(shards []string) {
	c.order = slices.Clone(shards)
	slices.SortFunc(c.order, func(a, b string) int {
		return cmp.Or(cmp.Compare(shardHash(a), shardHash(b)), strings.Compare(a, b))
	})
	c.shards, c.rank = map[string]bool{}, map[string]int{}
	c.idx = planIndex{home: c.idx.home} // rebuilt on the next plan, with the new ranks
	longest := 0
	for i, s := range c.order {
		c.shards[s], c.rank[s] = true, i
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

// shardHash orders the shards the same way in every era, and scatters
// names that sort together.
func shardHash(s string) uint64 {
	sum := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(sum[:])
}

// planCheck, if set, checks the index at every plan against the held
// shards computed from scratch (the tests set it, plan_test.go).
var planCheck func(c *Coordinator)

// planIndex is what plan keeps between events: for every key, the
// shards its live session may lead (holds, 4.2) as last computed, and
// for every ghost its holds; how many of them hold each shard; and the
// shards none holds, by rank.
type planIndex struct {
	built  bool
	count  map[string]int
	keys   map[string]*keyIndex
	ghosts map[unsafe.Pointer]map[string]bool // a ghost's holds, by the map's address (each ghost has its own)
	free   []uint64                           // bit r: c.order[r] is held by none
	nfree  int
	// home: a shard granted away from a worker whose session was over
	// (it left, or died) names that worker, until the shard goes back to
	// it: when a worker of that ID returns short of its target, the
	// others drop those shards first and the grants go to it, so that a
	// rolling deploy moves each shard away and back once, not on from
	// worker to worker. Pages carry it (Page.Homes), so that the next era
	// learns it when it reads them: the coordinator's own restart too.
	home map[string]string
}

// keyIndex is what the index knows of one key. The maps it keeps are
// compared by identity: the coordinator never changes a session's leads,
// a page's shards or an unacknowledged page in place, it replaces them;
// and keeping them here keeps their addresses from being reused.
type keyIndex struct {
	cur                   *view
	leads, shards         map[string]uint64
	hist                  int
	histFirst, histLast   Ver
	holds                 map[string]bool
	invalid               int               // shards the page names that the pool no longer runs
	scanLeads, scanShards map[string]uint64 // as the give-up scan last saw them
}

func sameMap[V any](a, b map[string]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func (x *planIndex) entry(id string) *keyIndex {
	if x.keys == nil {
		x.keys = map[string]*keyIndex{}
	}
	e := x.keys[id]
	if e == nil {
		e = &keyIndex{}
		x.keys[id] = e
	}
	return e
}

func (c *Coordinator) hold(s string, d int) {
	x := &c.idx
	n := x.count[s] + d
	if n == 0 {
		delete(x.count, s)
	} else {
		x.count[s] = n
	}
	r, ok := c.rank[s]
	switch {
	case !ok:
	case n == 0:
		x.free[r/64] |= 1 << (r % 64)
		x.nfree++
	case n == d:
		x.free[r/64] &^= 1 << (r % 64)
		x.nfree--
	}
}

// rehold counts the shards in was and not in now as held once less, and
// those in now and not in was once more.
func (c *Coordinator) rehold(was, now map[string]bool) {
	for s := range was {
		if !now[s] {
			c.hold(s, -1)
		}
	}
	for s := range now {
		if !was[s] {
			c.hold(s, 1)
		}
	}
}

// syncHolds brings the index up to date: work for each key whose
// session, leads, page or unacknowledged pages changed since, and for
// each ghost made or gone.
func (c *Coordinator) syncHolds() {
	x := &c.idx
	if !x.built {
		*x = planIndex{home: x.home, built: true, count: map[string]int{}, keys: map[string]*keyIndex{}, ghosts: map[unsafe.Pointer]map[string]bool{},
			free: make([]uint64, (len(c.order)+63)/64), nfree: len(c.order)}
		for r := range c.order {
			x.free[r/64] |= 1 << (r % 64)
		}
	}
	for id, k := range c.keys {
		e := x.entry(id)
		var leads map[string]uint64
		if k.cur != nil {
			leads = k.cur.leads
		}
		var first, last Ver
		if h := k.page.hist; len(h) > 0 {
			first, last = h[0].ver, h[len(h)-1].ver
		}
		if e.holds != nil && e.cur == k.cur && sameMap(e.leads, leads) && sameMap(e.shards, k.page.shards) &&
			e.hist == len(k.page.hist) && e.histFirst == first && e.histLast == last {
			continue
		}
		holds := map[string]bool{}
		if k.cur != nil {
			c.holds(k, holds)
		}
		c.rehold(e.holds, holds)
		e.invalid = 0
		for s := range k.page.shards {
			if !c.shards[s] {
				e.invalid++
			}
		}
		e.cur, e.leads, e.shards, e.hist, e.histFirst, e.histLast, e.holds = k.cur, leads, k.page.shards, len(k.page.hist), first, last, holds
	}
	for id, e := range x.keys {
		if c.keys[id] == nil {
			c.rehold(e.holds, nil)
			delete(x.keys, id)
		}
	}
	seen := map[unsafe.Pointer]bool{}
	for _, g := range c.ghosts {
		id := reflect.ValueOf(g.holds).UnsafePointer()
		seen[id] = true
		if _, ok := x.ghosts[id]; !ok {
			x.ghosts[id] = g.holds
			c.rehold(nil, g.holds)
		}
	}
	for id, h := range x.ghosts {
		if !seen[id] {
			c.rehold(h, nil)
			delete(x.ghosts, id)
		}
	}
}
