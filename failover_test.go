package s3lect

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

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
func peerGroup(t *testing.T, net *simPeers) (a, b *node, lead won, out chan won) {
	t.Helper()
	mem := memstore.New()
	out = make(chan won, 2)
	mk := func(id string) *node {
		fs := newFaultStore(mem)
		cfg := testConfig(fs, id)
		cfg.PeerMode, cfg.ServerAddr = true, id+":1"
		cfg.PeerClient = &http.Client{Transport: net}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		net.add(cfg.ServerAddr, e.PeerHandler())
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
		net := newPeerNet()
		a, b, _, out := peerGroup(t, net)
		gets := b.fs.count("get")
		time.Sleep(10 * time.Second)
		if n := b.fs.count("get") - gets; n != 0 {
			t.Fatalf("a stable peer-mode follower read the store %d times in 10s; want 0", n)
		}
		time.Sleep(400 * time.Millisecond) // mid-way between renewals
		a.fs.set(func(f *faultStore) { f.blackhole = true })
		net.crash("a:1", nil)
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
		net := newPeerNet()
		a, b, _, out := peerGroup(t, net)
		time.Sleep(400 * time.Millisecond)
		a.fs.set(func(f *faultStore) { f.blackhole = true })
		rec, etag := lastWrite(a.e.snap.Load().lead)
		stale := peerRecord{Record: rec, ETag: etag}
		body, _ := json.Marshal(stale)
		net.crash("a:1", body) // a leftover process keeps answering 200 with the last record
		last := lastPut(a)
		w := mustWin(t, out)
		if w.n != b {
			t.Fatalf("winner %s; want b", w.n.id)
		}
		if d := w.at.Sub(last.at); d > testLT+testFI {
			t.Errorf("takeover %v after the last write; want at most LeaderTimeout + FrequentInterval (%v)", d, testLT+testFI)
		}
		net.mu.Lock()
		asked := net.asked["a:1"]
		net.mu.Unlock()
		if asked == 0 {
			t.Errorf("the stale peer was never asked; the test did not test it")
		}
	})
}
