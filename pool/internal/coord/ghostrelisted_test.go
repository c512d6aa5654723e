package coord

import (
	"errors"
	"testing"
	"time"
)

// TestGhostWhoseListedRenewalIsListedOverBeforeAReadIsNotLedTwice: 4.3's
// last rule extends a ghost's wait to L from a listing that showed a
// write no read returned. The coordinator keeps one such ETag per key
// (key.listed), and the next listing that shows the key at another ETag
// replaces it: when the read that the first listing asked for fails (a
// timeout) and the key is put back to an earlier write of the ghost's
// session before the next listing, that listing's ETag is the one the
// next read returns, the renewal the first listing showed is forgotten,
// and the ghost ends L after the read that made it while that renewal
// still gives the session a lease. Section 7's fourth exception does not
// cover it: a listing showed the write the session made there.
//
// Schedule (script harness: FrequentInterval 1 s, LeaderTimeout 3 s, 6
// shards, w0 to w2, era 1 from 0 s; an exact-bytes put-back keeps its
// ETag, as on S3):
//  1. once era 1 has read w1's latest write (seq n), w1 is paused and
//     workers/w1 deleted; the read of the absence makes w1's session a
//     ghost (wait 3 s from that read);
//  2. the operator puts seq n back (its ETag); w1 resumes 60 ms before
//     its lease ends and renews (seq n+1 lands); w1 is cut off the store
//     (its later writes time out, its lease runs on);
//  3. era 1's next listing shows seq n+1; the read it sends times out
//     (every read of workers/w1 sent in the next 0.5 s does);
//  4. the operator puts workers/w1 back to seq n-1 (its ETag) before the
//     next listing, which shows it; the next read returns it: no write of
//     the session above seq n, and no listed ETag left unread.
func TestGhostWhoseListedRenewalIsListedOverBeforeAReadIsNotLedTwice(t *testing.T) {
	const fi, lt = time.Second, 3 * time.Second
	h := threeWorkers(t, fi, lt)
	h.elect(1)
	h.runUntilLed(t, 15*time.Second)
	c, v, key := h.c, h.ws["w1"], "workers/w1"
	writes := map[uint64]r6obj{} // v's writes by seq, as they land
	step := func() {
		h.run(h.now + time.Millisecond)
		if o := h.store[key]; o != nil && o.data != nil {
			if s, err := ParseSession(o.data, "w1"); err == nil && s.Session == v.w.sess {
				writes[s.Seq] = *o
			}
		}
	}
	pause := func() { v.tok++ }                        // its timer dropped: no tick until resumed
	resume := func() { h.wdo(v, v.w.Tick(h.local())) } // as a paused process's overdue timer
	for h.now < 18*time.Second {
		step()
	}
	// 1.
	k := c.keys["w1"]
	for !(k.cur != nil && k.cur.session == v.w.sess && k.cur.seq == v.w.seq && k.cur.seq > 2 && k.readTag == h.store[key].etag && v.w.inflight == nil) {
		step()
	}
	pause()
	n := v.w.seq
	leaseEnd := v.w.deadline.Sub(t0)
	last, before := writes[n], writes[n-1]
	if before.data == nil {
		t.Fatalf("seq %d of w1 was not seen landing", n-1)
	}
	delete(h.store, key)
	ghostOf := func() *ghost {
		for i := range c.ghosts {
			if g := &c.ghosts[i]; g.id == "w1" && !g.done {
				return g
			}
		}
		return nil
	}
	for ghostOf() == nil && h.now < leaseEnd {
		step()
	}
	g := ghostOf()
	if g == nil || h.now > leaseEnd-400*time.Millisecond {
		t.Fatalf("no ghost early enough in w1's lease (now %v, lease to %v): the schedule does not hold", h.now, leaseEnd)
	}
	until := g.until.Sub(t0)
	ghostAt := h.now
	// 2.
	h.store[key] = &r6obj{data: last.data, etag: last.etag}
	for h.now < leaseEnd-60*time.Millisecond {
		step()
	}
	resume()
	for v.w.seq == n && h.now < leaseEnd {
		step()
	}
	if v.w.seq != n+1 {
		t.Fatalf("w1 did not renew on its key put back (seq %d)", v.w.seq)
	}
	h.sessionPut = func(id string) error {
		if id == "w1" {
			return errors.New("timeout")
		}
		return nil
	}
	renewal := sameForm(h.store[key].etag)
	renewedAt := h.now
	// 3.
	failUntil := time.Duration(0)
	h.sessionGet = func(id string) error {
		if id == "w1" && h.now < failUntil {
			return errors.New("timeout")
		}
		return nil
	}
	for k.listed != renewal && k.readTag != renewal && h.now < until {
		step()
	}
	if k.listed != renewal || k.readTag == renewal {
		t.Fatalf("the renewal was read, or not listed, before the ghost's wait ended: the schedule does not hold")
	}
	failUntil = h.now + 500*time.Millisecond
	listedAt := h.now
	// 4.
	h.store[key] = &r6obj{data: before.data, etag: before.etag}
	for h.now < 3*lt+renewedAt {
		step()
	}
	t.Logf("ghost made %v (wait till %v), seq %d put back, renewal seq %d landed %v (w1's lease to %v), listed %v, seq %d put back then",
		ghostAt, until, n, n+1, renewedAt, v.w.deadline.Sub(t0), listedAt, n-1)
	if len(h.fails) > 0 {
		t.Errorf("%d checks found two live owners, first %s, last %s", len(h.fails), h.fails[0], h.fails[len(h.fails)-1])
	}
}
