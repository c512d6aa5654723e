package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// The core's rules, one table row each, named "section/rule" after the
// sections of docs/pool-protocol.md. Each row builds what a worker (w1)
// has seen, feeds the core one more event at a given local time, and
// checks what the core decides. A row with catches names the mutation
// (mutations.go) under which it fails: run them with
//
//	go test -tags s3lect_mutations -run TestCore ./pool -sim.mutate=NAME

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// at is t0 plus d, as a row's times are written.
func at(d time.Duration) time.Time { return t0.Add(d) }

// etagOf gives an object's ETag by its bytes, as content-hash stores do.
func etagOf(data []byte) string {
	if data == nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// ses is a session record of worker w, session id, at seq, changed by fs.
func ses(w, id string, seq uint64, fs ...func(*sessionRecord)) []byte {
	r := sessionRecord{Pool: formatVersion, Worker: w, Session: id, Seq: seq, TTL: ttlMillis(testLT), LastUpdated: t0}
	for _, f := range fs {
		f(&r)
	}
	return encode(r)
}

func leads(shard string, term uint64) func(*sessionRecord) {
	return func(r *sessionRecord) { r.Shards = map[string]uint64{shard: term} }
}

func claiming(shard string, term uint64) func(*sessionRecord) {
	return func(r *sessionRecord) { r.Claiming = map[string]uint64{shard: term} }
}

func endedTerm(shard string, term uint64) func(*sessionRecord) {
	return func(r *sessionRecord) { r.Ended = map[string]uint64{shard: term} }
}

func ttl(d time.Duration) func(*sessionRecord) {
	return func(r *sessionRecord) { r.TTL = ttlMillis(d) }
}

func released(r *sessionRecord) { r.Released = true }

// rec is shard x's record: owned by owner's session at term (owner ""
// with a session: released by it).
func rec(owner, session string, term uint64, lease time.Duration) []byte {
	return encode(shardRecord{Pool: formatVersion, Shard: "x", Owner: owner, Session: session, Term: term, TTL: ttlMillis(lease), LastUpdated: t0})
}

// seen is one thing w1 saw before the claims: a read of a worker's
// session object (obj nil: absent; fail: the read failed), or a listing
// of the session objects (list: worker -> the object it showed).
type seen struct {
	at   time.Duration
	w    string
	obj  []byte
	fail bool
	list map[string][]byte
}

// claimAt is one claim of shard x by w1: it reads the record (nil:
// absent) and the member list afresh (fresh; nil: the read failed), then
// every session clearanceSet names; reads gives an object other than the
// one last seen (a worker missing there and never seen: absent; fail: the
// reads of those workers fail).
type claimAt struct {
	at     time.Duration
	record []byte
	fresh  *membersRecord
	reads  map[string][]byte
	fail   []string
}

type claimRow struct {
	name    string
	catches string            // the mutation under which the row fails
	members []string          // the member list as w1's tick last read it
	ended   map[string]uint64 // the terms w1's own session lists as ended
	seen    []seen
	claims  []claimAt
	// What the last claim decides: a claim written (at term), the workers
	// whose absent objects are buried.
	ready  bool
	term   uint64
	buried []string
}

func members(ws ...string) *membersRecord {
	m := &membersRecord{Pool: formatVersion, Workers: ws, TTL: map[string]int64{}, Sessions: map[string]string{}}
	for _, w := range ws {
		m.TTL[w] = ttlMillis(testLT)
		m.Sessions[w] = "S" + strings.TrimPrefix(w, "w") // w1's is S1, as the rows' sessions
	}
	return m
}

var (
	s1  = ses("w2", "S2", 1, leads("x", 3))
	s2  = ses("w2", "S2", 2, leads("x", 3))
	own = rec("w2", "S2", 3, testLT)
)

var claimRows = []claimRow{
	{
		name:   "Claims and takeovers/a session that lists the shard is clear once its exact sighting has stood a lease",
		seen:   []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: s2}},
		claims: []claimAt{{at: time.Second + testLT, record: own, fresh: members("w1", "w2")}},
		ready:  true, term: 4,
	},
	{
		name:   "Claims and takeovers/a session that lists the shard is not clear before its lease has run out",
		seen:   []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: s2}},
		claims: []claimAt{{at: time.Second + testLT - time.Millisecond, record: own, fresh: members("w1", "w2")}},
	},
	{
		name:    "Claims and takeovers/L is the longest lease: a session record's ttl above this worker's LeaderTimeout",
		catches: "nottl",
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1, leads("x", 3), ttl(2*testLT))},
			{at: time.Second, w: "w2", obj: ses("w2", "S2", 2, leads("x", 3), ttl(2*testLT))}},
		claims: []claimAt{{at: 2*time.Second + testLT, record: rec("w2", "S2", 3, 2*testLT), fresh: members("w1", "w2")}},
	},
	{
		name:    "Claims and takeovers/L is the longest lease: the member list's ttl, for a worker whose records state a shorter one",
		catches: "nomemberttl",
		seen:    []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: s2}},
		claims: []claimAt{{at: 2*time.Second + testLT, record: own,
			fresh: &membersRecord{Pool: formatVersion, Workers: []string{"w1", "w2"}, TTL: map[string]int64{"w1": ttlMillis(testLT), "w2": ttlMillis(2 * testLT)}}}},
	},
	{
		name:    "Claims and takeovers/an absent session object is buried, not aged",
		catches: "absentaged",
		members: []string{"w1", "w2"},
		claims: []claimAt{{at: 0, record: own, fresh: members("w1", "w2")},
			{at: testLT + time.Second, record: own, fresh: members("w1", "w2")}},
		buried: []string{"w2"},
	},
	{
		name:    "Claims and takeovers/a live session listing a claim of the shard holds the claimer off",
		catches: "nointent",
		members: []string{"w1", "w2"},
		ended:   map[string]uint64{"x": 5}, // the term to write is above the one w2 lists
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1, claiming("x", 1))},
			{at: time.Second, w: "w2", obj: ses("w2", "S2", 2, claiming("x", 1))}},
		claims: []claimAt{{at: 2 * time.Second, fresh: members("w1", "w2")}},
	},
	{
		name:    "Claims and takeovers/an absent record is created only where every session read is clear",
		catches: "noclearance",
		members: []string{"w1", "w2"},
		ended:   map[string]uint64{"x": 5}, // w1 knows a term above the one w2 lists
		seen:    []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: s2}},
		claims:  []claimAt{{at: 2 * time.Second, fresh: members("w1", "w2")}},
	},
	{
		name:    "Claims and takeovers/the member list is read again before the sessions: a member the tick did not know is cleared",
		catches: "stalemembers",
		members: []string{"w1"},
		ended:   map[string]uint64{"x": 5},
		claims: []claimAt{{at: 0, fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S2", 7, leads("x", 4))}}},
	},
	{
		name:    "Claims and takeovers/an older write of a session restored counts as no session record",
		catches: "norestorecheck",
		members: []string{"w1", "w2"},
		ended:   map[string]uint64{"x": 9},
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 5, leads("x", 8))},
			{at: time.Second, w: "w2", obj: ses("w2", "S2", 6, leads("x", 8))}},
		claims: []claimAt{{at: 2 * time.Second, fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S2", 3)}}},
	},
	{
		name:    "Claims and takeovers/a failed read breaks a sighting's age",
		catches: "norestorecheck",
		seen: []seen{{at: 0, w: "w2", obj: s1}, {at: testLT / 3, w: "w2", fail: true},
			{at: 2 * testLT / 3, w: "w2", obj: s1}},
		claims: []claimAt{{at: testLT + time.Second, record: own, fresh: members("w1", "w2")}},
	},
	{
		name:    "Claims and takeovers/a listing ages a sighting only through a read that returns the ETag it showed",
		catches: "stalelist",
		seen: []seen{{at: 0, list: map[string][]byte{"w2": s1}},
			{at: 2 * testLT / 3, w: "w2", obj: s2}},
		claims: []claimAt{{at: testLT + time.Second, record: own, fresh: members("w1", "w2")}},
	},
	{
		name: "Claims and takeovers/a read returning the ETag a listing showed ages the sighting from that listing",
		seen: []seen{{at: 0, list: map[string][]byte{"w2": s1}},
			{at: 2 * testLT / 3, w: "w2", obj: s1}},
		claims: []claimAt{{at: testLT + time.Second, record: own, fresh: members("w1", "w2")}},
		ready:  true, term: 4,
	},
	{
		name:   "Claims and takeovers/a released session clears the shard it names at once",
		seen:   []seen{{at: 0, w: "w2", obj: s1}},
		claims: []claimAt{{at: time.Second, record: own, fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 2, leads("x", 3), released)}}},
		ready:  true, term: 4,
	},
	{
		name:   "Claims and takeovers/a failed session read clears nothing",
		seen:   []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: ses("w2", "S2", 2, leads("x", 3), released)}},
		claims: []claimAt{{at: 2 * time.Second, record: own, fresh: members("w1", "w2"), fail: []string{"w2"}}},
	},
	{
		name: "Claims and takeovers/a term never repeats: a session listing the term to write sends the claim to the next look, above it",
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1, endedTerm("x", 3))},
			{at: time.Second, w: "w2", obj: ses("w2", "S2", 2, endedTerm("x", 3), released)}},
		claims: []claimAt{{at: 2 * time.Second, fresh: members("w1", "w2")}, {at: 3 * time.Second, fresh: members("w1", "w2")}},
		ready:  true, term: 4,
	},
	{
		name: "Claims and takeovers/a record deleted after one was seen is watched for a lease",
		seen: []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: ses("w2", "S2", 2, released)}},
		claims: []claimAt{{at: 2 * time.Second, record: rec("", "S2", 3, testLT), fresh: members("w1", "w2")},
			{at: 3 * time.Second, fresh: members("w1", "w2")}},
	},
	{
		name: "Claims and takeovers/a record deleted after one was seen is created once it stayed absent a lease, above the terms seen",
		seen: []seen{{at: 0, w: "w2", obj: s1}, {at: time.Second, w: "w2", obj: ses("w2", "S2", 2, released)}},
		claims: []claimAt{{at: 2 * time.Second, record: rec("", "S2", 3, testLT), fresh: members("w1", "w2")},
			{at: 3 * time.Second, fresh: members("w1", "w2")}, {at: 3*time.Second + testLT, fresh: members("w1", "w2")}},
		ready: true, term: 4,
	},
	{
		name: "Claims and takeovers/a record naming an earlier session is clear once the run of sightings not naming it has lasted a lease",
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S9", 1)}, {at: time.Second, w: "w2", obj: ses("w2", "S9", 2)}},
		claims: []claimAt{{at: testLT + time.Second, record: own, fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S9", 3)}}},
		ready: true, term: 4,
	},
	{
		name: "Claims and takeovers/a record naming an earlier session is not clear before that run has lasted a lease",
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S9", 1)}, {at: time.Second, w: "w2", obj: ses("w2", "S9", 2)}},
		claims: []claimAt{{at: testLT - time.Second, record: own, fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S9", 3)}}},
	},
	{
		name:    "Claims and takeovers/a record put back older than a claim known to have landed holds no claim off a lease after it was found so",
		catches: "stalenamed",
		ended:   map[string]uint64{"x": 2}, // w1 led x at term 2; its release failed
		seen:    []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1)}, {at: time.Second, w: "w2", obj: ses("w2", "S2", 2)}},
		claims: []claimAt{
			{at: 2 * time.Second, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 3)}},
			// S2, renewing, lists nothing there: a lease on, whatever S2's
			// object was, S2 does not lead x by the record.
			{at: 2*time.Second + testLT, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 6)}},
		},
		ready: true, term: 3,
	},
	{
		// Reviews': w1 knows term 8 landed (its own ended term); the
		// record was deleted and S2 created x at term 1 and leads it
		// (its later writes list x), but S2's object was put back to
		// older writes, in order (seq 2, then 3: neither lists x), which
		// w1 never saw superseded. The record is older than term 8, yet
		// S2 leads x until its next renewal fails on the object put back:
		// no read tells, a lease does.
		name:    "Claims and takeovers/a record found older than a landed claim holds claims off for a lease after it was found so",
		catches: "staleunproven",
		ended:   map[string]uint64{"x": 8},
		seen:    []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1)}},
		claims: []claimAt{
			{at: 8500 * time.Millisecond, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 2)}},
			{at: 11 * time.Second, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 3)}},
			{at: 8500*time.Millisecond + testLT - time.Millisecond, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 3)}},
		},
	},
	{
		name:    "Claims and takeovers/a record put back over the release of its own claim holds no claim off a lease after it was found so",
		catches: "stalenamed",
		seen:    []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1)}, {at: time.Second, w: "w2", obj: ses("w2", "S2", 2)}},
		claims: []claimAt{
			{at: 2 * time.Second, record: rec("", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 3)}},
			{at: 3 * time.Second, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 4)}},
			{at: 3*time.Second + testLT, record: rec("w2", "S2", 1, testLT), fresh: members("w1", "w2"), reads: map[string][]byte{"w2": ses("w2", "S2", 7)}},
		},
		ready: true, term: 2,
	},
	{
		name: "Claims and takeovers/a record naming a live session that lists nothing there, at the highest term known, holds every claim off",
		seen: []seen{{at: 0, w: "w2", obj: ses("w2", "S2", 1)}, {at: time.Second, w: "w2", obj: ses("w2", "S2", 2)}},
		claims: []claimAt{{at: 2 * time.Second, record: rec("w2", "S2", 2, testLT), fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S2", 3, endedTerm("x", 1))}}},
	},
	{
		// A review's: w3 led x at term 5 (its last write read at 0); after
		// a restore set the terms back, w2's process P1 claimed x at term
		// 2 under session S1 (read at 20 s and 21 s), then stalled, still
		// within its lease; w2 restarted as P2, whose session S2 (22 s on)
		// lists x as ended. The record names S1, which may lead x until
		// about 34.5 s by its own clock: term 5 known to have landed makes
		// the record older than a claim, but not over.
		name:    "Why two workers never lead a shard at once/a record naming an earlier session of a live worker is waited out, whatever term is known to have landed",
		catches: "staleanysession",
		members: []string{"w1", "w2"},
		seen: []seen{{at: 0, w: "w3", obj: ses("w3", "SD", 4, leads("x", 5))},
			{at: 20 * time.Second, w: "w2", obj: ses("w2", "S1", 1, leads("x", 2))}, {at: 21 * time.Second, w: "w2", obj: ses("w2", "S1", 2, leads("x", 2))},
			{at: 22 * time.Second, w: "w2", obj: ses("w2", "S2", 0, endedTerm("x", 2))}},
		claims: []claimAt{{at: 27 * time.Second, record: rec("w2", "S1", 2, testLT), fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S2", 1, endedTerm("x", 2))}}},
	},
	{
		// The same, with P2 stopped at once: S2 released. The earlier
		// session S1 is waited out all the same.
		name:    "Why two workers never lead a shard at once/a record naming an earlier session of a worker whose object shows a released session is waited out",
		catches: "releasedfirst",
		members: []string{"w1", "w2"},
		seen: []seen{{at: 20 * time.Second, w: "w2", obj: ses("w2", "S1", 1, leads("x", 2))}, {at: 21 * time.Second, w: "w2", obj: ses("w2", "S1", 2, leads("x", 2))},
			{at: 22 * time.Second, w: "w2", obj: ses("w2", "S2", 0, endedTerm("x", 2))}},
		claims: []claimAt{{at: 27 * time.Second, record: rec("w2", "S1", 2, testLT), fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S2", 1, endedTerm("x", 2), released)}}},
	},
	{
		name:    "Why two workers never lead a shard at once/a record naming an earlier session is clear once sightings not naming it have stood a lease",
		members: []string{"w1", "w2"},
		seen: []seen{{at: 20 * time.Second, w: "w2", obj: ses("w2", "S1", 1, leads("x", 2))}, {at: 21 * time.Second, w: "w2", obj: ses("w2", "S1", 2, leads("x", 2))},
			{at: 22 * time.Second, w: "w2", obj: ses("w2", "S2", 0, endedTerm("x", 2))}},
		claims: []claimAt{{at: 22*time.Second + testLT, record: rec("w2", "S1", 2, testLT), fresh: members("w1", "w2"),
			reads: map[string][]byte{"w2": ses("w2", "S2", 1, endedTerm("x", 2), released)}}},
		ready: true, term: 3,
	},
	{
		name: "Why two workers never lead a shard at once/a record that is not the pool's is left alone",
		claims: []claimAt{{at: 0, record: []byte(`{"leaderId":"someone"}`), fresh: members("w1")},
			{at: testLT, record: []byte(`{"leaderId":"someone"}`), fresh: members("w1")}},
	},
}

// runClaims feeds the core a row's history and claims; it returns the
// last claim's attempt and the workers it would bury.
func runClaims(t *testing.T, r claimRow) (attempt, []string) {
	t.Helper()
	c := newCore(params{id: "w1", fi: testFI, lt: testLT, n: 1, sessions: "p/sessions/"}, []string{"x"})
	c.members = r.members
	last := map[string][]byte{}
	for _, s := range r.seen {
		if s.list != nil {
			var es []store.Entry
			for w, obj := range s.list {
				es = append(es, store.Entry{Key: "p/sessions/" + w + ".json", ETag: etagOf(obj)})
			}
			c.applyListing(es, at(s.at))
			continue
		}
		var err error
		if s.fail {
			err = fmt.Errorf("read %s: timeout", s.w)
		} else {
			last[s.w] = s.obj
		}
		c.sessionRead(s.w, s.obj, etagOf(s.obj), err, at(s.at))
	}
	var a []attempt
	var buried []string
	for _, cl := range r.claims {
		now := at(cl.at)
		a = []attempt{{shard: "x", data: cl.record, etag: etagOf(cl.record)}}
		c.recordsRead(a, r.ended, 1, now)
		ws := c.clearanceSet(a, cl.fresh, now)
		sent := map[string]time.Time{}
		for _, w := range ws {
			obj, ok := cl.reads[w]
			if !ok {
				obj = last[w]
			}
			var err error
			if slices.Contains(cl.fail, w) {
				err = fmt.Errorf("read %s: timeout", w)
			} else {
				last[w] = obj
			}
			if ok, _ := c.sessionRead(w, obj, etagOf(obj), err, now); ok {
				sent[w] = now
			}
		}
		buried = c.absent(ws, sent)
		c.cleared(a, ws, sent, 1, now)
	}
	return a[0], buried
}

func TestCoreClaims(t *testing.T) {
	defer setMutation(t)()
	for _, r := range claimRows {
		t.Run(r.name, func(t *testing.T) {
			a, buried := runClaims(t, r)
			if a.ready != r.ready {
				t.Errorf("claim written = %v; want %v (candidate %v, term %d)", a.ready, r.ready, a.cand, a.term)
			}
			if r.ready && a.term != r.term {
				t.Errorf("claim's term = %d; want %d", a.term, r.term)
			}
			if !slices.Equal(buried, r.buried) {
				t.Errorf("buried %v; want %v", buried, r.buried)
			}
		})
	}
}

// coreRow is a rule outside the claim's steps: setup builds the state,
// check feeds the event and checks the decision.
type coreRow struct {
	name    string
	catches string
	check   func(t *testing.T, c *core)
}

func newTestCore(shards ...string) *core {
	c := newCore(params{id: "w1", fi: testFI, lt: testLT, n: len(shards), sessions: "p/sessions/"}, shards)
	return &c
}

// ordered returns the shards in the order every worker shares.
func (c *core) ordered() []string {
	var out []string
	for _, i := range c.order {
		out = append(out, c.names[i])
	}
	return out
}

// readAt has c read worker w's object obj at time d.
func (c *core) readAt(w string, obj []byte, d time.Duration) {
	c.sessionRead(w, obj, etagOf(obj), nil, at(d))
}

// orphanWorld sets up the orphan rows' pool: w1 (this core) and w2 hold
// their share, 2 of 6, w3 one, and the first shard of the shared order
// that pick takes is unowned. It returns that shard.
func orphanWorld(c *core, pick func(shard string) bool) string {
	var free string
	var rest []string
	for _, sh := range c.ordered() {
		if free == "" && pick(sh) {
			free = sh
		} else {
			rest = append(rest, sh)
		}
	}
	c.members = []string{"w1", "w2", "w3"}
	c.mine[rest[0]] = &lead{shard: rest[0], term: 1}
	c.mine[rest[1]] = &lead{shard: rest[1], term: 1}
	c.readAt("w2", ses("w2", "S2", 1, func(r *sessionRecord) { r.Shards = map[string]uint64{rest[2]: 1, rest[3]: 1} }), 0)
	c.readAt("w3", ses("w3", "S3", 1, leads(rest[4], 1)), 0)
	return free
}

var coreRows = []coreRow{
	{
		name: "When a takeover is due/a look begun within lookAhead of a session's end is taken as of that end",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1), 0)
			c.readAt("w2", ses("w2", "S2", 2), time.Second) // first seen at 1 s: its lease runs out at 1 s + LeaderTimeout
			end := at(time.Second + testLT)
			now := end.Add(-100 * time.Millisecond)
			if got := c.expiring(now, now.Add(200*time.Millisecond)); !got.Equal(end) {
				t.Errorf("expiring 100 ms before w2's lease ends, looking 200 ms ahead = %v; want its end %v", got, end)
			}
			if got := c.expiring(now, now.Add(50*time.Millisecond)); !got.Equal(now) {
				t.Errorf("expiring looking 50 ms ahead = %v; want now %v (the end is further)", got, now)
			}
			if v := c.view(end, true); slices.Contains(v.live, "w2") {
				t.Errorf("the view as of w2's end counts it live: %v", v.live)
			}
			if v := c.view(now, true); !slices.Contains(v.live, "w2") {
				t.Errorf("the view before w2's end counts it dead: %v", v.live)
			}
		},
	},
	{
		name: "The infrequent interval/the watch slows down only while every other live session renews between listings",
		check: func(t *testing.T, c *core) {
			c.cp.ii = 6 * testFI
			c.members = []string{"w1", "w2"}
			list := func(etag string, d time.Duration) {
				c.applyListing([]store.Entry{{Key: "p/sessions/w2.json", ETag: etag}}, at(d))
			}
			v := view{live: []string{"w1", "w2"}, counts: map[string]int{"w1": 3, "w2": 3}}
			list("e1", 0)
			list("e2", testFI)
			if !c.stable(v, true, false) {
				t.Errorf("stable after w2 renewed between two listings, shares even = false; want true")
			}
			if c.stable(v, true, true) || c.stable(v, false, false) {
				t.Errorf("stable after a look, or without a listing = true; want false")
			}
			list("e2", 2*testFI)
			if c.stable(v, true, false) {
				t.Errorf("stable after w2's session did not change between two listings = true; want false (watched every FrequentInterval to its lease's end)")
			}
			list("e3", 3*testFI)
			uneven := view{live: []string{"w1", "w2"}, counts: map[string]int{"w1": 2, "w2": 4}}
			if c.stable(uneven, true, false) {
				t.Errorf("stable with shares 2 and 4 of 6 = true; want false")
			}
			short := view{live: []string{"w1", "w2"}, counts: map[string]int{"w1": 3, "w2": 2}}
			if c.stable(short, true, false) {
				t.Errorf("stable with 5 of 6 shards owned = true; want false")
			}
			if w := c.orphanWait(v); w != c.cp.ii+c.cp.fi {
				t.Errorf("orphanWait with an InfrequentInterval of %v = %v; want %v (InfrequentInterval + FrequentInterval)", c.cp.ii, w, c.cp.ii+c.cp.fi)
			}
		},
	},
	{
		name: "Objects/a worker not on the member list adds itself, with its lease",
		check: func(t *testing.T, c *core) {
			join := c.membersRead(*members("w2"), "e1", "S1", at(0))
			if join == nil || !slices.Equal(join.Workers, []string{"w1", "w2"}) || join.TTL["w1"] != ttlMillis(testLT) {
				t.Errorf("membersRead of a list without w1 = %+v; want w1 added with ttl %d", join, ttlMillis(testLT))
			}
			if !c.listedAt.IsZero() {
				t.Errorf("listedAt = %v before the list names w1; want zero", c.listedAt)
			}
		},
	},
	{
		name:    "Objects/a worker whose session the member list does not name writes it there before it claims",
		catches: "nosessionmark",
		check: func(t *testing.T, c *core) {
			// The list names w1 with an earlier session's ID (a restart),
			// as read before a prune decided on that session's object
			// lands: w1 must change the list before it claims, so that the
			// prune, written over the list as read, is refused.
			m := *members("w1", "w2")
			m.Sessions["w1"] = "S0"
			join := c.membersRead(m, "e1", "S1", at(0))
			if join == nil || join.Sessions["w1"] != "S1" || !slices.Equal(join.Workers, []string{"w1", "w2"}) || join.Sessions["w2"] != "S2" {
				t.Fatalf("membersRead of a list naming w1 with session S0, in session S1 = %+v; want the list written with w1's session S1, the rest as read", join)
			}
			v := c.view(at(0), true)
			if _, ok, _ := c.share(v, at(testLT)); ok {
				t.Errorf("share before the list names w1's session: may act; want not (it claims nothing before the list names its session)")
			}
			if join := c.membersRead(*join, "e2", "S1", at(time.Second)); join != nil {
				t.Errorf("membersRead of the list as written = %+v; want nothing written", join)
			}
		},
	},
	{
		name:    "Objects/a member listed with a shorter lease than its own raises its ttl",
		catches: "nomemberttl",
		check: func(t *testing.T, c *core) {
			m := *members("w1", "w2")
			m.TTL["w1"] = ttlMillis(testLT / 2)
			if join := c.membersRead(m, "e1", "S1", at(0)); join == nil || join.TTL["w1"] != ttlMillis(testLT) {
				t.Errorf("membersRead of a list stating w1's ttl %d = %+v; want w1's ttl raised to %d", m.TTL["w1"], join, ttlMillis(testLT))
			}
		},
	},
	{
		name: "Objects/a worker on the member list claims nothing before a FrequentInterval after it found itself there",
		check: func(t *testing.T, c *core) {
			if join := c.membersRead(*members("w1", "w2"), "e1", "S1", at(time.Second)); join != nil {
				t.Errorf("membersRead of a list naming w1 with its lease = %+v; want nothing written", join)
			}
			v := c.view(at(time.Second), true)
			if need, ok, hold := c.share(v, at(time.Second+testFI-time.Millisecond)); ok || need != 6 || !hold.Equal(at(time.Second+testFI)) {
				t.Errorf("share just before a FrequentInterval on the list = %d, %v, %v; want 6 (alone: all 6 shards), false, %v", need, ok, hold, at(time.Second+testFI))
			}
			if need, ok, _ := c.share(v, at(time.Second+testFI)); !ok || need != 6 {
				t.Errorf("share a FrequentInterval after = %d, %v; want 6, true", need, ok)
			}
		},
	},
	{
		name:    "Objects/a member whose session is released and whose terms are superseded is taken off the list",
		catches: "keepmembers",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1), 0)
			c.readAt("w2", ses("w2", "S2", 2, released), time.Second)
			if gone := c.prune(map[string]time.Time{"w2": at(time.Second)}, at(time.Second)); !slices.Equal(gone, []string{"w2"}) {
				t.Errorf("prune = %v; want [w2]", gone)
			}
		},
	},
	{
		name: "Objects/a member whose object lists a term still needed stays on the list",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1), 0)
			c.readAt("w2", ses("w2", "S2", 2, released, endedTerm("x", 4)), time.Second)
			if gone := c.prune(map[string]time.Time{"w2": at(time.Second)}, at(time.Second)); len(gone) != 0 {
				t.Errorf("prune = %v; want none: w2's object lists x's term 4, which no live session has superseded", gone)
			}
		},
	},
	{
		name: "Objects/only the live worker with the lowest ID prunes",
		check: func(t *testing.T, c *core) {
			c.cp.id = "w3"
			c.members = []string{"w1", "w2", "w3"}
			c.readAt("w1", ses("w1", "S1", 1), 0)
			c.readAt("w1", ses("w1", "S1", 2), time.Second)
			c.readAt("w2", ses("w2", "S2", 1, released), 0)
			sent := map[string]time.Time{"w1": at(time.Second), "w2": at(time.Second)}
			if gone := c.prune(sent, at(time.Second)); len(gone) != 0 {
				t.Errorf("prune by w3 while w1 lives = %v; want none", gone)
			}
		},
	},
	{
		name: "Spreading the shards/a worker above its share hands over no more than the others lack, the last in the shared order",
		check: func(t *testing.T, c *core) {
			order := c.ordered()
			for _, s := range order[:5] {
				c.mine[s] = &lead{shard: s, term: 1}
			}
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1, leads(order[5], 1)), 0)
			v := c.view(at(time.Second), true)
			if v.targets["w1"] != 3 || v.counts["w1"] != 5 || v.counts["w2"] != 1 {
				t.Fatalf("view = %+v; want w1 holding 5 of target 3, w2 holding 1", v)
			}
			out := c.handOver(v, 5)
			var got []string
			for _, ld := range out {
				got = append(got, ld.shard)
			}
			if want := []string{order[4], order[3]}; !slices.Equal(got, want) {
				t.Errorf("handOver = %v; want %v (w2 lacks 2)", got, want)
			}
			if n := c.liveMine(); n != 3 {
				t.Errorf("leaderships still counted after the handover = %d; want 3", n)
			}
		},
	},
	{
		name: "Spreading the shards/a shard unowned for the orphan wait is claimed whatever the share",
		check: func(t *testing.T, c *core) {
			first := c.ordered()[0]
			c.mine[first] = &lead{shard: first, term: 1}
			v := c.view(at(0), true)
			v.targets["w1"] = 1 // at its share
			if want, _ := c.wanted(v, 0, at(0)); len(want) != 0 {
				t.Errorf("wanted at once = %v; want none", want)
			}
			if want, limit := c.wanted(v, 0, at(testLT)); len(want) != 1 || limit != 1 {
				t.Errorf("wanted after the orphan wait = %v, %d; want one shard", want, limit)
			}
		},
	},
	{
		name:    "Spreading the shards/an orphan is taken up at the orphan wait by the worker at its share that the shard's hash puts first, each other one wait later per worker before it, and three more while a worker is below its share",
		catches: "orphanherd",
		check: func(t *testing.T, c *core) {
			// w1 and w2 hold their share (2 of 6), w3 one; one shard is
			// unowned, one that w2 goes before w1 for, and w1 before w3.
			free := orphanWorld(c, func(sh string) bool {
				return rendezvous(sh, "w2") < rendezvous(sh, "w1") && rendezvous(sh, "w1") < rendezvous(sh, "w3")
			})
			v := c.view(at(time.Second), true)
			if v.counts["w1"] != 2 || v.targets["w1"] != 2 || v.counts["w3"] != 1 || v.targets["w3"] != 2 {
				t.Fatalf("view = %+v; want w1 at its share of 2, w3 below", v)
			}
			c.wanted(v, 0, at(time.Second)) // the shard found unowned
			for _, r := range []struct {
				w3target int
				due      time.Duration // after it was found unowned
			}{
				{1, 2 * testLT}, // w3 at its share (as if its target were 1): after w2's wait
				{2, 5 * testLT}, // w3 below its share: three waits more
			} {
				v.targets["w3"] = r.w3target
				if want, _ := c.wanted(v, 0, at(time.Second+r.due-time.Millisecond)); len(want) != 0 {
					t.Errorf("w3's target %d: wanted %v after it was found unowned = %v; want none yet", r.w3target, r.due-time.Millisecond, want)
				}
				if want, _ := c.wanted(v, 0, at(time.Second+r.due)); !slices.Equal(want, []string{free}) {
					t.Errorf("w3's target %d: wanted %v after it was found unowned = %v; want [%s]", r.w3target, r.due, want, free)
				}
			}
		},
	},
	{
		name:    "The watch/a worker whose release of a shard failed takes it back at the orphan wait, whatever its rank",
		catches: "unreleasedwaits",
		check: func(t *testing.T, c *core) {
			// As in the row above: w2 goes before w1 for the unowned shard,
			// and w3 is below its share; but the unowned shard's record
			// names w1's live session (its release failed), which no other
			// worker can clear.
			free := orphanWorld(c, func(sh string) bool { return rendezvous(sh, "w2") < rendezvous(sh, "w1") })
			c.shard(free).unreleased = true
			v := c.view(at(time.Second), true)
			c.wanted(v, 0, at(time.Second))
			if want, _ := c.wanted(v, 0, at(time.Second+testLT)); !slices.Equal(want, []string{free}) {
				t.Errorf("wanted at the orphan wait = %v; want [%s] (only w1 can free it)", want, free)
			}
		},
	},
	{
		name:    "Claims and takeovers/of two workers claiming one shard, the one below its share looks again first, and one taking up an orphan yields it for the orphan wait",
		catches: "orphanherd",
		check: func(t *testing.T, c *core) {
			// Workers on both sides of w1 by ID, each read claiming s0.
			c.members = []string{"a0", "w1", "z9"}
			for _, w := range []string{"a0", "z9"} {
				c.readAt(w, ses(w, "S"+w, 1, claiming("s0", 1)), 0)
				c.readAt(w, ses(w, "S"+w, 2, claiming("s0", 1)), time.Second)
			}
			now := at(2 * time.Second)
			for _, r := range []struct {
				other  string
				behind []string // live workers below their share
				orphan bool     // w1 takes s0 up as an orphan
				want   time.Duration
				yield  bool
				why    string
			}{
				{"a0", []string{"w1"}, false, testFI / 4, false, "w1 is below its share, a0 not"},
				{"z9", []string{"z9"}, false, testFI, false, "z9 is below its share, w1 not"},
				{"z9", []string{"z9"}, true, testFI, true, "z9 is below its share, and w1 takes s0 up as an orphan"},
				{"a0", nil, true, testFI, true, "neither is below its share; a0's ID is lower"},
				{"z9", nil, true, testFI / 4, false, "neither is below its share; w1's ID is lower"},
				{"a0", []string{"w1", "a0"}, false, testFI, false, "both are below their share; a0's ID is lower"},
			} {
				c.behind, c.orphanLook = map[string]bool{}, r.orphan
				for _, w := range r.behind {
					c.behind[w] = true
				}
				a := &attempt{shard: "s0", cand: true, term: 2}
				ok, retry, yield := c.clear(a, []string{r.other}, map[string]time.Time{r.other: now}, now)
				if ok || !retry.Equal(now.Add(r.want)) || yield != r.yield {
					t.Errorf("%s: clear = %v, again in %v, yield %v; want false, in %v, yield %v", r.why, ok, retry.Sub(now), yield, r.want, r.yield)
				}
				// cleared sets the shard aside, and a worker that yields
				// starts its orphan wait again.
				c.shard("s0").candSince = t0
				c.cleared([]attempt{*a}, []string{r.other}, map[string]time.Time{r.other: now}, 1, now)
				sv := c.shard("s0")
				if !sv.notBefore.Equal(now.Add(r.want)) || sv.candSince.Equal(now) != r.yield {
					t.Errorf("%s: after cleared, not before %v, unowned since %v; want %v, and since now: %v", r.why, sv.notBefore.Sub(now), sv.candSince.Sub(t0), r.want, r.yield)
				}
			}
		},
	},
	{
		name: "Spreading the shards/a session listing an ended term at a lower term than a live session's is superseded",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1, leads("s0", 5)), 0)
			v := c.view(at(time.Second), true)
			if got := c.superseded(v, map[string]uint64{"s0": 4, "s1": 2}); !slices.Equal(got, []string{"s0"}) {
				t.Errorf("superseded = %v; want [s0]", got)
			}
		},
	},
	{
		name:    "Claims and takeovers/a leadership ended by a handover is over for its holder at once, its release after Work",
		catches: "resignwaits",
		check: func(t *testing.T, c *core) {
			ld := &lead{shard: "s0", term: 3}
			c.mine["s0"] = ld
			if term, act, ok := c.leadEnded(ld, errHandedOver); !ok || act != actExit || term != 3 {
				t.Errorf("leadEnded(handover) = %d, %v, %v; want 3, actExit (Resign returns now), true", term, act, ok)
			}
			if act := c.workReturned(ld); act != actRelease {
				t.Errorf("workReturned after the handover = %v; want actRelease", act)
			}
			if _, _, ok := c.leadEnded(ld, errHandedOver); ok {
				t.Errorf("leadEnded taken in twice")
			}
		},
	},
	{
		name: "Claims and takeovers/Resign releases at once",
		check: func(t *testing.T, c *core) {
			ld := &lead{shard: "s0", term: 3}
			if _, act, _ := c.leadEnded(ld, s3lect.ErrResigned); act != actRelease {
				t.Errorf("leadEnded(Resign) = %v; want actRelease", act)
			}
		},
	},
	{
		name: "Claims and takeovers/a leadership ended by its session leaves the record to the others, its term listed as ended",
		check: func(t *testing.T, c *core) {
			c.shard("s0").highest = 7 // a term seen above this leadership's
			ld := &lead{shard: "s0", term: 3}
			c.mine["s0"] = ld
			term, act, _ := c.leadEnded(ld, fmt.Errorf("renew: %w", s3lect.ErrLeaseExpired))
			if act != actSettle || term != 7 {
				t.Errorf("leadEnded(lease expired) = %d, %v; want 7 (the highest term known), actSettle", term, act)
			}
			if act := c.workReturned(ld); act != actNone {
				t.Errorf("workReturned after the session's end = %v; want actNone: nothing to release", act)
			}
			c.forget(ld)
			if c.mine["s0"] != nil {
				t.Errorf("a leadership whose Work returned and whose record is settled is still kept")
			}
		},
	},
	{
		name:    "Claims and takeovers/a claim whose outcome stayed unknown is released at the next tick while its record names it",
		catches: "keepstrays",
		check: func(t *testing.T, c *core) {
			a := &attempt{shard: "s0", term: 4, sent: true, result: fmt.Errorf("write: %w", errFault)}
			c.claimRefused(a, "S1", at(0))
			if got := c.strayList(); !slices.Equal(got, []string{"s0"}) {
				t.Fatalf("strays after a claim sent whose every attempt failed = %v; want [s0]", got)
			}
			landed := encode(shardRecord{Pool: formatVersion, Shard: "s0", Owner: "w1", Session: "S1", Term: 4, TTL: ttlMillis(testLT)})
			out, done := c.strayRead("s0", landed, etagOf(landed), nil, t0)
			r, err := parseShard(out)
			if done || err != nil || r.Owner != "" || r.Session != "S1" || r.Term != 4 {
				t.Errorf("strayRead of the landed claim = %+v (%v), done %v; want a release by S1 at term 4", r, err, done)
			}
			c.straySettled("s0")
			if len(c.strays) != 0 || c.shards["s0"].highest != 4 {
				t.Errorf("after the release: strays %v, highest %d; want none, 4", c.strays, c.shards["s0"].highest)
			}
		},
	},
	{
		name: "Claims and takeovers/a second stray claim of a shard does not hide the first: the record is released at the term it names",
		check: func(t *testing.T, c *core) {
			a := &attempt{shard: "s0", term: 4, sent: true, result: fmt.Errorf("write: %w", errFault)}
			c.claimRefused(a, "S1", at(0))
			c.claimRefused(&attempt{shard: "s0", term: 5, sent: true, result: a.result}, "S1", at(time.Second))
			landed := encode(shardRecord{Pool: formatVersion, Shard: "s0", Owner: "w1", Session: "S1", Term: 4, TTL: ttlMillis(testLT)})
			out, done := c.strayRead("s0", landed, etagOf(landed), nil, t0)
			if r, err := parseShard(out); done || err != nil || r.Owner != "" || r.Session != "S1" || r.Term != 4 {
				t.Errorf("strayRead of the first stray's record after a second stray = %s, %v; want a release by S1 at term 4", out, done)
			}
			c.straySettled("s0")
			if h := c.shards["s0"].highest; h != 5 {
				t.Errorf("highest after the strays = %d; want 5", h)
			}
		},
	},
	{
		name: "Claims and takeovers/a stray whose record names another claim is forgotten, not released",
		check: func(t *testing.T, c *core) {
			c.stray("s0", "S1", 4)
			other := encode(shardRecord{Pool: formatVersion, Shard: "s0", Owner: "w2", Session: "S2", Term: 5, TTL: ttlMillis(testLT)})
			if out, done := c.strayRead("s0", other, etagOf(other), nil, t0); out != nil || !done {
				t.Errorf("strayRead of w2's claim = %s, %v; want nothing to write, done", out, done)
			}
			if out, done := c.strayRead("s0", nil, "", fmt.Errorf("read: %w", errFault), t0); out != nil || done {
				t.Errorf("strayRead of a failed read = %s, %v; want nothing, not done (tried at the next tick)", out, done)
			}
		},
	},
	{
		name:    "Claims and takeovers/a record naming a live session that lists nothing there is looked at again half an interval later",
		catches: "unlistedwaits",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1), 0)
			record := encode(shardRecord{Pool: formatVersion, Shard: "s0", Owner: "w2", Session: "S2", Term: 4, TTL: ttlMillis(testLT)})
			// obj is w2's session as the claim reads it; want, when s0 may
			// be tried again.
			try := func(now time.Duration, obj []byte) time.Time {
				a := []attempt{{shard: "s0", data: record, etag: etagOf(record)}}
				c.recordsRead(a, nil, 1, at(now))
				ws := c.clearanceSet(a, members("w1", "w2"), at(now))
				sent := map[string]time.Time{}
				for _, w := range ws {
					if ok, _ := c.sessionRead(w, obj, etagOf(obj), nil, at(now)); ok {
						sent[w] = at(now)
					}
				}
				c.cleared(a, ws, sent, 1, at(now))
				if a[0].ready {
					t.Fatalf("a claim over w2's live record cleared")
				}
				return c.shards["s0"].notBefore
			}
			// A stray of w2's (or a claim it has just won): its next tick
			// releases it (or its next renewal lists it).
			if got, want := try(testFI, ses("w2", "S2", 2)), at(testFI+testFI/2); !got.Equal(want) {
				t.Errorf("s0, named by w2's live session which lists nothing there, set aside until %v; want %v, half an interval on", got.Sub(t0), want.Sub(t0))
			}
			// Listed as ended (a release that failed): its worker takes it
			// back by the orphan rule; the others wait for the session.
			if got, want := try(2*testFI, ses("w2", "S2", 3, endedTerm("s0", 4))), at(2*testFI+testLT); !got.Equal(want) {
				t.Errorf("s0, listed as ended by w2's live session, set aside until %v; want %v, when the session could be over", got.Sub(t0), want.Sub(t0))
			}
		},
	},
	{
		name: "Claims and takeovers/Work returning while leading resigns",
		check: func(t *testing.T, c *core) {
			if act := c.workReturned(&lead{shard: "s0", term: 3}); act != actResign {
				t.Errorf("workReturned while leading = %v; want actResign", act)
			}
		},
	},
	{
		name:    "The session's lease/a renewal answered after the lease's end does not extend it",
		catches: "latereply",
		check: func(t *testing.T, _ *core) {
			if cause := renewalOutcome(nil, at(testLT), at(testLT)); cause != s3lect.ErrLeaseExpired {
				t.Errorf("renewalOutcome of a reply at the lease's end = %v; want ErrLeaseExpired", cause)
			}
		},
	},
	{
		name: "The session's lease/a renewal answered in time extends it, one refused by another write ends the leaderships as lost",
		check: func(t *testing.T, _ *core) {
			if cause := renewalOutcome(nil, at(testLT-time.Millisecond), at(testLT)); cause != nil {
				t.Errorf("renewalOutcome of a reply before the lease's end = %v; want nil (extended)", cause)
			}
			refused := fmt.Errorf("write: %w", store.ErrPreconditionFailed)
			if cause := renewalOutcome(refused, at(0), at(testLT)); cause != s3lect.ErrLeadershipLost {
				t.Errorf("renewalOutcome of a refused renewal = %v; want ErrLeadershipLost", cause)
			}
			if cause := renewalOutcome(errFault, at(0), at(testLT)); cause != s3lect.ErrLeaseExpired {
				t.Errorf("renewalOutcome of a failed renewal = %v; want ErrLeaseExpired", cause)
			}
		},
	},
	{
		name:    "Claims and takeovers/a session of this worker's ID it never opened, seen renewing twice, stops Run with ErrDuplicateID",
		catches: "noduplicatecheck",
		check: func(t *testing.T, _ *core) {
			twins := map[string]twin{}
			noteTwin(twins, ses("w1", "S1", 3), "w1", map[string]bool{"S1": true})
			noteTwin(twins, ses("w1", "T9", 3), "w1", map[string]bool{"S1": true})
			if _, ok := twins["S1"]; ok || len(twins) != 1 {
				t.Fatalf("twins = %v; want only T9 (S1 is this process's own)", twins)
			}
			if err, wait := twinCheck(twins, ses("w1", "T9", 3), "w1"); err != nil || wait {
				t.Errorf("twinCheck of T9 as first seen = %v, %v; want nothing", err, wait)
			}
			if err, wait := twinCheck(twins, ses("w1", "T9", 4), "w1"); err != nil || !wait {
				t.Errorf("twinCheck of T9 advanced once = %v, %v; want wait", err, wait)
			}
			if err, _ := twinCheck(twins, ses("w1", "T9", 6), "w1"); !errors.Is(err, ErrDuplicateID) {
				t.Errorf("twinCheck of T9 advanced twice = %v; want ErrDuplicateID", err)
			}
		},
	},
	{
		name: "Claims and takeovers/a term a session lists is kept whole, above 32 bits too",
		check: func(t *testing.T, c *core) {
			c.readAt("w2", ses("w2", "S2", 1, leads("s0", 1<<40), endedTerm("s1", 7)), 0)
			if got := c.listedTerm("s0", []string{"w2"}); got != 1<<40 {
				t.Errorf("listedTerm(s0) = %d; want %d", got, uint64(1)<<40)
			}
			if got := c.listedTerm("s1", []string{"w2"}); got != 7 {
				t.Errorf("listedTerm(s1) = %d; want 7", got)
			}
			if got := c.listedTerm("s2", []string{"w2"}); got != 0 {
				t.Errorf("listedTerm(s2) = %d; want 0", got)
			}
		},
	},
	{
		name: "The watch/a changed member list makes a look due",
		check: func(t *testing.T, c *core) {
			c.membersRead(*members("w1", "w2"), "e1", "S1", at(0))
			c.looked(c.view(at(0), true), at(0))
			if c.lookDue(at(time.Second)) {
				t.Errorf("lookDue with nothing changed = true; want false")
			}
			c.membersRead(*members("w1", "w2", "w3"), "e2", "S1", at(2*time.Second))
			if !c.lookDue(at(2 * time.Second)) {
				t.Errorf("lookDue after a join = false; want true")
			}
		},
	},
	{
		name: "The watch/a listing showing a new ETag keeps a worker live without a read",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			s := ses("w2", "S2", 1)
			c.readAt("w2", s, 0)
			c.applyListing([]store.Entry{{Key: "p/sessions/w2.json", ETag: etagOf(ses("w2", "S2", 2))}}, at(testLT-time.Second))
			if !c.peers["w2"].live(at(testLT+time.Second), testLT, c.memberTTL["w2"]) {
				t.Errorf("w2 is not live a lease after its last read, though a listing showed a renewal since")
			}
		},
	},
	{
		name:    "Objects/a worker that leads nothing claims nothing until a FrequentInterval after the member list last grew, at most a LeaderTimeout after it was listed",
		catches: "joinrush",
		check: func(t *testing.T, c *core) {
			c.membersRead(*members("w1", "w2"), "e1", "S1", at(0)) // listed at 0
			c.membersRead(*members("w1", "w2", "w3"), "e2", "S1", at(2*time.Second))
			v := c.view(at(testFI), true)
			if _, ok, hold := c.share(v, at(testFI)); ok || !hold.Equal(at(2*time.Second+testFI)) {
				t.Errorf("share a FrequentInterval after it was listed, the list grown at 2s = %v, %v; want false, %v", ok, hold, at(2*time.Second+testFI))
			}
			if !c.assembling(at(testFI)) || !slices.Equal(c.unread(), []string{"w2", "w3"}) {
				t.Errorf("assembling = %v, unread = %v; want true and [w2 w3] (it reads only members it never read)", c.assembling(at(testFI)), c.unread())
			}
			c.readAt("w2", ses("w2", "S2", 1), testFI)
			if !slices.Equal(c.unread(), []string{"w3"}) {
				t.Errorf("unread after w2's object was read = %v; want [w3]", c.unread())
			}
			// The list grows until just before a lease: the wait ends at the lease.
			c.membersRead(*members("w1", "w2", "w3", "w4"), "e3", "S1", at(testLT-time.Second))
			if _, ok, hold := c.share(v, at(testLT)); !ok || !hold.Equal(at(testLT)) {
				t.Errorf("share a LeaderTimeout after it was listed = %v, %v; want true, %v", ok, hold, at(testLT))
			}
			// A worker that leads a shard waits only its FrequentInterval.
			c.membersRead(*members("w1", "w2", "w3", "w4", "w5"), "e4", "S1", at(2*testFI))
			c.mine["s0"] = &lead{shard: "s0", term: 1}
			if _, ok, _ := c.share(v, at(2*testFI)); !ok || c.assembling(at(2*testFI)) {
				t.Errorf("share of a worker that leads a shard, the list grown just now = %v (assembling %v); want true, false", ok, c.assembling(at(2*testFI)))
			}
		},
	},
	{
		name:    "The watch/at a death, a worker at its share looks an interval later, once for each live set",
		catches: "eagerlooks",
		check: func(t *testing.T, c *core) {
			c.lookLive = []string{"w1", "w2", "w3"}
			targets := map[string]int{"w1": 3, "w2": 3}
			died := view{live: []string{"w1", "w2"}, counts: map[string]int{"w1": 3, "w2": 2}, targets: targets}
			if !c.deferLook(died) {
				t.Errorf("deferLook at w3's death, w1 at its share = false; want true (w2, below its share, looks at once)")
			}
			if c.deferLook(died) {
				t.Errorf("deferLook at the next tick, same live set = true; want false (once for each live set)")
			}
			c.deferLive = nil
			below := view{live: died.live, counts: map[string]int{"w1": 2, "w2": 3}, targets: targets}
			if c.deferLook(below) {
				t.Errorf("deferLook with w1 below its share = true; want false")
			}
			came := view{live: []string{"w1", "w2", "w4"}, counts: map[string]int{"w1": 2, "w2": 2}, targets: map[string]int{"w1": 2, "w2": 2, "w4": 2}}
			if c.deferLook(came) {
				t.Errorf("deferLook with w4 come alive = true; want false (some hand over)")
			}
		},
	},
	{
		name:    "The watch/a failed listing after one that succeeded is no news: who the listings showed live stays live, and no read is aged from before it",
		catches: "listfaillooks",
		check: func(t *testing.T, c *core) {
			c.members = []string{"w1", "w2"}
			c.readAt("w2", ses("w2", "S2", 1), 0)
			s2 := ses("w2", "S2", 2)
			listed := []store.Entry{{Key: "p/sessions/w2.json", ETag: etagOf(s2)}}
			c.applyListing(listed, at(testLT-time.Second))
			if reread := c.listFailed(); len(reread) != 0 {
				t.Errorf("a failed listing rereads %v, though the listing before it showed w2's renewal since its read; want none", reread)
			}
			if !c.missedListing() {
				t.Errorf("missedListing after one failed listing = false; want true (the tick looks only if a look is due)")
			}
			if !c.peers["w2"].live(at(testLT+time.Second), testLT, c.memberTTL["w2"]) {
				t.Errorf("w2 is not live after a failed listing, though the listing before it showed a renewal a second before the lease of its last read ran out")
			}
			// The next listing shows the same write: w2 counts live from
			// the first listing that showed it, but a read of it is aged
			// from that next listing only, not from before the failure.
			c.applyListing(listed, at(testLT+2*time.Second))
			if c.listFails = 0; c.peers["w2"].liveUntil(testLT, 0) != at(2*testLT-time.Second) {
				t.Errorf("w2 live until %v after a failed listing and one showing the same write; want %v (from the first listing that showed it)", c.peers["w2"].liveUntil(testLT, 0), at(2*testLT-time.Second))
			}
			c.readAt("w2", s2, testLT+3*time.Second)
			if got, want := c.peers["w2"].seenAt, at(testLT+2*time.Second); !got.Equal(want) {
				t.Errorf("a read of the write listed before and after a failed listing is aged from %v; want %v (the listing after the failure)", got, want)
			}
			c.listFails = 0
			if reread := c.listFailed(); !slices.Equal(reread, []string{"w2"}) {
				t.Errorf("a failed listing after a read no listing has moved past rereads %v; want [w2]", reread)
			}
			c.listFailed()
			if c.missedListing() {
				t.Errorf("missedListing after two failed listings in a row = true; want false (the tick looks, as on a store that does not list)")
			}
		},
	},
	{
		name:    "The watch/a tick waits for its listing twice the longest recent one, at least a quarter interval and at most half",
		catches: "fixedlistwait",
		check: func(t *testing.T, c *core) {
			if w := c.listWait(); w != testFI/4 {
				t.Errorf("listWait with no listing yet = %v; want %v", w, testFI/4)
			}
			c.noteListTook(testFI/5, false, c.listWait())
			if w := c.listWait(); w != 2*testFI/5 {
				t.Errorf("listWait after a listing of a fifth of an interval = %v; want %v", w, 2*testFI/5)
			}
			c.noteListTook(time.Millisecond, true, 2*testFI/5) // cut off at its wait: it took at least that
			if w := c.listWait(); w != testFI/2 {
				t.Errorf("listWait after a listing cut off at %v = %v; want %v (at most half an interval)", 2*testFI/5, w, testFI/2)
			}
			c.listTook = 0
			c.noteListTook(testFI/5, false, c.listWait())
			c.noteListTook(time.Millisecond, false, c.listWait())
			if want := 2 * (testFI/5 - testFI/5/8); c.listWait() != max(want, testFI/4) {
				t.Errorf("listWait after a quicker listing = %v; want %v (shrinks by an eighth)", c.listWait(), max(want, testFI/4))
			}
		},
	},
}

func TestCoreRules(t *testing.T) {
	defer setMutation(t)()
	for _, r := range coreRows {
		t.Run(r.name, func(t *testing.T) {
			r.check(t, newTestCore("s0", "s1", "s2", "s3", "s4", "s5"))
		})
	}
}

// TestCoreRowsNameSections: every row is named after a section of
// docs/pool-protocol.md, so that a reader finds the rule it tests there.
func TestCoreRowsNameSections(t *testing.T) {
	doc, err := os.ReadFile("../docs/pool-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections = append(sections, h)
		} else if h, ok := strings.CutPrefix(line, "### "); ok {
			sections = append(sections, h)
		}
	}
	seen := map[string]bool{}
	check := func(n string) {
		sec, _, ok := strings.Cut(n, "/")
		if !ok || !slices.Contains(sections, sec) {
			t.Errorf("row %q is not named section/rule after a section of docs/pool-protocol.md (%q)", n, sections)
		}
		if seen[n] {
			t.Errorf("two rows named %q", n)
		}
		seen[n] = true
	}
	for _, r := range claimRows {
		check(r.name)
	}
	for _, r := range coreRows {
		check(r.name)
	}
	for _, r := range tickRows {
		check(r.name)
	}
}
