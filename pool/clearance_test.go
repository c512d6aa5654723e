package pool

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestClaimReadsAFreshMemberList: a shard record deleted under its owner
// w2, a worker that joined after the claimer's tick read the member list
// (so the claimer has never read w2's session), is not created while w2's
// session lists the shard; and once w2's session is over, it is created
// with a term above the one w2 listed, not at 1. Before, creation
// checked the member list as last read (mutation stalemembers).
func TestClaimReadsAFreshMemberList(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		p, mem, sess, stop := claimer(t, "w3", []string{"w1", "w3"}, "s")
		defer stop()
		set := func(key string, v any) { mem.Set("p/"+key, encode(v)) }
		set("members.json", membersRecord{Pool: formatVersion, Workers: []string{"w1", "w2", "w3"}, Sessions: map[string]string{"w3": sess}})
		set("sessions/w1.json", sessionRecord{Pool: formatVersion, Worker: "w1", Session: "S1", TTL: ttlMillis(testLT)})
		set("sessions/w2.json", sessionRecord{Pool: formatVersion, Worker: "w2", Session: "S2", Seq: 3, TTL: ttlMillis(testLT),
			Shards: map[string]uint64{"s": 4}})
		// The record of s is absent: deleted under w2.
		if won := p.st.claim(t.Context(), []string{"s"}, 1, sess); won != 0 {
			t.Fatalf("claim won %d shards while w2's fresh session lists s; want 0", won)
		}
		time.Sleep(testLT + testFI) // w2 has renewed nothing since: its session is over
		if won := claimTwice(t, p, sess); won != 1 {
			t.Fatalf("claim won %d shards once w2's session was over; want 1", won)
		}
		if ld := p.st.mine["s"]; ld == nil || ld.term != 5 {
			t.Errorf("the new leadership of s = %+v; want term 5, above the 4 w2's session listed", ld)
		}
	})
}

// TestClaimListsItsIntentAndHonoursOthers: a claim is written only after
// the claimer's session object lists it (Claiming), and a worker whose
// session lists a claim of the same shard holds the claimer off while it
// lives. Without the intent, a shard record deleted after a claim landed
// and before the claimer's renewal listed the shard, or a create that
// lands late, after another's claim and a deletion, gave two owners
// (mutation nointent).
func TestClaimListsItsIntentAndHonoursOthers(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		p, mem, sess, stop := claimer(t, "w3", []string{"w2", "w3"}, "s")
		defer stop()
		set := func(key string, v any) { mem.Set("p/"+key, encode(v)) }
		set("members.json", membersRecord{Pool: formatVersion, Workers: []string{"w2", "w3"}, Sessions: map[string]string{"w3": sess}})
		renew := func(seq uint64) {
			set("sessions/w2.json", sessionRecord{Pool: formatVersion, Worker: "w2", Session: "S2", Seq: seq, TTL: ttlMillis(testLT),
				Claiming: map[string]uint64{"s": 1}})
		}
		renew(1)
		for seq := range uint64(5) {
			if seq > 0 {
				time.Sleep(testFI)
				renew(seq + 1)
			}
			if won := p.st.claim(t.Context(), []string{"s"}, 1, sess); won != 0 {
				t.Fatalf("claim won %d shards while w2's live session lists a claim of s; want 0", won)
			}
		}
		time.Sleep(testLT + testFI) // w2 stopped renewing
		if won := claimTwice(t, p, sess); won != 1 {
			t.Fatalf("claim won %d shards once w2's session was over; want 1", won)
		}
		spy := p.cfg.Store.(*spyStore)
		if len(spy.unlisted) > 0 {
			t.Errorf("claims of %v were sent before the session listed them", spy.unlisted)
		}
	})
}

// claimTwice claims shard s, and once more if the first look won nothing:
// a look that finds a session listing the shard at the term it would
// write learns that term and leaves the claim to the next look.
func claimTwice(t *testing.T, p *Pool, sess string) int {
	if won := p.st.claim(t.Context(), []string{"s"}, 1, sess); won > 0 {
		return won
	}
	return p.st.claim(t.Context(), []string{"s"}, 1, sess)
}
