package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestGhostWhoseListedRenewalIsWrittenOverByAnUnseenSessionIsNotLedTwice:
// the mend of 4.3's last rule ignores, as "a live session of another
// writer", a session the era saw end. An operator's restore of the
// opening write of a session the era never read (an earlier process of
// the same worker ID, ended before the era began) is neither: the read
// shows a live session the era has not seen end, so the ghost's wait is
// not moved; the key then has a live session in the era's view, so no
// `all` ghost is made; and the restored write took no page and leads
// nothing, so it holds nothing either. The ghost's shards are granted
// while its listed renewal still gives it a lease. No twin is needed:
// only kills, a coordinator's resignation and an operator's put-backs.
//
// Schedule (3 workers, 8 shards, FrequentInterval 1 s, LeaderTimeout 3 s,
// no random fault; an exact-bytes put-back keeps its ETag, as on S3):
//  1. every worker but the coordinator is killed and started again with
//     its ID (their first sessions' opening writes stay in the keys'
//     histories); once the pool is balanced again (the pages name the
//     new sessions), the coordinator resigns, and a new era, which never
//     read those first sessions, balances the pool;
//  2. victim V (not the coordinator, leading the most shards) is paused
//     after a write the era read; the operator deletes its key; the
//     era's read of the absence makes V's session S a ghost (wait 3 s);
//  3. S's last write is put back; V resumes 60 ms before its lease ends
//     and renews; the write lands and V is cut off the store;
//  4. once a listing has landed showing that renewal, the coordinator is
//     paused while the operator restores the opening write of V's first
//     session O; the coordinator resumes and reads O: the ghost's wait
//     stands, O (live, after the gate, holding nothing) takes its
//     target of V's shards home to V's key, and the rest go to the
//     others while V still leads them. With 8 shards V leads 3, O's
//     target is 2: one shard has two live owners.
func TestGhostWhoseListedRenewalIsWrittenOverByAnUnseenSessionIsNotLedTwice(t *testing.T) {
	var ta tally
	for seed := uint64(1); seed <= 12; seed++ {
		s := calmSim(t, seed, 3, 8)
		tm := attackTiming
		// 1. Every worker but the coordinator's opens a second session;
		// the coordinator resigns and a new era starts.
		first := map[string][]byte{}
		for _, p := range s.procs {
			if p != s.holder {
				first[p.id] = s.store["workers/"+p.id].hist[0]
				s.kill(p)
				s.start(p)
			}
		}
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced after the restarts", seed)
		}
		s.step(s.now + 2*tm.lt)
		if s.holder != nil {
			s.log("attack: %s resigns its election", s.resign().id)
		}
		if _, ok := s.waitFor(10*tm.lt, s.balanced); !ok {
			t.Fatalf("seed %d: not balanced after the restarts and the resignation", seed)
		}
		s.step(s.now + 2*tm.lt)
		h := s.holder
		var v *proc
		for _, p := range s.procs {
			if p != h && first[p.id] != nil && (v == nil || len(p.ls) > len(v.ls)) {
				v = p
			}
		}
		if h == nil || h.c == nil || v == nil {
			t.Logf("seed %d: no coordinator, or no restarted worker beside it", seed)
			continue
		}
		a := &attack{sim: s, t: t, seed: seed, v: v, h: h, c: h.c, key: "workers/" + v.id, o: s.store["workers/"+v.id], k: h.c.keys[v.id]}
		c, o, k := a.c, a.o, a.k
		o1, _ := ParseSession(first[v.id], v.id)
		if k.over(o1.Session) {
			t.Logf("seed %d: the era saw the first session end", seed)
			continue
		}
		// 2. V paused after a write the era read; its key deleted: a
		// ghost.
		a.keepOnceRead()
		a.deleteKey(a.key)
		a.log("attack: %s paused, %s deleted (was %s)", v.id, a.key, a.etag)
		if !a.stepUntil(a.lease, func() bool { return a.ghost(true) != nil }) || a.now > a.lease-400*time.Millisecond {
			t.Logf("seed %d: no ghost early enough in V's lease", seed)
			continue
		}
		ghostUntil := h.realAt(a.ghost(true).until)
		// 3. Its last write put back; V renews on it, then is cut off.
		a.restore(o, a.data, a.etag)
		a.log("attack: %s put back to %s (ghost waits till %.3fs)", a.key, a.etag, ghostUntil.Seconds())
		renewal := a.renewOnPutBack(a.lease - 60*time.Millisecond)
		if renewal == "" {
			t.Fatalf("seed %d: %s did not renew on its key put back", seed, v.id)
		}
		// 4. Once a listing showing the renewal has landed, the
		// coordinator paused, the first session's opening write is
		// restored (an ETag of its own: not the same bytes as before).
		a.stepUntil(ghostUntil, func() bool { return a.listLanded(c) || k.readTag == renewal || a.ghost(true) == nil })
		if !a.listLanded(c) || k.readTag == renewal {
			t.Logf("seed %d: the renewal was read, or not listed, before the ghost's wait ended", seed)
			continue
		}
		a.hold(h)
		s.etags++
		a.restore(o, first[v.id], fmt.Sprintf("e%d", s.etags))
		a.log("attack: a listing showed the renewal; %s paused; %s restored to %s's opening write (%s)", h.id, a.key, o1.Session, o.etag)
		a.step(a.now + 5*time.Millisecond)
		a.release(h)
		first0, last := a.overlap(v, 3*tm.lt, func() {})
		if h.c != c {
			t.Logf("seed %d: the coordinator lost its election", seed)
			continue
		}
		ta.reached++
		ta.judge(t, s, seed, v, first0, last, fmt.Sprintf("ghost's wait till %.3fs, its renewal listed, then an unseen session's opening write restored", ghostUntil.Seconds()))
	}
	ta.end(t, "the restore")
}
