package pool

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestPeerSteadyStateReads checks peer mode's price (docs/pool-protocol.md,
// "Peer mode"): once the shards are spread, each worker makes one PUT per
// FrequentInterval and lists the store and reads the member list once per
// InfrequentInterval (2 × FrequentInterval/InfrequentInterval reads per
// worker per interval), whatever the number of workers; the rest of the
// watch goes to the hub over the network, one request per worker per
// interval.
func TestPeerSteadyStateReads(t *testing.T) {
	for _, tc := range []struct{ workers, shards int }{{10, 1000}, {30, 300}} {
		t.Run(fmt.Sprintf("workers=%d/shards=%d", tc.workers, tc.shards), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := simworld.NewCalmPeerNet()
				g := newGroup(t, 0, tc.shards)
				g.net = net
				for i := range tc.workers {
					g.add(fmt.Sprintf("w%02d", i+1))
				}
				defer g.stop()
				g.settle(t)
				w := len(g.workers)
				const intervals = 48 // 8 InfrequentIntervals
				before, asked := g.calls(), net.Asked("w01:443")
				time.Sleep(intervals * testFI)
				after := g.calls()
				puts := after.puts - before.puts
				reads := after.gets + after.lists - before.gets - before.lists
				hub := net.Asked("w01:443") - asked
				t.Logf("per worker per FrequentInterval: %.2f PUT, %.3f reads (%d GET, %d LIST), %.2f requests to the hub",
					float64(puts)/intervals/float64(w), float64(reads)/intervals/float64(w),
					after.gets-before.gets, after.lists-before.lists, float64(hub)/intervals/float64(w-1))
				if limit := uint64(w * (intervals + 1)); puts > limit {
					t.Errorf("%d PUTs over %d intervals for %d workers; want at most one per worker per interval (%d)", puts, intervals, w, limit)
				}
				// A listing and a member list read per InfrequentInterval
				// (6 intervals), one more of each at a window's edge.
				if limit := uint64(2 * w * (intervals/peerIIFactor + 1)); reads > limit {
					t.Errorf("%d reads over %d intervals for %d workers; want at most 2 per worker per InfrequentInterval (%d)", reads, intervals, w, limit)
				}
				if lo, hi := (w-1)*(intervals-1), (w-1)*(intervals+1); hub < lo || hub > hi { // every tick, store listings' too
					t.Errorf("%d requests to the hub over %d intervals from %d workers; want one per worker per interval (%d to %d)", hub, intervals, w-1, lo, hi)
				}
				g.check(t)
			})
		})
	}
}

// TestPeerCrashTakeoverInstant kills the hub, and a worker that is not the
// hub, of 3 over 30 shards in peer mode at 6 points of the renewal cycle,
// on a store that answers at once and on one whose calls take 10 ms each
// way, and checks the instant at which each of the victim's shards is
// claimed. Every worker asks the hub at the watch's offset after the
// renewal slot (FrequentInterval/16 plus twice the renewals' round trip,
// 4d), the hub answers once every live worker has reported, and the
// answer naming the victim's last renewal ages that sighting from its
// arrival; at the next tick the victim is missing (it did not report, or
// the hub does not answer), the store is listed and shows the same ETag.
// So the claims land FrequentInterval/16 + LeaderTimeout + 7d after the
// slot of the victim's last renewal, as at the frequent pace (9d there:
// a listing's round trip instead of the hub's answer). (A victim killed
// between its renewal and its report, in the first sixteenth of the
// cycle, is found by the store's listing at that tick instead, an eighth
// of an interval later; these phases are after it.)
func TestPeerCrashTakeoverInstant(t *testing.T) {
	for _, d := range []time.Duration{0, 10 * time.Millisecond} {
		for _, victim := range []int{0, 1} {
			for phase := range 6 {
				t.Run(fmt.Sprintf("d=%v/victim=w%d/phase=%d", d, victim+1, phase), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						peerTakeoverInstant(t, d, victim, phase)
					})
				})
			}
		}
	}
}

func peerTakeoverInstant(t *testing.T, d time.Duration, vi, phase int) {
	takeoverInstant(t, d, testLT, phase, simworld.NewCalmPeerNet(), vi, 7)
}

// TestPeerJoinAndDeath runs 3 workers over 40 shards in peer mode with an
// InfrequentInterval of five minutes, at several phases of the
// renewal cycle, adds a fourth, and then kills one: each time every live
// worker holds its share within 2 × LeaderTimeout, as at the frequent
// pace. The joiner is in the member list before it reports to the hub;
// the hub hears of that list from its report and reads it, and its
// digest carries the list's new ETag to the others, which read it then
// (with -sim.mutate=peermembers they read it only every
// InfrequentInterval, and the join waits for that).
func TestPeerJoinAndDeath(t *testing.T) {
	defer setMutation(t)()
	for phase := range phases {
		t.Run(fmt.Sprintf("phase=%d", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGroup(t, 0, 40)
				g.net, g.ii = simworld.NewCalmPeerNet(), 300*time.Second
				for _, id := range []string{"w1", "w2", "w3"} {
					g.add(id)
				}
				defer g.stop()
				time.Sleep(4*testLT + time.Duration(phase)*testFI/phases)
				ids := []string{"w1", "w2", "w3", "w4"}
				if c := g.counts(); !within(c, ids[:3], 13, 14, 40) {
					t.Fatalf("before the join: %s; want 13 or 14 each", spread(c))
				}
				g.add("w4")
				time.Sleep(2 * testLT)
				if c := g.counts(); !within(c, ids, 10, 10, 40) {
					t.Errorf("2 × LeaderTimeout after w4 joined: %s; want 10 each", spread(c))
				}
				victim := g.workers[phase%4]
				victim.st.dead.Store(true)
				g.net.Crash(victim.id+":443", nil)
				time.Sleep(2 * testLT)
				live := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == victim.id })
				if c := g.counts(); !within(c, live, 13, 14, 40) {
					t.Errorf("2 × LeaderTimeout after %s was killed: %s; want 13 or 14 on each of %v", victim.id, spread(c), live)
				}
				g.check(t)
			})
		})
	}
}

// TestPeerDoubt checks the rule that bounds a hub that says a worker
// renewed when it did not: a listing of the store that shows a worker's
// session unchanged since the listing before, while a digest named
// another ETag for it in between, stops the digests from standing in for
// a listing for four leases (-sim.mutate=nodoubt breaks it); a listing
// that shows a new ETag, or digests that named none other, doubt nothing.
func TestPeerDoubt(t *testing.T) {
	defer setMutation(t)()
	t0 := time.Unix(1e9, 0)
	entry := func(etag string) []store.Entry {
		return []store.Entry{{Key: "p/sessions/w2.json", ETag: etag}}
	}
	for _, tc := range []struct {
		name   string
		digest string // what a digest between the two listings names ("": none)
		second string // what the second listing shows
		doubt  bool
	}{
		{"unchanged after a digest named another", "made-up", "e1", true},
		{"renewed as the digest said", "e2", "e2", false},
		{"renewed past the digest", "e2", "e3", false},
		{"unchanged, no digest between", "", "e1", false},
		{"unchanged, the digest named the same", "e1", "e1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCore("x")
			c.applyListing(entry("e1"), t0)
			if tc.digest != "" {
				c.applyDigest(digest{Sessions: map[string]peerSession{"w2": {ETag: tc.digest}}}, t0.Add(testFI))
			}
			at := t0.Add(2 * testFI)
			c.applyListing(entry(tc.second), at)
			if got := at.Before(c.doubtUntil); got != tc.doubt {
				t.Errorf("doubted = %v; want %v", got, tc.doubt)
			}
			if tc.doubt && !c.doubtUntil.Equal(at.Add(4*testLT)) {
				t.Errorf("doubted until %v after the listing; want four leases (%v)", c.doubtUntil.Sub(at), 4*testLT)
			}
		})
	}
}

// TestPeerDistrust checks that a worker a listing showed a digest wrong
// about is not made live by digests again until a listing shows its
// object changed. Something answering at a dead worker's address with an
// old digest that names the worker (a process of another time) kept it
// live for ever before, a lease at each time the doubt ran out, and its
// shards unled (seed 889456 of the shard simulation); a hub that makes up
// a new ETag each round, likewise, and a read that finds the worker's
// object gone does not make it trusted. -sim.mutate=peertrusted breaks
// those rows; a worker whose renewal a listing showed since is trusted
// again.
func TestPeerDistrust(t *testing.T) {
	defer setMutation(t)()
	t0 := time.Unix(1e9, 0)
	entry := func(etag string) []store.Entry {
		return []store.Entry{{Key: "p/sessions/w2.json", ETag: etag}}
	}
	named := func(etag string) digest {
		return digest{Sessions: map[string]peerSession{"w2": {ETag: etag}}}
	}
	for _, tc := range []struct {
		name    string
		renewed bool   // a listing during the doubt shows w2's object changed
		gone    bool   // a read during the doubt finds w2's object gone
		again   string // what the digest after the doubt names
		live    bool
	}{
		{"the same old digest again", false, false, "stale", false},
		{"another made-up ETag", false, false, "made-up", false},
		{"after a read found the object gone", false, true, "made-up", false},
		{"after a listing showed a renewal", true, false, "e3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCore("x")
			c.members = []string{"w1", "w2"}
			c.applyListing(entry("e1"), t0)
			c.applyDigest(named("stale"), t0.Add(testFI))
			doubted := t0.Add(2 * testFI)
			c.applyListing(entry("e1"), doubted)
			if !doubted.Before(c.doubtUntil) {
				t.Fatalf("the listing after the digest doubted nothing")
			}
			if tc.renewed {
				c.applyListing(entry("e2"), doubted.Add(testFI))
			}
			if tc.gone {
				c.sessionRead("w2", nil, "", nil, doubted.Add(testFI))
				c.doubt(c.peers["w2"], "", doubted.Add(testFI)) // as readSessions does
			}
			now := c.doubtUntil.Add(testFI)
			if slices.Contains(c.view(now, true).live, "w2") {
				t.Fatalf("w2 counts live at %v, before the digest after the doubt", now.Sub(t0))
			}
			c.applyDigest(named(tc.again), now)
			if got := slices.Contains(c.view(now, true).live, "w2"); got != tc.live {
				t.Errorf("w2 counts live after the digest named %q: %v; want %v", tc.again, got, tc.live)
			}
		})
	}
}

// TestPeerOldDigestAtADeadHubsAddress kills the hub, w1, whose
// LeaderTimeout is six times the others', and leaves something answering
// at its address with a digest of another time: w1 with an ETag it never
// wrote, the others with the ETags they had. Every shard is led again by
// the survivors within the bound of a hub that says a dead worker renewed
// (docs/pool-protocol.md, "Peer mode"): 2 × InfrequentInterval + w1's
// LeaderTimeout, plus a look. With -sim.mutate=peertrusted the old
// digest brings w1 back to life each time the survivors' doubt (four of
// their leases, shorter than w1's) runs out, and its shards stay unled
// (the shard simulation's seed 889456, here in a pool of four; a
// reviewer's case).
func TestPeerOldDigestAtADeadHubsAddress(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		const victimLT = 6 * testLT
		g := newGroup(t, 0, 40)
		g.net, g.lts = simworld.NewCalmPeerNet(), map[string]time.Duration{"w1": victimLT}
		ids := []string{"w1", "w2", "w3", "w4"}
		for _, id := range ids {
			g.add(id)
		}
		defer g.stop()
		time.Sleep(6 * testLT)
		if c := g.counts(); !within(c, ids, 10, 10, 40) {
			t.Fatalf("before the kill: %s; want 10 each", spread(c))
		}
		synctest.Wait()
		old := digest{Pool: formatVersion, Prefix: "pool/", Worker: "w1", Sessions: map[string]peerSession{}}
		for _, id := range ids[1:] {
			data, etag, err := g.mem.Get(t.Context(), "pool/sessions/"+id+".json")
			if err != nil {
				t.Fatal(err)
			}
			old.Sessions[id] = peerSession{ETag: etag, Sum: peerSum(sha256.Sum256(data))}
		}
		old.Sessions["w1"] = peerSession{ETag: "of-another-time", Sum: peerSum([32]byte{})}
		g.workers[0].st.dead.Store(true)
		g.net.Crash("w1:443", encode(old))
		ii := time.Duration(peerIIFactor) * testFI
		time.Sleep(2*ii + victimLT + testLT)
		if c := g.counts(); !within(c, ids[1:], 13, 14, 40) {
			t.Errorf("2 × InfrequentInterval + w1's LeaderTimeout + a lease after w1 was killed: %s; want 13 or 14 on each of %v", spread(c), ids[1:])
		}
		g.check(t)
	})
}

// TestPeerWorkerCutOffFromTheHub cuts one worker of 4 off from the hub
// (its requests are refused) while it keeps renewing: the hub's digests
// leave it out, so the others list the store at every tick instead of
// taking the digests for a listing, and see its renewals there. Nobody
// reads a session object (no look: the live set never changes) and no
// shard moves. With -sim.mutate=peerpartial the digests stand in for the
// listing, the cut-off worker's last reported renewal ages, it counts as
// dead a lease later, and every worker looks (reads the session objects)
// again and again.
func TestPeerWorkerCutOffFromTheHub(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		var sessionReads sync.Map // worker -> *atomic.Int64
		g := newGroup(t, 0, 40)
		g.net = simworld.NewCalmPeerNet()
		g.wrap = func(id string, st store.Store) store.Store {
			n := &atomic.Int64{}
			sessionReads.Store(id, n)
			return countSessionReads{st, n}
		}
		cut := &atomic.Bool{}
		g.peerClient = func(id string) *http.Client {
			if id != "w4" {
				return &http.Client{Transport: g.net}
			}
			return &http.Client{Transport: cutTransport{g.net, cut}}
		}
		for _, id := range []string{"w1", "w2", "w3", "w4"} {
			g.add(id)
		}
		defer g.stop()
		time.Sleep(4 * testLT)
		ids := []string{"w1", "w2", "w3", "w4"}
		if c := g.counts(); !within(c, ids, 10, 10, 40) {
			t.Fatalf("before the cut: %s; want 10 each", spread(c))
		}
		var handed uint64
		for _, w := range g.workers {
			handed -= w.p.Stats().Handovers
		}
		before := map[string]int64{}
		for _, id := range ids[:3] {
			v, _ := sessionReads.Load(id)
			before[id] = v.(*atomic.Int64).Load()
		}
		cut.Store(true)
		time.Sleep(5 * testLT)
		for _, id := range ids[:3] {
			v, _ := sessionReads.Load(id)
			if n := v.(*atomic.Int64).Load() - before[id]; n != 0 {
				t.Errorf("%s read session objects %d times in 5 leases while w4 could not reach the hub; want none (w4 renews: nothing to look at)", id, n)
			}
		}
		for _, w := range g.workers {
			handed += w.p.Stats().Handovers
		}
		if c := g.counts(); !within(c, ids, 10, 10, 40) || handed != 0 {
			t.Errorf("after 5 leases: %s, %d handovers; want 10 each and none", spread(c), handed)
		}
		g.check(t)
	})
}

// countSessionReads counts the reads of session objects through it.
type countSessionReads struct {
	store.Store
	n *atomic.Int64
}

func (c countSessionReads) Get(ctx context.Context, key string) ([]byte, string, error) {
	if strings.Contains(key, "/sessions/") {
		c.n.Add(1)
	}
	return c.Store.Get(ctx, key)
}

func (c countSessionReads) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	return c.Store.(store.Lister).List(ctx, prefix)
}

// cutTransport refuses every request once cut is set.
type cutTransport struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("dial: connection refused")
	}
	return c.rt.RoundTrip(req)
}

// TestPeerHandlerRefusesBadRequests checks that PeerHandler names what is
// wrong with a request it cannot answer, and answers nothing then.
func TestPeerHandlerRefusesBadRequests(t *testing.T) {
	p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: "w1", Shards: []string{"a"}, Logger: quiet,
		Work: func(context.Context, string, *s3lect.Leadership) {}, PeerMode: true, ServerAddr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	off, err := New(Config{Store: memstore.New(), Prefix: "q/", ID: "w1", Shards: []string{"a"}, Logger: quiet,
		Work: func(context.Context, string, *s3lect.Leadership) {}})
	if err != nil {
		t.Fatal(err)
	}
	h := PeerHandler(p, off)
	for _, tc := range []struct {
		name, method, target string
		running              bool
		code                 int
		says                 string
	}{
		{"another path", "GET", "/other?prefix=p/", true, 404, "404"},
		{"a POST", "POST", PeerPath + "?prefix=p/&worker=w2", true, 405, "only GET"},
		{"no such pool", "GET", PeerPath + "?prefix=x/&worker=w2", true, 404, `prefix "x/"`},
		{"a pool not in peer mode", "GET", PeerPath + "?prefix=q/&worker=w2", true, 404, `prefix "q/"`},
		{"no worker", "GET", PeerPath + "?prefix=p/", true, 400, "worker must name"},
		{"a worker with a slash", "GET", PeerPath + "?prefix=p/&worker=a/b", true, 400, "without slashes"},
		{"this worker's own ID", "GET", PeerPath + "?prefix=p/&worker=w1", true, 409, "two workers were given one ID"},
		{"a wait too long", "GET", PeerPath + "?prefix=p/&worker=w2&wait=1h", true, 400, "from 0 to 2.5s"},
		{"a wait that is no duration", "GET", PeerPath + "?prefix=p/&worker=w2&wait=soon", true, 400, "must be a duration"},
		{"an ETag too long", "GET", PeerPath + "?prefix=p/&worker=w2&etag=" + strings.Repeat("e", 2000), true, 400, "at most 1,024 bytes"},
		{"an ETag without its content's sum", "GET", PeerPath + "?prefix=p/&worker=w2&etag=e1&sum=xyz", true, 400, "sum must name"},
		{"the pool not running", "GET", PeerPath + "?prefix=p/&worker=w2", false, 503, "not running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.running {
				p.hub.open()
				defer func() { p.hub.close(); p.hub.stopped = make(chan struct{}) }()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("%s %s: %d %q; want %d saying %q", tc.method, tc.target, rec.Code, rec.Body.String(), tc.code, tc.says)
			}
		})
	}
	// A good request, running: the digest names the reporter.
	p.hub.open()
	defer p.hub.close()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", PeerPath+"?prefix=p/&worker=w2&etag=e7&sum="+strings.Repeat("ab", 16)+"&wait=0s", nil))
	var d digest
	if err := json.Unmarshal(rec.Body.Bytes(), &d); rec.Code != 200 || err != nil || d.Sessions["w2"].ETag != "e7" || d.Worker != "w1" || d.Prefix != "p/" {
		t.Errorf("a good request: %d %q; want a digest of w1 naming w2's e7", rec.Code, rec.Body.String())
	}
}

// TestAskRefusesBadAnswers checks that a worker takes nothing from an
// answer that is not its hub's digest for its pool, and says why.
func TestAskRefusesBadAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := simworld.NewCalmPeerNet()
		p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: "w2", Shards: []string{"a"}, Logger: quiet,
			Work: func(context.Context, string, *s3lect.Leadership) {}, PeerMode: true, ServerAddr: "w2:443", PeerClient: &http.Client{Transport: net}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			h    http.HandlerFunc
			says string
		}{
			{"refused", nil, "connection refused"},
			{"a 503", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "not running", 503) }, "503"},
			{"not JSON", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>")) }, "not a pool digest"},
			{"another pool's", func(w http.ResponseWriter, _ *http.Request) {
				w.Write(encode(digest{Pool: formatVersion, Prefix: "other/", Worker: "w1"}))
			}, "another process at that address"},
			{"another worker's", func(w http.ResponseWriter, _ *http.Request) {
				w.Write(encode(digest{Pool: formatVersion, Prefix: "p/", Worker: "w9"}))
			}, "another process at that address"},
			{"too long", func(w http.ResponseWriter, _ *http.Request) { w.Write(make([]byte, maxDigest+10)) }, "longer than"},
			{"never answers", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "deadline exceeded"},
		} {
			addr := strings.ReplaceAll(tc.name, " ", "-") + ":443"
			if tc.h != nil {
				net.Add(addr, tc.h)
			}
			_, err := p.ask(context.Background(), "w1", addr, peerSession{ETag: "e1", Sum: strings.Repeat("0", 32)}, "m1", time.Second)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: ask() error = %v; want one saying %q", tc.name, err, tc.says)
			}
		}
	})
}
