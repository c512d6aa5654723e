package s3lect

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store/memstore"
)

// Failover in virtual time, where the takeover time is not simply
// LeaderTimeout after the last write was seen: an infrequent follower
// after a crash (docs/protocol.md, 3.2), a peer-mode follower after an
// abrupt crash and against a stale peer (section 5).

// TestInfrequentFollowerTakesOverByElapsedTime: the leader renews once
// more after a stable follower's read, then crashes. The follower's next
// read sees that renewal for the first time; under observed silence alone
// it would wait LeaderTimeout from there. The leader's reported time
// places the renewal's send at most about one FrequentInterval after the
// earlier sighting, so the follower takes over at that read.
func TestInfrequentFollowerTakesOverByElapsedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		out := make(chan won, 2)
		a := newNode(t, mem, "a")
		a.campaign(t.Context(), out)
		old := mustWin(t, out)
		time.Sleep(testFI / 2) // b reads half-way between a's renewals
		b := newNode(t, mem, "b")
		b.campaign(t.Context(), out)
		time.Sleep(30 * time.Second) // b settles into the infrequent interval
		reads := b.fs.count("get")
		for b.fs.count("get") == reads {
			time.Sleep(time.Millisecond)
		}
		sighting := b.fs.log()[len(b.fs.log())-1].at
		puts := old.n.fs.count("put")
		for old.n.fs.count("put") == puts {
			time.Sleep(time.Millisecond)
		}
		old.n.fs.set(func(f *faultStore) { f.blackhole = true }) // crash right after one more renewal
		last := lastPut(old.n)

		w := mustWin(t, out)
		if w.n != b {
			t.Fatalf("winner %s; want b", w.n.id)
		}
		want := sighting.Add(testII) // b's next read: the elapsed-time bound has passed by then
		if !w.at.Equal(want) {
			t.Errorf("takeover at %v after the sighting; want %v (observed silence alone: %v)",
				w.at.Sub(sighting), want.Sub(sighting), testII+testLT)
		}
		if w.at.Before(last.at.Add(testLT - testLT/10)) {
			t.Errorf("takeover %v after the dead leader's last write; its lease ran %v", w.at.Sub(last.at), testLT-testLT/10)
		}
	})
}

// peerGroup elects a in peer mode with b following, and lets b settle on
// long-polling a.
func peerGroup(t *testing.T, net *simworld.PeerNet) (a, b *node, lead won, out chan won) {
	t.Helper()
	mem := memstore.New()
	out = make(chan won, 2)
	mk := func(id string) *node {
		fs := newFaultStore(mem)
		cfg := testConfig(fs, id)
		cfg.PeerMode, cfg.ServerAddr = true, id+":1"
		cfg.PeerClient = &http.Client{Transport: net}
		e := newTestElector(t, cfg)
		net.Add(cfg.ServerAddr, PeerHandler(e))
		return &node{id: id, fs: fs, e: e}
	}
	a = mk("a")
	a.campaign(t.Context(), out)
	lead = mustWin(t, out)
	b = mk("b")
	b.campaign(t.Context(), out)
	time.Sleep(30 * time.Second)
	synctest.Wait()
	return a, b, lead, out
}

func TestPeerFollowerAfterAbruptCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := simworld.NewCalmPeerNet()
		a, b, _, out := peerGroup(t, net)
		gets := b.fs.count("get")
		time.Sleep(10 * time.Second)
		if n := b.fs.count("get") - gets; n != 0 {
			t.Fatalf("a stable peer-mode follower read the store %d times in 10s; want 0", n)
		}
		time.Sleep(400 * time.Millisecond) // mid-way between renewals
		a.fs.set(func(f *faultStore) { f.blackhole = true })
		net.Crash("a:1", nil)
		last := lastPut(a)
		w := mustWin(t, out)
		// b heard the last write as it happened (long-poll), so its
		// takeover clock started then, whatever the poller did after.
		if want := last.at.Add(testLT); !w.at.Equal(want) {
			t.Errorf("takeover %v after the last write; want exactly LeaderTimeout (%v)", w.at.Sub(last.at), testLT)
		}
		_ = b
	})
}

func TestStalePeerCannotHoldTheElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := simworld.NewCalmPeerNet()
		a, b, _, out := peerGroup(t, net)
		time.Sleep(400 * time.Millisecond)
		a.fs.set(func(f *faultStore) { f.blackhole = true })
		rec, etag := lastWrite(a.e.snap.Load().lead)
		stale := peerRecord{Record: rec, ETag: etag}
		body, _ := json.Marshal(stale)
		net.Crash("a:1", body) // a leftover process keeps answering 200 with the last record
		last := lastPut(a)
		w := mustWin(t, out)
		if w.n != b {
			t.Fatalf("winner %s; want b", w.n.id)
		}
		if d := w.at.Sub(last.at); d > testLT+testFI {
			t.Errorf("takeover %v after the last write; want at most LeaderTimeout + FrequentInterval (%v)", d, testLT+testFI)
		}
		if net.Asked("a:1") == 0 {
			t.Errorf("the stale peer was never asked; the test did not test it")
		}
	})
}

// failover is one crash trial's outcome: the times from the dead leader's
// last write and from the crash to the next leader's Campaign returning.
type failover struct{ fromWrite, fromCrash time.Duration }

// crashFailovers runs trials crash failovers of a group of three in
// virtual time, each in its own bubble. Every store call takes latency,
// the first leader's leaderLatency.
// The followers start together at a random phase of the leader's first
// renewal cycle. With stable set, the leader is struck at a random point
// of an InfrequentInterval once they have settled. Without it, it is
// struck while they are still frequent: three FrequentIntervals after
// they started plus a random part of one but its last sixteenth. By then
// they have read a renewal (the leadership's first record is stamped
// after the term object's write while its renewals are due from that
// write's send, so a read timed by its stamp comes one store call late),
// and they have not yet watched the leadership for LeaderTimeout (which
// must be at least four FrequentIntervals).
func crashFailovers(t *testing.T, fi, ii, lt, latency, leaderLatency time.Duration, stable bool, trials int, seed uint64) []failover {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	random := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d))) }
	var out []failover
	for range trials {
		start, strike := random(fi), 2*lt+2*ii+random(max(ii, 8*fi)) // over several renewals, whose numbers pick half slots
		if !stable {
			strike = 3*fi + random(fi-fi/16)
			if 4*fi > lt {
				t.Fatalf("LeaderTimeout %v is less than four FrequentIntervals: the followers may turn infrequent before the strike", lt)
			}
		}
		synctest.Test(t, func(t *testing.T) {
			mem := memstore.New()
			won := make(chan won, 3)
			mk := func(id string, latency time.Duration) *node {
				fs := newFaultStore(mem)
				fs.set(func(f *faultStore) { f.latency = latency })
				cfg := testConfig(fs, id)
				cfg.FrequentInterval, cfg.InfrequentInterval, cfg.LeaderTimeout = fi, ii, lt
				e, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				leases := rand.New(rand.NewPCG(rng.Uint64(), 2))
				e.newLease = func() string { return fmt.Sprintf("%016x", leases.Uint64()) } // the same half slots every run
				t.Cleanup(func() { e.Close() })
				n := &node{id: id, fs: fs, e: e}
				n.campaign(t.Context(), won)
				return n
			}
			mk("a", leaderLatency)
			old := mustWin(t, won)
			time.Sleep(start)
			mk("b", latency)
			mk("c", latency)
			time.Sleep(strike)
			crash := time.Now()
			old.n.fs.set(func(f *faultStore) { f.failAll = true }) // its calls fail from now on; no goodbye
			w := mustWin(t, won)
			out = append(out, failover{fromWrite: w.at.Sub(lastPut(old.n).at), fromCrash: w.at.Sub(crash)})

		})
	}
	return out
}

// TestCrashFailoverAtTheRenewalPhase: a follower reads a slack after each
// of the leader's renewals is due, frequent or infrequent alike
// (docs/protocol.md, 3.3), so it first sees the dead leader's last write
// a slack after it was sent and takes over a slack after the lease from
// that write has run out (3.1), plus the takeover's five store calls (the
// read at the takeover time, the term object's read, the term's claim,
// the term object's raise, the lockfile's write). Never sooner than the lease allows. In virtual time
// with FrequentInterval 5 s and 20 ms per store call, over crashes at
// random phases; the p50 of crash-to-takeover is logged against the
// physical limit, LeaderTimeout - FrequentInterval/2.
//
// Where the leader's writes land later than the slack (its store calls
// take 500 ms), timed reads come too early and see each renewal a whole
// FrequentInterval late, until they learn a lag (3.3): then the bound
// grows by the lag, at most FrequentInterval/4. Without the lag every
// takeover there comes about LeaderTimeout + FrequentInterval after the
// last write. That row bounds the 90th percentile, as the shrinking lag
// may make a rare read early again.
func TestCrashFailoverAtTheRenewalPhase(t *testing.T) {
	const fi, latency = 5 * time.Second, 20 * time.Millisecond
	slack := renewalSlack(fi)
	for _, tc := range []struct {
		name          string
		ii, lt        time.Duration
		leaderLatency time.Duration
		stable        bool
	}{
		{"F3 (3.3) frequent followers, joined at random phases, still frequent (LeaderTimeout 20 s)", 30 * time.Second, 20 * time.Second, latency, false},
		{"F4 (3.3) stable followers with InfrequentInterval = FrequentInterval (LeaderTimeout 15 s)", fi, 15 * time.Second, latency, true},
		{"F6 (3.3) the lag: writes that land later than the slack (InfrequentInterval = FrequentInterval)", fi, 15 * time.Second, 500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := tc.lt
			bound := lt + slack + 5*latency
			if tc.leaderLatency > slack {
				bound += fi/4 + latency
			}
			p50bound, p90bound := bound, bound
			if tc.ii <= fi {
				// Half slots (3.3): where every follower read the last
				// write half a FrequentInterval late, the takeover counts
				// from a timed sighting of an earlier renewal, an eighth
				// of a FrequentInterval later for each renewal back (3.2),
				// and no later than from the half slot's. With
				// LeaderTimeout a multiple of FrequentInterval, the
				// takeover time falls on a timed read's return only where
				// that read took no half slot; elsewhere the takeover
				// reads first: one store call more.
				bound += fi / 2
				p50bound += latency
				p90bound += fi/8 + latency + 2*time.Millisecond // held is floored to the millisecond (3.2)
				if tc.leaderLatency > slack {
					// With the lag, reads half a FrequentInterval late do
					// not teach it, and where both followers took the half
					// slot of the last write (one renewal in four) the
					// takeover counts from that sighting: in some worlds
					// (seed 7 of 1 to 8) more than a tenth of the trials.
					p90bound = bound
				}
			}
			trials := crashFailovers(t, fi, tc.ii, lt, latency, tc.leaderLatency, tc.stable, 60, 19)
			var xs, ws []float64
			for i, f := range trials {
				if f.fromWrite < lt {
					t.Errorf("trial %d: takeover %v after the dead leader's last write; its lease ran %v", i, f.fromWrite, lt)
				}
				if f.fromWrite > bound && tc.leaderLatency <= slack {
					t.Errorf("trial %d: takeover %v after the dead leader's last write; want at most %v",
						i, f.fromWrite, bound)
				}
				xs = append(xs, float64(f.fromCrash)/float64(lt))
				ws = append(ws, float64(f.fromWrite))
			}
			if p90 := time.Duration(quantile(ws, .9)); p90 > p90bound {
				t.Errorf("90th percentile of the takeover after the last write %v; want at most %v", p90, p90bound)
			}
			if p50 := time.Duration(quantile(ws, .5)); p50 > p50bound {
				t.Errorf("median of the takeover after the last write %v; want at most %v", p50, p50bound)
			}
			t.Logf("crash to takeover over LeaderTimeout, %d trials: p50 %.3f p95 %.3f max %.3f (limit at p50: %.3f)",
				len(xs), quantile(xs, .5), quantile(xs, .95), quantile(xs, 1), float64(lt-fi/2)/float64(lt))
		})
	}
}

// quantile returns the q quantile of xs by the nearest rank.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}
