package pool

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// The tick as the core runs it (tick.go): each row feeds next one input,
// answers every call it asks for from a script of the store's replies,
// and checks the calls in order and the other effects. Rows are named
// after the sections of docs/pool-protocol.md, as the core's other rows.

// isCall reports whether e is a call, whose result is the next input.
func isCall(e effect) bool {
	switch e.(type) {
	case getRecords, putRecords, askHub, list, getMembers, putMembers, getSessions, getSession, announce, sleepUntil, bury, putClaims, leadClaims:
		return true
	}
	return false
}

// callName is a call's name as a row writes it: the type and, for the
// calls that name objects, which ("getSessions w2,w3").
func callName(e effect) string {
	name := strings.TrimPrefix(reflect.TypeOf(e).String(), "pool.")
	switch e := e.(type) {
	case getSessions:
		return name + " " + strings.Join(e.workers, ",")
	case getRecords:
		return name + " " + strings.Join(e.shards, ",")
	case announce:
		if e.claiming == nil {
			return name + " none"
		}
		return name + " " + fmt.Sprint(e.claiming)
	case putClaims:
		var s []string
		for _, w := range e.claims {
			s = append(s, fmt.Sprintf("%s@%d", w.shard, w.term))
		}
		return name + " " + strings.Join(s, ",")
	}
	return name
}

// drive feeds in to c at now and answers each call with reply, until an
// input asks for none. It returns the calls' names in order and every
// other effect.
func drive(t *testing.T, c *core, in input, now time.Time, reply func(call effect) input) (calls []string, effs []effect) {
	t.Helper()
	for n := 0; in != nil; n++ {
		if n > 100 {
			t.Fatalf("more than 100 calls: %v", calls)
		}
		out := c.next(in, now)
		in = nil
		for i, e := range out {
			if !isCall(e) {
				effs = append(effs, e)
				continue
			}
			if i != len(out)-1 {
				t.Fatalf("a call (%s) before other effects: %#v", callName(e), out)
			}
			calls = append(calls, callName(e))
			in = reply(e)
		}
	}
	return calls, effs
}

// storeScript answers calls from a pool's objects: sessions by worker,
// the member list, shard records by name; writes land unless failing
// names the call.
type storeScript struct {
	sessions map[string][]byte
	members  []byte
	records  map[string][]byte
	failing  map[string]error // by call name prefix ("list", "announce")
	at       time.Time
}

func (s *storeScript) reply(e effect) input {
	for prefix, err := range s.failing {
		if strings.HasPrefix(callName(e), prefix) {
			switch e.(type) {
			case list:
				return inListing{err: err}
			case announce:
				return inAnnounce{err}
			}
		}
	}
	switch e := e.(type) {
	case list:
		var r inListing
		for w, obj := range s.sessions {
			r.entries = append(r.entries, store.Entry{Key: "p/sessions/" + w + ".json", ETag: etagOf(obj)})
		}
		return r
	case getMembers:
		return inMembers{recordRead{data: s.members, etag: etagOf(s.members)}}
	case putMembers:
		s.members = e.write.data
		return inPut{}
	case getSessions:
		r := inSessions{}
		for _, w := range e.workers {
			obj := s.sessions[w]
			r.reads = append(r.reads, sessRead{recordRead{data: obj, etag: etagOf(obj)}, s.at, s.at})
		}
		return r
	case getRecords:
		r := inRecords{wall: s.at}
		for _, sh := range e.shards {
			obj := s.records[sh]
			r.reads = append(r.reads, recordRead{data: obj, etag: etagOf(obj)})
		}
		return r
	case getSession:
		return inSession{"S1", nil}
	case announce:
		return inAnnounce{}
	case sleepUntil:
		return inSlept{true}
	case bury:
		return inDone{}
	case putClaims:
		r := inClaims{}
		for _, w := range e.claims {
			out := encode(shardRecord{Pool: formatVersion, Shard: w.shard, Owner: "w1", Session: e.id, Term: w.term, TTL: ttlMillis(testLT), LastUpdated: s.at})
			s.records[w.shard] = out
			r.puts = append(r.puts, claimPut{out: out, tag: etagOf(out), sent: true})
		}
		return r
	case leadClaims:
		r := inLed{}
		for _, w := range e.claims {
			r.leads = append(r.leads, &lead{shard: w.shard, term: w.term, session: e.id, etag: w.tag})
		}
		return r
	}
	panic(fmt.Sprintf("storeScript: no reply for %s", callName(e)))
}

func membersOf(ws ...string) []byte {
	m := membersRecord{Pool: formatVersion, Workers: ws, TTL: map[string]int64{}, Sessions: map[string]string{}}
	for _, w := range ws {
		m.TTL[w] = ttlMillis(testLT)
		m.Sessions[w] = "S" + strings.TrimPrefix(w, "w")
	}
	return encode(m)
}

// settledPool has c (w1, listing) hold s0-s2 and w2 hold s3-s5, both
// read and listed, and both on the member list; it returns the script
// of that store.
func settledPool(c *core) *storeScript {
	c.cp.lists = true
	st := &storeScript{sessions: map[string][]byte{}, records: map[string][]byte{}, members: membersOf("w1", "w2")}
	for _, sh := range []string{"s0", "s1", "s2"} {
		c.mine[sh] = &lead{shard: sh, term: 1, session: "S1"}
	}
	w2 := func(seq uint64) []byte {
		return ses("w2", "S2", seq, func(r *sessionRecord) { r.Shards = map[string]uint64{"s3": 1, "s4": 1, "s5": 1} })
	}
	// Two ticks a FrequentInterval apart, each seeing w2 renew: the pool
	// has assembled, been looked at, and settled.
	for i := range 3 {
		now := at(time.Duration(i) * testFI)
		st.sessions["w2"] = w2(uint64(i))
		st.at = now
		drive(&testing.T{}, c, inTick{"S1", nil}, now, st.reply)
	}
	return st
}

// listingNotes returns the levels of the log lines effs hold about a
// failed listing.
func listingNotes(effs []effect) []slog.Level {
	var out []slog.Level
	for _, e := range effs {
		if n, ok := e.(doNote); ok && strings.Contains(n.msg, "list") && strings.Contains(n.msg, "session objects") {
			out = append(out, n.level)
		}
	}
	return out
}

type tickRow struct {
	name    string
	catches string
	check   func(t *testing.T, c *core)
}

var tickRows = []tickRow{
	{
		name: "The watch/a tick of a settled pool lists the sessions and reads the member list, nothing more",
		check: func(t *testing.T, c *core) {
			st := settledPool(c)
			now := at(3 * testFI)
			st.sessions["w2"] = ses("w2", "S2", 3, func(r *sessionRecord) { r.Shards = map[string]uint64{"s3": 1, "s4": 1, "s5": 1} })
			st.at = now
			calls, effs := drive(t, c, inTick{"S1", nil}, now, st.reply)
			if want := []string{"list", "getMembers"}; !slices.Equal(calls, want) {
				t.Errorf("calls = %v; want %v", calls, want)
			}
			for _, e := range effs {
				if e, ok := e.(doCount); ok && e.c == countLook {
					t.Errorf("the tick counted a look")
				}
			}
		},
	},
	{
		name:    "The watch/a failed listing after one that succeeded is no news: the tick reads nothing",
		catches: "listfaillooks",
		check: func(t *testing.T, c *core) {
			st := settledPool(c)
			c.cp.debug = true
			now := at(3 * testFI)
			st.failing = map[string]error{"list": errors.New("timeout")}
			calls, effs := drive(t, c, inTick{"S1", nil}, now, st.reply)
			if want := []string{"list", "getMembers"}; !slices.Equal(calls, want) {
				t.Errorf("calls = %v; want %v", calls, want)
			}
			if got := listingNotes(effs); !slices.Equal(got, []slog.Level{slog.LevelDebug}) {
				t.Errorf("log lines of the first failed listing at levels %v; want one at Debug", got)
			}
			// A second failure in a row looks: every member's session; the
			// operator is told once, at Warn.
			calls, effs = drive(t, c, inTick{"S1", nil}, now.Add(testFI), st.reply)
			if got := listingNotes(effs); !slices.Equal(got, []slog.Level{slog.LevelWarn}) {
				t.Errorf("log lines of the second failed listing in a row at levels %v; want one at Warn", got)
			}
			if _, effs = drive(t, c, inTick{"S1", nil}, now.Add(2*testFI), st.reply); len(listingNotes(effs)) != 0 {
				t.Errorf("the third failed listing in a row logged again: %v", listingNotes(effs))
			}
			// (Then getSession: whether the session the look began with
			// lives, before its claims, none here.)
			if want := []string{"list", "getMembers", "getSessions w2", "getSession"}; !slices.Equal(calls, want) {
				t.Errorf("calls at the second failure in a row = %v; want %v", calls, want)
			}
		},
	},
	{
		name: "Spreading the shards/a tick with no live session of its own calls nothing",
		check: func(t *testing.T, c *core) {
			st := settledPool(c)
			calls, effs := drive(t, c, inTick{"", nil}, at(3*testFI), st.reply)
			if len(calls) != 0 {
				t.Errorf("calls = %v; want none", calls)
			}
			if len(effs) != 1 || effs[0] != (doNext{nextAt{nextSlot, at(3*testFI + testFI/2)}}) {
				t.Errorf("effects = %#v; want only the next tick half an interval on", effs)
			}
		},
	},
	{
		name:    "Claims and takeovers/a claim lists its intent before the sessions that clear it are read, and takes it out after",
		catches: "nointent",
		check: func(t *testing.T, c *core) {
			c.cp.lists = true
			st := &storeScript{sessions: map[string][]byte{"w2": ses("w2", "S2", 0)}, records: map[string][]byte{}, members: membersOf("w1", "w2"), at: t0}
			drive(t, c, inTick{"S1", nil}, t0, st.reply) // assembles: reads w2
			// A FrequentInterval later, w2 holding nothing, w1 claims its
			// three (the shares of 6 over 2).
			now := t0.Add(2 * testFI)
			st.sessions["w2"], st.at = ses("w2", "S2", 2), now
			calls, effs := drive(t, c, inTick{"S1", nil}, now, st.reply)
			var claim []string
			for i, n := range calls {
				if strings.HasPrefix(n, "getRecords") {
					claim = calls[i:]
					break
				}
			}
			want := []string{"getRecords", "announce", "getMembers", "getSessions w2", "putClaims", "leadClaims", "announce none"}
			if len(claim) != len(want) {
				t.Fatalf("the claim's calls = %v; want %v", claim, want)
			}
			for i := range want {
				if !strings.HasPrefix(claim[i], want[i]) {
					t.Errorf("the claim's call %d = %q; want %q (all: %v)", i, claim[i], want[i], claim)
				}
			}
			if len(c.mine) != 3 {
				t.Errorf("w1 leads %d shards after its claim; want 3", len(c.mine))
			}
			var claims int
			for _, e := range effs {
				if e, ok := e.(doCount); ok && e.c == countClaim {
					claims++
				}
			}
			if claims != 3 {
				t.Errorf("%d claims counted; want 3", claims)
			}
		},
	},
	{
		name: "Claims and takeovers/an intent that cannot be listed writes no claim, and the session lists no claim after it",
		check: func(t *testing.T, c *core) {
			c.cp.lists = true
			st := &storeScript{sessions: map[string][]byte{"w2": ses("w2", "S2", 0)}, records: map[string][]byte{}, members: membersOf("w1", "w2"), at: t0}
			drive(t, c, inTick{"S1", nil}, t0, st.reply)
			now := t0.Add(2 * testFI)
			st.sessions["w2"], st.at = ses("w2", "S2", 2), now
			st.failing = map[string]error{"announce": errors.New("the heartbeat is not renewing")}
			calls, effs := drive(t, c, inTick{"S1", nil}, now, st.reply)
			for _, n := range calls {
				if strings.HasPrefix(n, "putClaims") || n == "announce none" {
					t.Errorf("calls after a failed intent: %v", calls)
				}
			}
			if !slices.ContainsFunc(effs, func(e effect) bool { return e == doClaimingNone{} }) {
				t.Errorf("no doClaimingNone after a failed intent: %#v", effs)
			}
		},
	},
	{
		name:    "Claims and takeovers/a leadership handed over is over for its holder at once; its release waits for Work",
		catches: "resignwaits",
		check: func(t *testing.T, c *core) {
			ld := &lead{shard: "s0", term: 3, session: "S1"}
			c.mine["s0"] = ld
			_, effs := drive(t, c, inEnded{ld, errHandedOver}, t0, nil)
			want := []effect{doNoteEnded{"s0", 3}, doDrop{ld}, doRenewSoon{}, doExit{ld, nil}}
			if !reflect.DeepEqual(effs, want) {
				t.Errorf("effects of a handover = %#v; want %#v", effs, want)
			}
			_, effs = drive(t, c, inWorkDone{ld}, t0, nil)
			if want := []effect{doRelease{ld}}; !reflect.DeepEqual(effs, want) {
				t.Errorf("effects of its Work's return = %#v; want %#v", effs, want)
			}
			_, effs = drive(t, c, inReleased{ld, nil}, t0, nil)
			if want := []effect{doCount{countReleased}, doNoteEnded{"s0", 0}}; !reflect.DeepEqual(effs, want) {
				t.Errorf("effects of its release = %#v; want %#v", effs, want)
			}
			if c.mine["s0"] != nil {
				t.Errorf("the leadership is still the worker's after its release")
			}
		},
	},
	{
		name: "Claims and takeovers/Work that returns while leading ends the leadership as a Resign, and the release follows",
		check: func(t *testing.T, c *core) {
			ld := &lead{shard: "s0", term: 3, session: "S1"}
			c.mine["s0"] = ld
			_, effs := drive(t, c, inWorkDone{ld}, t0, nil)
			if want := []effect{doEnd{ld, s3lect.ErrResigned}}; !reflect.DeepEqual(effs, want) {
				t.Errorf("effects = %#v; want %#v", effs, want)
			}
			_, effs = drive(t, c, inEnded{ld, s3lect.ErrResigned}, t0, nil)
			if want := []effect{doNoteEnded{"s0", 3}, doDrop{ld}, doRenewSoon{}, doRelease{ld}}; !reflect.DeepEqual(effs, want) {
				t.Errorf("effects = %#v; want %#v", effs, want)
			}
		},
	},
	{
		name: "The session's lease/a leadership whose lease ran out releases nothing and is over for its holder",
		check: func(t *testing.T, c *core) {
			ld := &lead{shard: "s0", term: 3, session: "S1"}
			c.mine["s0"] = ld
			_, effs := drive(t, c, inEnded{ld, s3lect.ErrLeaseExpired}, t0, nil)
			want := []effect{doNoteEnded{"s0", 3}, doDrop{ld}, doRenewSoon{}, doCount{countExpired}, doExit{ld, nil}}
			if !reflect.DeepEqual(effs, want) {
				t.Errorf("effects = %#v; want %#v", effs, want)
			}
		},
	},
	{
		name:    "Peer mode/a digest that names every live worker stands for the listing, and the member list is not read while the hub shows the one this worker knows",
		catches: "peermembers",
		check: func(t *testing.T, c *core) {
			c.cp.ii = 6 * testFI
			st := settledPool(c)
			c.cp.peer = true
			now := at(3 * testFI)
			w2 := ses("w2", "S2", 3, func(r *sessionRecord) { r.Shards = map[string]uint64{"s3": 1, "s4": 1, "s5": 1} })
			answer := func(members string) func(effect) input {
				return func(e effect) input {
					if a, ok := e.(askHub); ok {
						if !a.self || a.id != "w1" {
							t.Errorf("asked %+v; want this worker's own hub (w1, the lowest live ID)", a)
						}
						sum := sha256.Sum256(w2)
						return inDigest{d: digest{Members: members, Sessions: map[string]peerSession{"w2": {ETag: etagOf(w2), Sum: peerSum(sum)}}}}
					}
					return st.reply(e)
				}
			}
			calls, _ := drive(t, c, inTick{"S1", nil}, now, answer(c.membersTag))
			if want := []string{"askHub"}; !slices.Equal(calls, want) {
				t.Errorf("calls with the hub's digest naming w2 and the known member list = %v; want %v", calls, want)
			}
			calls, _ = drive(t, c, inTick{"S1", nil}, now.Add(testFI), answer("another"))
			if want := []string{"askHub", "getMembers"}; !slices.Equal(calls, want) {
				t.Errorf("calls with the hub showing another member list = %v; want %v", calls, want)
			}
		},
	},
}

func TestCoreTick(t *testing.T) {
	defer setMutation(t)()
	for _, r := range tickRows {
		t.Run(r.name, func(t *testing.T) {
			r.check(t, newTestCore("s0", "s1", "s2", "s3", "s4", "s5"))
		})
	}
}

// TestCoreTickNewSessionClaimsOnlyOnceListed: a session lost and opened
// again inside one process (S1, then S9) claims nothing before a read of
// the member list names S9, even when the first tick's read of the list
// fails and the claim's own read names S1 (a reviewer's case: a prune
// decided on S1's object would otherwise land after S9's claims, as in
// the shard simulation's seed 904209 after a restart). With the reads
// succeeding, the tick writes S9 into the list and claims nothing in it.
// -sim.mutate=nosessionmark breaks both.
func TestCoreTickNewSessionClaimsOnlyOnceListed(t *testing.T) {
	defer setMutation(t)()
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("first read fails=%v", fail), func(t *testing.T) {
			c := newTestCore("s0", "s1", "s2", "s3", "s4", "s5")
			c.cp.lists = true
			st := &storeScript{sessions: map[string][]byte{"w2": ses("w2", "S2", 0)}, records: map[string][]byte{}, members: membersOf("w1", "w2"), at: t0}
			drive(t, c, inTick{"S1", nil}, t0, st.reply) // S1 listed (w1: S1); the pool assembles
			now := t0.Add(2 * testFI)
			st.sessions["w2"], st.at = ses("w2", "S2", 2), now
			reads := 0
			reply := func(e effect) input {
				switch e.(type) {
				case getMembers:
					if reads++; fail && reads == 1 {
						return inMembers{recordRead{err: errors.New("timeout")}}
					}
				case getSession:
					return inSession{"S9", nil}
				}
				return st.reply(e)
			}
			calls, _ := drive(t, c, inTick{"S9", nil}, now, reply)
			for _, n := range calls {
				if strings.HasPrefix(n, "putClaims") {
					t.Errorf("session S9 claims (%s) in its first tick, before a read of the list names it; calls %v", n, calls)
				}
			}
			if wrote := slices.Contains(calls, "putMembers"); wrote == fail {
				t.Errorf("the tick wrote the member list: %v; want %v (S9 written there when the read succeeds); calls %v", wrote, !fail, calls)
			}
		})
	}
}

// TestStampMembers: every write of the member list has bytes of its own
// (a random value), so that an ETag that hashes the content never comes
// back after a later write (a reviewer's case: a paused process's join
// put the list back to its earlier bytes, and a prune decided on that
// earlier list, If-Match, landed over a newer session's entry).
// -sim.mutate=nomemberstamp breaks it.
func TestStampMembers(t *testing.T) {
	defer setMutation(t)()
	l := membersOf("w1", "w2")
	a, b := stampMembers(l), stampMembers(l)
	if bytes.Equal(a, b) || bytes.Equal(a, l) {
		t.Fatalf("two writes of one member list have the same bytes: %s", a)
	}
	for _, d := range [][]byte{a, b} {
		m, err := parseMembers(d)
		if err != nil || m.Write == "" || !slices.Equal(m.Workers, []string{"w1", "w2"}) || m.Sessions["w2"] != "S2" || m.TTL["w1"] != ttlMillis(testLT) {
			t.Errorf("stamped list %s (%v); want the list as written, with a write value", d, err)
		}
	}
}

// TestCoreTickClaimStopsWhenTheListDropsTheSession: the claim's own read
// of the member list (after the intent) must name this worker's session;
// when it names another, none (a list written before lists named
// sessions), or the list is gone (deleted), the claim writes nothing, as
// the list read at the tick's start may have been pruned since (a
// reviewer found the deleted list let the claims through). -sim.mutate=
// nosessionmark breaks the rows that stop.
func TestCoreTickClaimStopsWhenTheListDropsTheSession(t *testing.T) {
	defer setMutation(t)()
	for _, row := range []struct {
		name   string
		fresh  func(listed []byte) []byte
		claims bool
	}{
		{"it names the session", func(listed []byte) []byte { return listed }, true},
		{"it names another session", func([]byte) []byte {
			m, _ := parseMembers(membersOf("w1", "w2"))
			m.Sessions["w1"] = "S7"
			return encode(m)
		}, false},
		{"it names no session", func([]byte) []byte {
			m, _ := parseMembers(membersOf("w1", "w2"))
			m.Sessions = nil
			return encode(m)
		}, false},
		{"it is deleted", func([]byte) []byte { return nil }, false},
	} {
		t.Run(row.name, func(t *testing.T) {
			c := newTestCore("s0", "s1", "s2", "s3", "s4", "s5")
			c.cp.lists = true
			st := &storeScript{sessions: map[string][]byte{"w2": ses("w2", "S2", 0)}, records: map[string][]byte{}, members: membersOf("w1", "w2"), at: t0}
			drive(t, c, inTick{"S1", nil}, t0, st.reply) // S1 listed; the pool assembles
			now := t0.Add(2 * testFI)
			st.sessions["w2"], st.at = ses("w2", "S2", 2), now
			reads := 0
			reply := func(e effect) input {
				if _, ok := e.(getMembers); ok {
					if reads++; reads > 1 {
						d := row.fresh(st.members)
						return inMembers{recordRead{data: d, etag: etagOf(d)}}
					}
				}
				return st.reply(e)
			}
			calls, _ := drive(t, c, inTick{"S1", nil}, now, reply)
			claimed := slices.ContainsFunc(calls, func(n string) bool { return strings.HasPrefix(n, "putClaims") })
			if claimed != row.claims {
				t.Errorf("claims written: %v; want %v (calls %v)", claimed, row.claims, calls)
			}
		})
	}
}

// stuckPool: w1 (this core) leads s0 and s1, w2 leads s2 to s5, w3 is
// live and leads nothing (a worker that cannot claim). The targets are 2
// each: the pool is not settled, and two looks that find the same counts
// leave it stuck (settleStuck). w1 ticks every FrequentInterval from 0 to
// 4; then its session S1 is lost and S9 opens in the same process. It
// returns the script's step for tick k (the hub's digest names the member
// list w1 last read).
func stuckPool(t *testing.T, c *core, peer bool) (*storeScript, func(k int) ([]string, func(effect) input)) {
	c.cp.lists = true
	c.cp.ii = 6 * testFI
	st := &storeScript{sessions: map[string][]byte{}, records: map[string][]byte{}, members: membersOf("w1", "w2", "w3")}
	for _, sh := range []string{"s0", "s1"} {
		c.mine[sh] = &lead{shard: sh, term: 1, session: "S1"}
	}
	session := "S1"
	step := func(k int) ([]string, func(effect) input) {
		now := at(time.Duration(k) * testFI)
		w2 := ses("w2", "S2", uint64(k), func(r *sessionRecord) { r.Shards = map[string]uint64{"s2": 1, "s3": 1, "s4": 1, "s5": 1} })
		w3 := ses("w3", "S3", uint64(k))
		st.sessions["w2"], st.sessions["w3"], st.at = w2, w3, now
		reply := func(e effect) input {
			switch e.(type) {
			case askHub:
				s2, s3 := sha256.Sum256(w2), sha256.Sum256(w3)
				return inDigest{d: digest{Members: c.membersTag, Sessions: map[string]peerSession{
					"w2": {ETag: etagOf(w2), Sum: peerSum(s2)}, "w3": {ETag: etagOf(w3), Sum: peerSum(s3)}}}}
			case getSession:
				return inSession{session, nil}
			}
			return st.reply(e)
		}
		return nil, reply
	}
	for k := 0; k < 4; k++ {
		_, reply := step(k)
		calls, _ := drive(t, c, inTick{"S1", nil}, at(time.Duration(k)*testFI), reply)
		t.Logf("S1 tick %d: stuck=%v calls=%v", k, c.settleStuck, calls)
	}
	c.cp.peer = peer
	// S1 is lost at 4.5 FI; S9 opens in the same process. Its leaderships
	// end (lease expired) and their Work returns.
	for _, sh := range []string{"s0", "s1"} {
		ld := c.mine[sh]
		drive(t, c, inEnded{ld, s3lect.ErrLeaseExpired}, at(4*testFI+testFI/2), nil)
		drive(t, c, inWorkDone{ld}, at(4*testFI+testFI/2), nil)
	}
	session = "S9"
	return st, step
}

// TestCoreTickReopenedSessionInPeerMode: a session reopened in one
// process while its view of the pool is stuck claims its shards back
// within a few intervals, in peer mode as with listings: a worker not
// listed in its session reads the member list at every tick, though the
// hub's digest names the list it knows. Before, it waited for the store's
// turn (InfrequentInterval) to read the list, and again after its join
// (the digest named the list from before its own write): its two shards
// were unled for about two InfrequentIntervals, the first claim at tick
// 16 (a reviewer's case; -sim.mutate=peerunlisted).
func TestCoreTickReopenedSessionInPeerMode(t *testing.T) {
	defer setMutation(t)()
	for _, peer := range []bool{false, true} {
		t.Run(map[bool]string{false: "listing", true: "peer"}[peer], func(t *testing.T) {
			c := newTestCore("s0", "s1", "s2", "s3", "s4", "s5")
			_, step := stuckPool(t, c, peer)
			claimedAt := -1
			for k := 5; k < 25 && claimedAt < 0; k++ {
				_, reply := step(k)
				calls, _ := drive(t, c, inTick{"S9", nil}, at(time.Duration(k)*testFI), reply)
				for _, n := range calls {
					if strings.HasPrefix(n, "putClaims") {
						claimedAt = k
					}
				}
				t.Logf("S9 tick %d: listedAt=%v stuck=%v mine=%d calls=%v", k, c.listedAt.Sub(t0), c.settleStuck, len(c.mine), calls)
			}
			t.Logf("S9 first claims at tick %d (session lost at 4.5 FI)", claimedAt)
			if claimedAt < 0 || claimedAt > 8 {
				t.Errorf("the reopened session claims at tick %d; its shards are unled meanwhile", claimedAt)
			}
		})
	}
}
