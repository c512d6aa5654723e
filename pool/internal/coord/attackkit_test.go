package coord

// The steps the scripted attacks share (ghost*_test.go, hidden*_test.go,
// hostile*_test.go): an operator's deletes and put-backs, a twin of a
// worker's ID, a coordinator that resigns, calls held in flight, and the
// verdict over a test's seeds.

import (
	"container/heap"
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepUntil runs the simulation a millisecond at a time until done holds
// or the simulated clock reaches limit, and reports done.
func (s *sim) stepUntil(limit time.Duration, done func() bool) bool {
	for !done() && s.now < limit {
		s.step(s.now + time.Millisecond)
	}
	return done()
}

// deleteKey is the operator deleting key: it then holds nothing, under an
// ETag no write had (a delete marker's).
func (s *sim) deleteKey(key string) {
	if o := s.store[key]; o != nil && o.data != nil {
		s.etags++
		o.data, o.etag = nil, fmt.Sprintf("e%d", s.etags)
		o.hist = append(o.hist, nil)
	}
}

// restore is the operator putting o back to data at etag: on S3 the same
// bytes have the same ETag, so a write If-Match etag succeeds again.
func (s *sim) restore(o *obj, data []byte, etag string) {
	o.data, o.etag = data, etag
	o.hist = append(o.hist, data)
}

// resign makes the coordinator's process give up its election (its next
// run waits a lease), and returns that process.
func (s *sim) resign() *proc {
	h := s.holder
	s.holder, h.c, h.noRunTill = nil, nil, s.now+h.tm.lt
	return h
}

// startTwin starts a second process with v's worker ID, its clock a
// minute off v's.
func (s *sim) startTwin(v *proc) *proc {
	tw := &proc{id: v.id, n: len(s.procs), rate: 1, off: v.off + time.Minute, tm: v.tm, calls: map[string]int{}, twin: true}
	s.procs = append(s.procs, tw)
	s.start(tw)
	return tw
}

// inFlight returns the queued event named what whose process is p (nil:
// a call's landing at the store), or nil.
func (s *sim) inFlight(what string, p *proc) *event {
	var found *event
	for _, e := range s.q {
		if e.what == what && e.p == p {
			found = e
		}
	}
	return found
}

// delay moves e to happen d from now.
func (s *sim) delay(e *event, d time.Duration) {
	e.at = s.now + d
	heap.Init(&s.q)
}

// listLanded reports whether c's listing has landed at the store and its
// reply is on the way.
func (s *sim) listLanded(c *Coordinator) bool {
	return c.listing && s.inFlight("list lands", nil) == nil
}

// listHolder keeps the coordinator's listings that land from now on in
// flight until free.
type listHolder struct {
	s    *sim
	held []*event
}

// hold holds every listing about to land.
func (lh *listHolder) hold() {
	for _, e := range lh.s.q {
		if e.what == "list lands" && e.at < lh.s.now+time.Minute {
			e.at = lh.s.now + time.Hour
			lh.held = append(lh.held, e)
			heap.Init(&lh.s.q)
		}
	}
}

// free lets the held listings land 2 ms from now.
func (lh *listHolder) free() {
	for _, e := range lh.held {
		e.at = lh.s.now + 2*time.Millisecond
	}
	heap.Init(&lh.s.q)
}

// attack is one seed's scripted attack on a victim v's session key, with
// the coordinator's process h and its era c.
type attack struct {
	*sim
	t     *testing.T
	seed  uint64
	v, h  *proc
	c     *Coordinator
	key   string
	o     *obj
	k     *key
	data  []byte        // v's write the attack kept, for a put-back
	etag  string        // its ETag
	sess  string        // v's session when kept
	lease time.Duration // when v's lease ended when kept
}

// newAttack is a calm pool of n workers over m shards (calmSim) and a
// victim that leads a shard and does not coordinate.
func newAttack(t *testing.T, seed uint64, n, m int) *attack {
	t.Helper()
	s := calmSim(t, seed, n, m)
	v := s.victim()
	if v == nil {
		t.Fatalf("seed %d: no victim", seed)
	}
	a := &attack{sim: s, t: t, seed: seed, v: v, h: s.holder, key: "workers/" + v.id, o: s.store["workers/"+v.id]}
	a.c = a.h.c
	a.k = a.c.keys[v.id]
	return a
}

// keep pauses v and keeps its write on the key, its session and the end
// of its lease.
func (a *attack) keep() {
	a.hold(a.v)
	a.data, a.etag, a.sess, a.lease = a.o.data, a.o.etag, a.v.w.sess, a.leaseEnd(a.v)
}

// keepOnceRead runs until the era has read v's latest write, with nothing
// of v's in flight, and then keeps it.
func (a *attack) keepOnceRead() {
	k, o, v := a.k, a.o, a.v
	a.stepUntil(a.now+time.Hour, func() bool {
		return k.cur != nil && k.cur.session == v.w.sess && k.cur.seq == v.w.seq && k.readTag == o.etag && o.etag == v.w.etag && v.w.inflight == nil
	})
	a.keep()
}

// keepBeforeListing runs (for at most 90 s of the simulation) until a
// write of v's lands 200 to 300 ms before the era's next listing, and
// then keeps it; false if none did.
func (a *attack) keepBeforeListing() bool {
	o, v, c := a.o, a.v, a.c
	prev := o.etag
	for a.now < 90*time.Second {
		a.step(a.now + time.Millisecond)
		if o.etag == prev || o.etag != v.w.etag || v.w.inflight != nil {
			continue
		}
		prev = o.etag
		if d := a.h.realAt(c.nextLst) - a.now; !c.listing && d >= 200*time.Millisecond && d <= 300*time.Millisecond {
			break
		}
	}
	if o.etag != v.w.etag || v.w.inflight != nil {
		return false
	}
	a.keep()
	return true
}

// twinOver starts a twin of v and runs until it has written over the
// kept write (or v's lease ended), then pauses the twin.
func (a *attack) twinOver() *proc {
	tw := a.startTwin(a.v)
	a.stepUntil(a.lease, func() bool { return a.o.etag != a.etag })
	a.hold(tw)
	return tw
}

// ghost returns the era's ghost of v's kept session, or of any session
// of v's when any, that still holds shards.
func (a *attack) ghost(any bool) *ghost {
	for i := range a.c.ghosts {
		if g := &a.c.ghosts[i]; g.id == a.v.id && (any || g.session == a.sess) && !g.done {
			return g
		}
	}
	return nil
}

// renewOnPutBack lets v go on at the simulated instant at and runs until
// its renewal over the kept write lands (or its lease ends); then v is
// cut off the store, its lease running on. It returns the renewal's ETag,
// in the form a read returns, or "" when v did not renew.
func (a *attack) renewOnPutBack(at time.Duration) string {
	if at > a.now {
		a.step(at)
	}
	a.release(a.v)
	if !a.stepUntil(a.leaseEnd(a.v), func() bool { return a.o.etag != a.etag }) {
		return ""
	}
	a.v.cutTill = a.now + time.Hour
	a.log("attack: %s renewed (%s) on %s put back; cut off the store", a.v.id, a.o.etag, a.key)
	return sameForm(a.o.etag)
}

// tally counts the seeds of one test that reached its attack's last step,
// and those among them that led a shard twice.
type tally struct{ reached, overlapped int }

// judge runs s for three leases and fails t if v's shards had two live
// owners in that time; why says what the attack did.
func (ta *tally) judge(t *testing.T, s *sim, seed uint64, v *proc, first, last time.Duration, why string) {
	t.Helper()
	if first <= 0 && len(s.fails) == 0 {
		return
	}
	if ta.overlapped == 0 {
		t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 60))
	}
	ta.overlapped++
	t.Errorf("seed %d: two live owners of %s's shards from %.3fs to %.3fs (%s); the simulation's own check: %v",
		seed, v.id, first.Seconds(), last.Seconds(), why, s.fails)
}

// end fails t when no seed reached the attack's last step, and logs the
// counts.
func (ta *tally) end(t *testing.T, what string) {
	t.Helper()
	if ta.reached == 0 {
		t.Fatalf("no seed reached %s: the schedule does not test the rule", what)
	}
	t.Logf("%d seeds reached %s; %d led a shard twice", ta.reached, what, ta.overlapped)
}

// bounded is judge for an attack inside one of section 7's exceptions:
// two owners are allowed, but not past limit.
func (ta *tally) bounded(t *testing.T, s *sim, seed uint64, v *proc, first, last, limit time.Duration, why string) {
	t.Helper()
	if first > 0 {
		ta.overlapped++
	}
	if last > limit {
		t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 60))
		t.Errorf("seed %d: two live owners of %s's shards until %.3fs, past %.3fs (%s)", seed, v.id, last.Seconds(), limit.Seconds(), why)
	}
}

// slowCalls returns a step hook that holds each reply to the
// coordinator's calls (what: "reads" its session reads, "lists" its
// listings, "both") took longer after it lands, once each.
func (s *sim) slowCalls(what string, took time.Duration) func() {
	seen := map[*event]bool{}
	return func() {
		h := s.holder
		if h == nil {
			return
		}
		for _, e := range s.q {
			if e.p == h && !seen[e] && (what != "lists" && strings.HasPrefix(e.what, "get workers/") && strings.HasSuffix(e.what, " reply") || what != "reads" && e.what == "list reply") {
				seen[e] = true
				s.delay(e, took)
			}
		}
	}
}
