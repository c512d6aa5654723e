package coord

// The kit's steps for the attacks on an era's start (hidden*_test.go,
// ghostgate_test.go), on a ghost beside a twin (ghostonce_test.go,
// ghostlaterwrite_test.go, ghoststaleread_test.go) and for the scripts
// of three workers; the rest is attackkit_test.go.

import (
	"fmt"
	"testing"
	"time"
)

// hiddenTiming is the timing of the attacks on an era's start: a
// FrequentInterval long enough for the era to read its first listing's
// keys within a victim's lease.
var hiddenTiming = timing{fi: 1500 * time.Millisecond, lt: 4 * time.Second}

// hiddenSim is a calm pool of three workers over six shards at
// hiddenTiming, balanced.
func hiddenSim(t *testing.T, seed uint64) *sim {
	t.Helper()
	tm := hiddenTiming
	s := newSim(seed, simConfig{workers: 3, shards: 6, timing: &tm, maxWorkers: 3, calmFor: time.Minute})
	s.calm, s.keep = true, true
	if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
		t.Fatalf("seed %d: not balanced after a cold start", seed)
	}
	return s
}

// hidden is an attack on an era's start: the victim's session hidden
// from it, then put back and renewed before the era's gate.
type hidden struct {
	*attack
	cp      *proc // the new era's process
	renewal string
	renewed time.Duration // when the renewal landed
	leaseTo time.Duration // the lease it gives
}

// nextEra resigns the coordinator and runs (v paused since keep) until
// the next era has read every key of its first listing, 150 ms before
// v's lease ends at the latest; it returns that era, or nil (v released).
func (a *attack) nextEra(what string) *Coordinator {
	old := a.resign()
	a.log("attack: %s paused; %s; coordinator %s resigns", a.v.id, what, old.id)
	var c *Coordinator
	for a.now < a.leaseEnd(a.v)-150*time.Millisecond {
		a.step(a.now + time.Millisecond)
		if a.holder != nil && a.holder.c != nil && !a.holder.c.allRead.IsZero() {
			c = a.holder.c
			break
		}
	}
	if c == nil {
		a.release(a.v)
	}
	return c
}

// hideAndRenew is the hidden attacks' common start on a pool at
// hiddenTiming: right after v's write lands, v is paused, hide runs (the
// operator's act) and the coordinator resigns; once the next era has
// read its first listing's keys, 100 ms before v's lease ends, the kept
// write is put back and v renews on it (then is cut off the store); it
// runs until a listing of the era shows the renewal before any read
// returns it. It reports false, having said why, when the seed does not
// get that far.
func hideAndRenew(t *testing.T, s *sim, seed uint64, v *proc, what string, hide func(*attack), skipped bool) (*hidden, bool) {
	t.Helper()
	a := &attack{sim: s, t: t, seed: seed, v: v, key: "workers/" + v.id, o: s.store["workers/"+v.id]}
	a.data, a.etag = s.holdAfterWrite(v, a.o)
	hide(a)
	c := a.nextEra(what)
	if c == nil || skipped && (c.keys[v.id] == nil || !c.keys[v.id].skipped) {
		t.Logf("seed %d: V's lease ran out before the next era read its first listing's keys, or the era did not skip V's key", seed)
		if c != nil {
			s.release(v)
		}
		return nil, false
	}
	hd := &hidden{attack: a, cp: s.holder}
	a.h, a.c = s.holder, c
	s.step(s.leaseEnd(v) - 100*time.Millisecond)
	s.restore(a.o, a.data, a.etag)
	s.release(v)
	if !s.stepUntil(s.leaseEnd(v), func() bool { return a.o.etag != a.etag }) || c.gated {
		t.Logf("seed %d: V did not renew before the era's gate", seed)
		return nil, false
	}
	v.cutTill = s.now + time.Hour
	hd.renewal, hd.renewed = sameForm(a.o.etag), s.now
	s.step(s.now + 100*time.Millisecond) // its reply
	hd.leaseTo = s.leaseEnd(v)
	s.log("attack: %s put back; %s renewed (%s), cut off the store", a.key, v.id, a.o.etag)
	listed := func() bool {
		k := c.keys[v.id]
		return k != nil && (k.listed == hd.renewal || k.readTag == hd.renewal)
	}
	s.stepUntil(hd.leaseTo, func() bool { return listed() || s.holder != hd.cp || c.gated })
	if !listed() || c.keys[v.id].readTag == hd.renewal {
		t.Logf("seed %d: no listing showed V's renewal before a read or the gate", seed)
		return nil, false
	}
	a.k = c.keys[v.id]
	return hd, true
}

// judge is tally.judge for a hidden attack, naming the renewal, its lease
// and the era's gate.
func (hd *hidden) judge(ta *tally, first, last time.Duration) {
	hd.t.Helper()
	ta.judge(hd.t, hd.sim, hd.seed, hd.v, first, last, fmt.Sprintf("renewal landed %.3fs, lease to %.3fs; the era's gate at %.3fs",
		hd.renewed.Seconds(), hd.leaseTo.Seconds(), hd.cp.realAt(hd.c.allRead.Add(hd.c.lmax)).Seconds()))
}

// threeWorkers is a script of three workers, w0 to w2, over six shards,
// each draining in 100 ms; no coordinator is elected yet.
func threeWorkers(t *testing.T, fi, lt time.Duration) *script {
	t.Helper()
	h := newScript(t, fi, lt, []string{"s0", "s1", "s2", "s3", "s4", "s5"})
	drain := func(string, error) time.Duration { return 100 * time.Millisecond }
	for i := range 3 {
		h.addWorker(fmt.Sprintf("w%d", i), drain)
	}
	return h
}

// runUntilLed runs h until the instant until and fails t unless all six
// shards are then led.
func (h *script) runUntilLed(t *testing.T, until time.Duration) {
	t.Helper()
	h.run(until)
	if n := len(h.led()); n != 6 {
		t.Fatalf("%v: %d shards led; want 6 (the schedule does not hold)", until, n)
	}
}

// twinGhost is the start of the attacks on a ghost beside a twin: v is
// paused right after a write lands 200-300 ms before the era's next
// listing, a twin of its ID opens a session over that write (and is
// paused), and the run goes on until the era has made v's session a
// ghost or v's lease has ended. It returns the twin, or nil when v's
// writes never fell just before a listing.
func (a *attack) twinGhost() *proc {
	if !a.keepBeforeListing() {
		return nil
	}
	a.log("attack: %s paused after %s (lease till %.3fs); a twin of its ID starts", a.v.id, a.etag, a.lease.Seconds())
	tw := a.twinOver()
	a.stepUntil(a.lease, func() bool { return a.ghost(false) != nil })
	return tw
}

// renewThenTwinOver is the end of the attacks on a slow read of a
// ghost's listed renewal e1 (ghostlaterwrite_test.go,
// ghoststaleread_test.go): with the read held in flight since listedAt
// (and the era's listings too, when holdLists), v renews on until about
// maxHold after listedAt, is cut off the store, and its twin's process
// restarts and writes over v's last renewal; then the read and the
// listings land. It returns when v's last renewal had landed by, or why
// the seed stopped short.
func (a *attack) renewThenTwinOver(tw *proc, read *event, e1 string, listedAt, maxHold time.Duration, holdLists bool) (renewedBy time.Duration, short string) {
	lh := listHolder{s: a.sim}
	step := func() {
		a.step(a.now + time.Millisecond)
		if holdLists {
			lh.hold()
		}
	}
	for a.now < listedAt+maxHold-250*time.Millisecond {
		step()
	}
	a.stepUntil(listedAt+maxHold, func() bool { return a.v.w.inflight == nil })
	if sameForm(a.o.etag) == e1 || a.o.etag != a.v.w.etag {
		return 0, "V did not renew again in time"
	}
	renewedBy = a.now
	a.v.cutTill = a.now + time.Hour
	a.kill(tw)
	a.release(tw)
	a.start(tw)
	e2 := a.o.etag
	for a.o.etag == e2 && a.now < listedAt+maxHold {
		step()
	}
	if a.o.etag == e2 {
		return 0, "the twin did not write over V's renewal in time"
	}
	read.at = a.now + time.Millisecond
	lh.free()
	return renewedBy, ""
}

// closedWrite is v's closed session write, as the roster named it.
type closedWrite struct {
	s            *sim
	key          string
	data, roster []byte
	tag, rtag    string
}

// putBackKey puts v's key back to the closed write.
func (cw closedWrite) putBackKey() { cw.s.restore(cw.s.store[cw.key], cw.data, cw.tag) }

// putBack puts v's key and the roster back to when the roster named the
// closed write.
func (cw closedWrite) putBack(*attack) {
	cw.putBackKey()
	cw.s.restore(cw.s.store["departed"], cw.roster, cw.rtag)
}

// leaveAndReturn has v leave (its closed write goes to the roster) and
// start again with its ID; it runs until the pool is balanced again with
// v off the roster, and two leases more. It reports false, having said
// why, when v then leads nothing or coordinates.
func (s *sim) leaveAndReturn(t *testing.T, seed uint64, v *proc) (closedWrite, bool) {
	t.Helper()
	tm := v.tm
	cw := closedWrite{s: s, key: "workers/" + v.id}
	s.log("attack: %s leaves", v.id)
	s.wdo(v, v.w.Leave(v.local(s.now)))
	if _, ok := s.waitFor(5*tm.lt, func() bool {
		r := s.store["departed"]
		if r == nil || r.data == nil || !v.closed {
			return false
		}
		ro, err := ParseRoster(r.data)
		if err != nil || ro.Closed[v.id] != s.store[cw.key].etag {
			return false
		}
		cw.data, cw.tag, cw.roster, cw.rtag = s.store[cw.key].data, s.store[cw.key].etag, r.data, r.etag
		return true
	}); !ok {
		t.Fatalf("seed %d: %s's closed session did not reach the roster", seed, v.id)
	}
	s.log("attack: %s starts again with its ID", v.id)
	s.start(v)
	if _, ok := s.waitFor(10*tm.lt, func() bool {
		ro, err := ParseRoster(s.store["departed"].data)
		return err == nil && ro.Closed[v.id] == "" && s.balanced()
	}); !ok {
		t.Fatalf("seed %d: not balanced again, or %s still on the roster", seed, v.id)
	}
	s.step(s.now + 2*tm.lt)
	if len(v.ls) == 0 || v == s.holder {
		t.Logf("seed %d: %s leads nothing or coordinates", seed, v.id)
		return cw, false
	}
	return cw, true
}

// probeFor probes s for d (probe) and fails t, with the ledger's tail, if
// any shard had two live leaderships meanwhile.
func (s *sim) probeFor(t *testing.T, seed uint64, d time.Duration) {
	t.Helper()
	n, first := s.probe(d)
	if n > 0 || len(s.fails) > 0 {
		t.Logf("seed %d: ledger tail:\n%s", seed, tail(s.ledger.String(), 80))
		t.Fatalf("seed %d: %d shard-instants (10 ms apart) with two live leaderships, first %s; the simulation's own check: %v", seed, n, first, s.fails)
	}
}

// hiddenByDeletion is hideAndRenew on a fresh pool at hiddenTiming, two
// leases after its balance, where the operator deletes the victim's
// session object and its page.
func hiddenByDeletion(t *testing.T, seed uint64) (*hidden, bool) {
	t.Helper()
	s := hiddenSim(t, seed)
	s.step(s.now + 2*hiddenTiming.lt)
	v := s.victim()
	return hideAndRenew(t, s, seed, v, "workers/"+v.id+" and assign/"+v.id+" deleted", func(a *attack) {
		a.deleteKey(a.key)
		a.deleteKey("assign/" + v.id)
	}, false)
}

// heldRead returns the read of hd's key in flight at the store, held
// there until delay moves it, or nil (having said so) when none is.
func (hd *hidden) heldRead() *event {
	read := hd.inFlight("get "+hd.key+" lands", nil)
	if read == nil {
		hd.t.Logf("seed %d: no read of the listed renewal in flight", hd.seed)
		return nil
	}
	hd.delay(read, time.Hour)
	return read
}

// raced is a hidden session's put-back renewal written over by its twin's
// new session while a listing that showed the renewal is out.
type raced struct {
	*attack
	cp   *proc  // the era's process
	tw   *proc  // the twin
	list *event // the held listing's reply
	e1   string // the renewal
}

// hiddenTwinRace runs steps 1 to 4 of hiddenraced_test.go's schedule on a
// pool at hiddenTiming: V paused after a write (session H); a twin opens
// A over it; V's page deleted, the coordinator resigns; the next era has
// A in view; 100 ms before H's lease ends, the twin paused, H's last
// write put back, V renews (E1) and is cut off; a listing lands on E1,
// its reply held; the twin restarts and opens A2 over E1; a read shows
// A2 while the listing is out. It reports false, having said why (the
// listing then let go), when the seed does not get there.
func hiddenTwinRace(t *testing.T, seed uint64) (*raced, bool) {
	t.Helper()
	tm := hiddenTiming
	s := hiddenSim(t, seed)
	s.step(s.now + 2*tm.lt)
	v := s.victim()
	a := &attack{sim: s, t: t, seed: seed, v: v, key: "workers/" + v.id, o: s.store["workers/"+v.id]}
	o := a.o
	r := &raced{attack: a}
	// 1.
	a.data, a.etag = s.holdAfterWrite(v, o)
	r.tw = s.startTwin(v)
	if !s.stepUntil(s.leaseEnd(v)-time.Second, func() bool { return o.etag != a.etag }) {
		t.Logf("seed %d: the twin did not open its session in time", seed)
		return nil, false
	}
	s.deleteKey("assign/" + v.id)
	c := a.nextEra("a twin's session over " + a.key + "; assign/" + v.id + " deleted")
	if c == nil {
		t.Logf("seed %d: V's lease ran out before the next era read its first listing's keys", seed)
		return nil, false
	}
	a.c, a.h, r.cp = c, s.holder, s.holder
	k := c.keys[v.id]
	a.k = k
	if k == nil || k.cur == nil || k.cur.session != r.tw.w.sess || s.now >= s.leaseEnd(v)-100*time.Millisecond {
		t.Logf("seed %d: the era does not have the twin's session in view in time", seed)
		s.release(v)
		return nil, false
	}
	// 2.
	s.step(s.leaseEnd(v) - 100*time.Millisecond)
	s.hold(r.tw)
	s.restore(o, a.data, a.etag)
	s.release(v)
	if !s.stepUntil(s.leaseEnd(v), func() bool { return o.etag != a.etag }) || c.gated || s.holder != r.cp {
		t.Logf("seed %d: V did not renew before the era's gate", seed)
		return nil, false
	}
	v.cutTill = s.now + time.Hour
	r.e1 = sameForm(o.etag)
	s.log("attack: %s put back; %s renewed (%s), cut off the store", a.key, v.id, o.etag)
	// 3.
	s.stepUntil(s.now+2*tm.fi, func() bool {
		r.list = s.inFlight("list reply", r.cp)
		return r.list != nil || sameForm(o.etag) != r.e1
	})
	if r.list == nil || sameForm(o.etag) != r.e1 || k.readTag == r.e1 {
		t.Logf("seed %d: no listing landed on V's renewal before a read", seed)
		return nil, false
	}
	s.delay(r.list, time.Hour)
	// 4.
	s.kill(r.tw)
	s.release(r.tw)
	s.start(r.tw)
	if !s.stepUntil(s.now+600*time.Millisecond, func() bool { return sameForm(o.etag) != r.e1 }) {
		t.Logf("seed %d: the twin did not write over V's renewal within 600 ms", seed)
		s.delay(r.list, time.Millisecond)
		return nil, false
	}
	k.wantGet = true // as a read in turn would
	if !s.stepUntil(s.now+time.Second, func() bool { return !k.getting && k.readTag == sameForm(o.etag) }) || k.cur == nil || k.cur.session != r.tw.w.sess {
		t.Logf("seed %d: no read showed the twin's new session while the listing was out", seed)
		s.delay(r.list, time.Millisecond)
		return nil, false
	}
	return r, true
}
