package s3lect

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// Scenarios from an adversarial review of protocol version 3, inside the
// model of docs/protocol.md (clock rates exact, a store that honours
// conditional writes, only the lockfile deleted, never the term object):
// no elector leads a recreated lockfile while another leadership's lease
// may be live (section 4), the term object's ttl never falls (1.1), and an
// operator's step-down is waited out in full (11).

// hookStore runs before ahead of each call; before may sleep (in the
// bubble's virtual time) or fail the call.
type hookStore struct {
	store.Store
	before func(op, key string) error
}

func (h hookStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := h.before("get", key); err != nil {
		return nil, "", err
	}
	return h.Store.Get(ctx, key)
}

func (h hookStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := h.before("put", key); err != nil {
		return "", err
	}
	return h.Store.PutIfMatch(ctx, key, data, etag)
}

// once returns a hook that sleeps d on the first call of op on key only.
func delayFirst(op, key string, d time.Duration) func(string, string) error {
	var mu sync.Mutex
	done := false
	return func(o, k string) error {
		mu.Lock()
		hit := !done && o == op && k == key
		if hit {
			done = true
		}
		mu.Unlock()
		if hit {
			time.Sleep(d)
		}
		return nil
	}
}

// TestRecreatedLockfileWaitsOutATakeoverSeenInFlight: D reads the lockfile absent, and
// its takeover's read of the term object falls between C's term write and
// C's create. D watches the absence for a lease from that read (section 4)
// but misses C's record (its reads fail while C leads). The lockfile alone
// is then deleted under C's live lease (the term object stays). D's next
// read finds the lockfile absent, counts it as the same sighting as its
// first, finds the term object unchanged, and creates the lockfile at once
// while C's lease is live.
func TestRecreatedLockfileWaitsOutATakeoverSeenInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out := make(chan won, 2)
		termKey := testKey + termSuffix

		// Both read the lockfile absent at +0; C raises the term object at
		// +0 and creates the lockfile at +200ms; D reads the term object at
		// +100ms, in between.
		c := newNodeWith(t, hookStore{mem, delayFirst("put", testKey, 200*time.Millisecond)}, testConfig(nil, "c"))
		d := newNodeWith(t, hookStore{mem, delayFirst("get", termKey, 100*time.Millisecond)}, testConfig(nil, "d"))
		d.campaign(t.Context(), out)
		c.campaign(t.Context(), out)

		wc := mustWin(t, out)
		if wc.n != c {
			t.Fatalf("first winner %s; want c", wc.n.id)
		}
		cEnded := endedAt(wc.l)
		d.fs.set(func(f *faultStore) { f.failAll = true }) // D's reads fail from here (its next is due at +1s)

		time.Sleep(5 * time.Second) // C renews; D sees none of it
		for _, cl := range d.fs.log() {
			if cl.op == "get" && cl.key == testKey && cl.err == nil && cl.etag != "" {
				t.Fatalf("d read c's record at %v; the scenario needs it to miss every one", cl.at)
			}
		}
		puts := c.fs.count("put")
		for c.fs.count("put") == puts {
			time.Sleep(time.Millisecond)
		}
		mem.Delete(testKey)                                  // only the lockfile; the term object stays
		c.fs.set(func(f *faultStore) { f.blackhole = true }) // C cut off right after its renewal
		lastC := lastPut(c)
		d.fs.set(func(f *faultStore) { f.failAll = false })

		wd := mustWin(t, out)
		if wd.n != d {
			t.Fatalf("second winner %s; want d", wd.n.id)
		}
		if end := cEnded(); end.IsZero() || wd.at.Before(end) {
			t.Errorf("d won %v after c's last write, while c's leadership stayed live (ended %v after it): two live leaders",
				wd.at.Sub(lastC.at), func() any {
					if end.IsZero() {
						return "not yet"
					}
					return end.Sub(lastC.at)
				}())
		}
	})
}

// TestTermObjectTTLNeverFalls: a 1s/3s elector B and a 5s/15s
// elector C race for the same expired record. C raises the term object
// and wins the lockfile; B's term read comes after C's term write, so B
// raises the term object again (with its own ttl, 3 s) and then loses the
// lockfile. The term object now states 3 s while the live leadership is
// C's 15 s lease. The lockfile alone is deleted; a freshly started 1s/3s
// elector D watches the absence for max(own, the term object's ttl) = 3 s
// (section 4) and creates the lockfile while C's lease is live.
func TestTermObjectTTLNeverFalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out, outB := make(chan won, 2), make(chan won, 1)
		termKey := testKey + termSuffix
		x := Record{LeaderID: "a", LeaderAddr: "a:1", LastUpdated: time.Now().UTC(), Term: 1,
			Lease: "00000000000000aa", TTL: 15000}
		mem.Set(testKey, x.encode())
		mem.Set(termKey, []byte(`{"term":1,"by":"a","lease":"00000000000000aa","ttl":15000}`))

		slow := defaultsConfig(nil, "c")
		c := newNodeWith(t, mem, slow)
		b := newNodeWith(t, hookStore{mem, delayFirst("get", termKey, 300*time.Millisecond)}, testConfig(nil, "b"))
		b.campaign(t.Context(), outB)
		c.campaign(t.Context(), out)

		wc := mustWin(t, out)
		if wc.n != c {
			t.Fatalf("first winner %s; want c", wc.n.id)
		}
		cEnded := endedAt(wc.l)
		time.Sleep(time.Second) // B's term write and its refused takeover
		data, _, err := mem.Get(t.Context(), termKey)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("term object after the race: %s", data)

		mem.Delete(testKey)                                  // only the lockfile
		c.fs.set(func(f *faultStore) { f.blackhole = true }) // C cut off: its lease runs to its end
		lastC := lastPut(c)
		b.e.Close() // B out of the way: it saw C's record and would wait it out

		d := newNodeWith(t, mem, testConfig(nil, "d"))
		d.campaign(t.Context(), out)
		wd := mustWin(t, out)
		if wd.n != d {
			t.Fatalf("second winner %s; want d", wd.n.id)
		}
		if end := cEnded(); end.IsZero() || wd.at.Before(end) {
			t.Errorf("d won %v after c's last write, while c's 15 s lease was live: two live leaders", wd.at.Sub(lastC.at))
		}
	})
}

// TestOperatorStepDownIsWaitedOutInFull: an operator ends a 5s/15s
// leadership the way docs/protocol.md, 3.1, tells operator tools to (the
// current record with a new lease value, held 0, lastUpdated now, the same
// ttl), right after one of its renewals, and the old leader is cut off
// from the store at once, so it never learns of it. The 1s/3s followers
// must wait the record's ttl in full from their first sight of it, and
// must not win while the old leader's context is live.
func TestOperatorStepDownIsWaitedOutInFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out := make(chan won, 3)
		slow := defaultsConfig(nil, "a")
		a := newNodeWith(t, mem, slow)
		a.campaign(t.Context(), out)
		old := mustWin(t, out)
		oldEnd := endedAt(old.l)
		var followers []*node
		for _, id := range []string{"b", "c"} {
			n := newNodeWith(t, mem, testConfig(nil, id))
			n.campaign(t.Context(), out)
			followers = append(followers, n)
		}
		time.Sleep(40 * time.Second)
		if err := old.l.Context().Err(); err != nil {
			t.Fatalf("the 5s/15s leader lost its leadership to 1s/3s followers before the step-down: %v", context.Cause(old.l.Context()))
		}
		puts := a.fs.count("put")
		for a.fs.count("put") == puts {
			time.Sleep(time.Millisecond)
		}
		a.fs.set(func(f *faultStore) { f.blackhole = true })

		data, tag, err := mem.Get(t.Context(), testKey)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := ParseRecord(data)
		if err != nil {
			t.Fatal(err)
		}
		rec.Lease, rec.Held, rec.LastUpdated = "0123456789abcdef", 0, time.Now().UTC()
		opTag, err := mem.PutIfMatch(t.Context(), testKey, rec.encode(), tag)
		if err != nil {
			t.Fatal(err)
		}
		w := mustWin(t, out)
		seen := firstSeen(t, w.n, opTag)
		if earliest := seen.Add(DefaultLeaderTimeout); w.at.Before(earliest) {
			t.Errorf("%s won %v after first seeing the operator's record; want at least its ttl %v",
				w.n.id, w.at.Sub(seen), DefaultLeaderTimeout)
		}
		if end := oldEnd(); end.IsZero() || w.at.Before(end) {
			t.Errorf("%s won while the old leader's context was live", w.n.id)
		}
		_ = followers
	})
}
