package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
)

// TestPinnedPeerMode: three real runners in peer mode with -peer-addr
// alone (no certificate, key or CA given). The leader's record pins its
// self-signed certificate; a follower names the leader's address; the
// leading runner's member list is read with the pin alone; release -to,
// given no peer flag, reaches the leader's endpoint (the nudge), and moves
// the job to the named runner after the old one stopped; the new leader's
// record pins another key; SIGTERM to the new leader's runner hands over
// again.
func TestPinnedPeerMode(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := "cli/pinned.json", t.TempDir()
	ports := map[string]string{"a": freePort(t), "b": freePort(t), "c": freePort(t)}
	peer := func(id string) []string { return []string{"-peer-addr", "127.0.0.1:" + ports[id]} }
	a := start(t, runArgs(endpoint, bucket, key, "a", peer("a"), childScript(dir, "a", false))...)
	waitFor(t, 20*time.Second, "a's command to start", func() bool { return started(t, dir, "a") }, a)
	b := start(t, runArgs(endpoint, bucket, key, "b", peer("b"), childScript(dir, "b", false))...)
	c := start(t, runArgs(endpoint, bucket, key, "c", peer("c"), childScript(dir, "c", false))...)
	b.waitLine(t, 10*time.Second, "waiting: a at 127.0.0.1:"+ports["a"]+" leads (term")
	c.waitLine(t, 10*time.Second, "waiting: a at 127.0.0.1:"+ports["a"]+" leads (term")
	recA, _ := lockfile(t, bucket, key)
	if recA.LeaderID != "a" || !strings.HasPrefix(recA.PeerPin, "sha256:") || recA.LeaderAddr != "127.0.0.1:"+ports["a"] {
		t.Fatalf("a's record = %+v; want a at 127.0.0.1:%s with a sha256: pin", recA, ports["a"])
	}

	// The member list, asked with the record's pin and nothing else.
	clients := &peerClients{base: &http.Client{}}
	defer clients.closeIdle()
	waitFor(t, 10*time.Second, "a's member list to be complete over the pinned endpoint", func() bool {
		rec, _ := lockfile(t, bucket, key)
		l, err := fetchMembers(t.Context(), clients.forRecord(rec), rec.LeaderAddr, key, "")
		return err == nil && l.Complete && strings.Join(l.Members, ",") == "a,b,c"
	}, a, b, c)

	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style"}
	out, err := runBin(append(append([]string{"release"}, where...), "-to", "b", "-wait", "20s")...)
	if err != nil || !strings.Contains(out, "b leads (term") {
		t.Fatalf("release -to b (pinned peer mode, no peer flags) = %v\n%s\nwant b leading", err, out)
	}
	for _, bad := range []string{"was not reached", "cannot be checked"} {
		if strings.Contains(out, bad) {
			t.Errorf("release said %q: the pinned endpoint should be reached with the record's pin alone\n%s", bad, out)
		}
	}
	waitFor(t, 10*time.Second, "b's command to start", func() bool { return started(t, dir, "b") }, a, b, c)
	la, lb := readLog(t, dir, "a"), readLog(t, dir, "b")
	if !la[len(la)-1].at.Before(lb[0].at) {
		t.Errorf("b's command started before a's stopped")
	}
	t.Logf("release -to b: a's command stopped → b's started: %v\n%s", lb[0].at.Sub(la[len(la)-1].at).Round(time.Millisecond), out)
	recB, _ := lockfile(t, bucket, key)
	if recB.LeaderID != "b" || recB.PeerPin == "" || recB.PeerPin == recA.PeerPin {
		t.Errorf("b's record = %+v; want b with a pin of its own (a's was %s)", recB, recA.PeerPin)
	}

	// SIGTERM to b's runner: the job moves on to a or c.
	b.cmd.Process.Signal(syscall.SIGTERM)
	if code := b.status(t); code != 0 {
		t.Errorf("b exited %d; want 0\n%s", code, b.stderr.String())
	}
	waitFor(t, 20*time.Second, "a's or c's command to start after b's", func() bool {
		return starts(t, dir, "a") == 2 || starts(t, dir, "c") == 1
	}, a, c)
}

// starts counts the starts in id's command log.
func starts(t *testing.T, dir, id string) int {
	n := 0
	for _, ev := range readLog(t, dir, id) {
		if ev.kind == "start" {
			n++
		}
	}
	return n
}

// TestPeerClientsForRecord: a record without a pin is asked with the CA
// flags' client; one with a pin with a client that checks that pin, kept
// while the pin stays and replaced when a new leader pins another key.
func TestPeerClientsForRecord(t *testing.T) {
	base := &http.Client{}
	p := &peerClients{base: base}
	defer p.closeIdle()
	if got := p.forRecord(s3lect.Record{LeaderID: "a"}); got != base {
		t.Errorf("a record without a pin got %p; want the CA flags' client %p", got, base)
	}
	one := p.forRecord(s3lect.Record{LeaderID: "a", PeerPin: "sha256:01"})
	if one == base || one.Transport.(*http.Transport).TLSClientConfig.VerifyConnection == nil {
		t.Fatalf("a pinned record got %+v; want a client of its own that checks the pin", one)
	}
	if again := p.forRecord(s3lect.Record{LeaderID: "a", PeerPin: "sha256:01"}); again != one {
		t.Errorf("the same pin got another client")
	}
	if other := p.forRecord(s3lect.Record{LeaderID: "b", PeerPin: "sha256:02"}); other == one || other == base {
		t.Errorf("another pin got the same client")
	}
}
