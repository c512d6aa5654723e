package s3lect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// startPinnedNode starts an elector in pinned peer mode (no certificate
// authority, no PeerTLS: only an address) serving its endpoint on
// loopback with its own self-signed certificate. Its lease is 4s, not
// peerLT's 1s: the pinned tests need each leadership to last until the
// step they check (none waits a lease out), and under load a 1s lease
// lapsed (a loaded run, load average 18: the new leader's lapsed before
// its followers were seen asking it).
func startPinnedNode(t *testing.T, mem store.Store, id string) *peerNode {
	t.Helper()
	return startPeerNodeLeasing(t, mem, nil, id, 4*time.Second)
}

// lockfileRecord reads the lockfile's record.
func lockfileRecord(t *testing.T, mem store.Store) Record {
	t.Helper()
	data, _, err := mem.Get(t.Context(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ParseRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// waitPeerFollowers waits until every node but the leader watches it
// over HTTPS (Stats.Mode "peer") with successful peer requests, a
// liveness bound of 30 s.
func waitPeerFollowers(t *testing.T, nodes []*peerNode, leader *peerNode) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		if n == leader {
			continue
		}
		for {
			st := n.e.Stats()
			if st.Mode == "peer" && st.PeerRequests["ok"] > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: mode %q, peer requests %v; want a follower asking the pinned leader over HTTPS", n.id, st.Mode, st.PeerRequests)
			}
			time.Sleep(peerFI / 4)
		}
	}
}

// TestPinnedPeerModeOverHTTPS: peer mode with no certificate to make.
// Three electors with PeerPinned and an address only, real HTTPS on
// 127.0.0.1: the leader's records pin its self-signed certificate, its
// followers ask it over HTTPS and not the store; after a handover the
// lockfile pins the new leader's certificate, and the followers, the old
// leader among them, ask the new one.
func TestPinnedPeerModeOverHTTPS(t *testing.T) {
	t.Parallel() // real timers and servers of its own: beside the other peer tests
	mem := memstore.New()
	wins := make(chan peerWin, 3)
	var nodes []*peerNode
	campaign := func(n *peerNode) {
		go func() {
			if l, err := n.e.Campaign(t.Context()); err == nil {
				wins <- peerWin{n, l, time.Now()}
			}
		}()
	}
	for _, id := range []string{"a", "b", "c"} {
		n := startPinnedNode(t, mem, id)
		nodes = append(nodes, n)
		campaign(n)
	}
	first := waitPeerWin(t, wins)
	rec := lockfileRecord(t, mem)
	if want := PeerPin(first.n.e.peerCert.Leaf); rec.PeerPin != want || rec.LeaderID != first.n.id {
		t.Fatalf("lockfile %+v; want %s's record pinning its certificate %s", rec, first.n.id, want)
	}
	waitPeerFollowers(t, nodes, first.n)

	if err := first.lead.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The old leader campaigns again only once another leads: it holds
	// off from its own release for the others' next read (moves.md 11.1,
	// pinned in virtual time by TestCoreHandover), and a machine too loaded
	// to run them within that window let it take its release back here
	// (a loaded run, load average 19), which is no handover to check.
	second := waitPeerWin(t, wins)
	campaign(first.n)
	rec = lockfileRecord(t, mem)
	if want := PeerPin(second.n.e.peerCert.Leaf); rec.PeerPin != want || rec.PeerPin == PeerPin(first.n.e.peerCert.Leaf) {
		t.Fatalf("lockfile after the handover pins %s; want the new leader %s's %s", rec.PeerPin, second.n.id, want)
	}
	waitPeerFollowers(t, nodes, second.n)
}

// TestPinnedPeerRefusesAnotherKey: a pinned follower asks an address
// whose server presents a certificate other than the one the record
// pins (a leftover process at the leader's address, or something in
// between): the answer is refused, as a failure the follower answers by
// reading the store (section 5, F13), with an error that names both
// keys; the record's own pin is accepted.
func TestPinnedPeerRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	mem := memstore.New()
	leader := startPinnedNode(t, mem, "a")
	lead, err := leader.e.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(context.Background())
	follower := startPinnedNode(t, mem, "b")
	rec := lockfileRecord(t, mem)
	other, err := selfSigned("x", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	wrong := PeerPin(other.Leaf)
	_, _, err = follower.e.askPeer(t.Context(), peerTarget{id: rec.LeaderID, term: rec.Term, lease: rec.Lease, addr: rec.LeaderAddr, pin: wrong}, 0)
	right := PeerPin(leader.e.peerCert.Leaf)
	if err == nil || !strings.Contains(err.Error(), "pins "+wrong) || !strings.Contains(err.Error(), "key "+right) {
		t.Fatalf("askPeer with a wrong pin = %v; want a refusal naming the key presented (%s) and the pin (%s)", err, right, wrong)
	}
	if _, _, err := follower.e.askPeer(t.Context(), peerTarget{id: rec.LeaderID, term: rec.Term, lease: rec.Lease, addr: rec.LeaderAddr, pin: rec.PeerPin}, 0); err != nil {
		t.Errorf("askPeer with the record's pin = %v; want nil", err)
	}
	if _, _, err := follower.e.askPeer(t.Context(), peerTarget{id: rec.LeaderID, term: rec.Term, lease: rec.Lease, addr: rec.LeaderAddr}, 0); err == nil {
		t.Errorf("askPeer with no pin at all = nil; want a refusal")
	}

	// A tool's client (PinnedTLS) makes the same check in the handshake.
	for _, tc := range []struct {
		pin  string
		want bool
	}{{rec.PeerPin, true}, {wrong, false}} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: PinnedTLS(tc.pin)}}
		resp, err := c.Get("https://" + rec.LeaderAddr + "/health/leadership")
		if err == nil {
			resp.Body.Close()
		}
		if ok := err == nil && resp.StatusCode == http.StatusOK; ok != tc.want || !tc.want && !strings.Contains(fmt.Sprint(err), "pins "+wrong) {
			t.Errorf("GET with PinnedTLS(%s) = %v; want success %v (a refusal naming the pin)", tc.pin, err, tc.want)
		}
		c.CloseIdleConnections()
	}
}

// TestPinnedPeerConfig: the pinned mode's configuration errors name the
// field, a given certificate is the one served and pinned, and the pin
// is the SHA-256 of the certificate's public key.
func TestPinnedPeerConfig(t *testing.T) {
	base := func() ElectorConfig {
		c := testConfig(memstore.New(), "a")
		c.PeerMode, c.PeerPinned = true, true
		return c
	}
	for _, tc := range []struct {
		name string
		edit func(*ElectorConfig)
		want string
	}{
		{"without PeerMode", func(c *ElectorConfig) { c.PeerMode = false }, "PeerPinned needs PeerMode"},
		{"with PeerTLS", func(c *ElectorConfig) { c.PeerTLS = &tls.Config{} }, "both PeerTLS and PeerPinned"},
		{"a certificate without PeerPinned", func(c *ElectorConfig) { c.PeerPinned, c.PeerCertificate = false, &tls.Certificate{} }, "PeerCertificate is set without PeerPinned"},
		{"an empty certificate", func(c *ElectorConfig) { c.PeerCertificate = &tls.Certificate{} }, "PeerCertificate holds no certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("a given certificate", func(t *testing.T) {
		cert, err := selfSigned("mine", "peer.example:8443")
		if err != nil {
			t.Fatal(err)
		}
		if cert.Leaf.DNSNames[0] != "peer.example" || cert.Leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
			t.Errorf("self-signed certificate names %v, usages %v; want the address's host and server authentication", cert.Leaf.DNSNames, cert.Leaf.ExtKeyUsage)
		}
		c := base()
		c.PeerCertificate = &tls.Certificate{Certificate: cert.Certificate, PrivateKey: cert.PrivateKey} // no Leaf: parsed by New
		e := newTestElector(t, c)
		if got := e.PeerServerTLS().Certificates[0].Certificate[0]; string(got) != string(cert.Certificate[0]) {
			t.Error("PeerServerTLS serves another certificate than PeerCertificate")
		}
		if e.pin != PeerPin(cert.Leaf) || !strings.HasPrefix(e.pin, "sha256:") || len(e.pin) != len("sha256:")+64 {
			t.Errorf("pin %q; want sha256: and the hex SHA-256 of the certificate's public key", e.pin)
		}
	})
	t.Run("not pinned", func(t *testing.T) {
		e := newTestElector(t, testConfig(memstore.New(), "a"))
		if e.PeerServerTLS() != nil {
			t.Error("PeerServerTLS() without PeerPinned is not nil")
		}
	})
}

// TestCorePinnedFollowerNeedsAPin: a pinned follower starts the peer
// poller (F10) only for a record that carries a pin, and gives the poller
// that pin; a record without one (an elector without PeerPinned, an
// older version) is watched through the store.
func TestCorePinnedFollowerNeedsAPin(t *testing.T) {
	p := coreParams
	p.peerMode, p.pin = true, "sha256:"+strings.Repeat("ab", 32)
	for _, pin := range []string{"", "sha256:" + strings.Repeat("cd", 32)} {
		m := newMachine(t, p)
		var target *peerTarget
		for i := range 10 {
			now := at(time.Duration(i)*p.fi + slack)
			if m.on(evTimer{}, now); !calling[doRead](m) {
				continue
			}
			rec := Record{LeaderID: "a", LeaderAddr: "a:1", LastUpdated: at(time.Duration(i) * p.fi), Term: 1, Lease: "la",
				Held: int64(i) * p.fi.Milliseconds(), TTL: p.lt.Milliseconds(), PeerPin: pin}
			m.read(rec.encode(), fmt.Sprintf(`"e%d"`, i), now)
			if d, ok := effectOf[doPeer](m); ok && d.t.addr != "" {
				target = &d.t
				break
			}
		}
		switch {
		case pin == "" && target != nil:
			t.Errorf("a record without a pin: the poller was started for %+v; want the store", *target)
		case pin != "" && (target == nil || target.pin != pin):
			t.Errorf("a record pinning %s: poller target %+v; want one with that pin", pin, target)
		}
	}
}
