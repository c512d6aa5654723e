package main

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
)

// TestReleaseToChecksTheMembers: in peer mode release -to asks the
// leading runner who runs, and refuses an ID nobody runs before it writes
// anything (it used to stop the job for the whole transfer window, then
// exit 10); where the members cannot be known (storage mode, a leader
// that has led too briefly to have heard from everyone, one that does
// not answer) it says so before it acts, and goes on.
func TestReleaseToChecksTheMembers(t *testing.T) {
	now := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	leading := s3lect.Record{LeaderID: "a", Term: 7}
	m := &members{id: "a", key: "leader/job.json", fi: time.Second, seen: map[string]time.Time{},
		leader: func() (s3lect.Record, bool) { return leading, true }, now: func() time.Time { return now }}
	srv := httptest.NewTLSServer(m)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	announce := func(id string) {
		if _, err := fetchMembers(t.Context(), srv.Client(), addr, m.key, id); err != nil {
			t.Fatal(err)
		}
	}
	check := func(to string, old s3lect.Record) (string, error) {
		var out strings.Builder
		err := checkTarget(t.Context(), srv.Client(), m.key, to, old, 15*time.Second, &out)
		return out.String(), err
	}
	peerLeader := s3lect.Record{LeaderID: "a", Term: 7, LeaderAddr: addr}

	announce("b")
	if out, err := check("c", peerLeader); err != nil || !strings.Contains(out, "has not led long enough") {
		t.Errorf("-to c just after a began to lead = %q, %v; want a warning that the members are not all known yet", out, err)
	}
	now = now.Add(2 * time.Second) // two FrequentIntervals: every follower has announced itself
	announce("b")
	announce("c")
	if out, err := check("c", peerLeader); err != nil || out != "" {
		t.Errorf("-to c, which runs = %q, %v; want no word", out, err)
	}
	var u errUsage
	out, err := check("nobody", peerLeader)
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "no member with that -id runs") || !strings.Contains(err.Error(), "a, b, c") {
		t.Errorf("-to nobody = %q, %v; want a usage error naming the members a, b, c", out, err)
	}
	now = now.Add(4 * time.Second) // c stopped announcing three FrequentIntervals ago
	announce("b")
	if _, err := check("c", peerLeader); err == nil {
		t.Errorf("-to c after c went silent for 4s: accepted; want refused")
	}
	if out, err := check("nobody", s3lect.Record{LeaderID: "a", Term: 7}); err != nil || !strings.Contains(out, "storage mode: the members cannot be known") {
		t.Errorf("-to nobody in storage mode = %q, %v; want a warning before acting", out, err)
	}
	leading = s3lect.Record{LeaderID: "b", Term: 8} // a no longer leads: its list is no answer
	if out, err := check("nobody", peerLeader); err != nil || !strings.Contains(out, "cannot be checked") {
		t.Errorf("-to nobody, asking a runner that does not lead = %q, %v; want a warning", out, err)
	}
	if out, err := check("nobody", s3lect.Record{LeaderID: "a", Term: 7, LeaderAddr: "127.0.0.1:1"}); err != nil || !strings.Contains(out, "could not be read") {
		t.Errorf("-to nobody, the leader unreachable = %q, %v; want a warning", out, err)
	}
}
