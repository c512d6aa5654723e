package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

var execCommand = exec.Command

// TestStatusAndWatch follows one lockfile from absent through held to
// released with status (text and JSON) and watch.
func TestStatusAndWatch(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/status.json"), t.TempDir()
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style"}
	statusJSON := func(extra ...string) statusReport {
		t.Helper()
		out, err := exec.Command(bin, append(append([]string{"status", "-json"}, where...), extra...)...).Output()
		if err != nil {
			t.Fatalf("status -json: %v", err)
		}
		var rep statusReport
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("status -json printed %q: %v", out, err)
		}
		return rep
	}
	if rep := statusJSON(); rep.State != "absent" {
		t.Errorf("status of a missing lockfile: %+v; want absent", rep)
	}
	w := start(t, append(append([]string{"watch", "-json"}, where...), timings...)...)
	waitFor(t, eventually, "watch's first line", func() bool { return strings.Contains(w.stderr.String(), `"leaderID":""`) })

	r := start(t, runArgs(endpoint, bucket, key, "leader-1", nil, childScript(dir, "leader-1", false))...)
	waitFor(t, eventually, "the command to start", func() bool { return started(t, dir, "leader-1") })
	rep := statusJSON("-wait", "-frequent", "100ms", "-timeout", "1500ms")
	if rep.State != "held" || rep.Leader != "leader-1" || rep.Term == 0 || rep.Renewing == nil || !*rep.Renewing || rep.LastUpdated == nil {
		t.Errorf("status -wait of a live leader: %+v; want held by leader-1, renewing", rep)
	}
	try := start(t, runArgs(endpoint, bucket, key, "hopeful", []string{"-try", "700ms"}, []string{"true"})...)
	if code := try.status(t); code != exitTry || !strings.Contains(try.stderr.String(), "not leader of s3://"+bucket+"/"+key+" within -try 700ms; leader-1 leads") {
		t.Errorf("run -try while leader-1 leads: status %d; want %d and who leads\n%s", code, exitTry, try.stderr.String())
	}
	waitFor(t, eventually, "watch to see leader-1", func() bool { return strings.Contains(w.stderr.String(), `"leaderID":"leader-1"`) })

	r.cmd.Process.Signal(syscallTERM)
	r.status(t)
	// watch says the lockfile was released, and by whom.
	waitFor(t, eventually, "watch to see the release", func() bool {
		return strings.Contains(w.stderr.String(), `"vacant":"released","was":"leader-1"`)
	}, w, r)
	if rep := statusJSON(); rep.State != "released" || rep.Leader != "leader-1" {
		t.Errorf("status after the runner stopped: %+v; want released by leader-1", rep)
	}
	rep = statusJSON("-wait", "-frequent", "100ms", "-timeout", "500ms")
	if rep.Renewing == nil || *rep.Renewing {
		t.Errorf("status -wait of a released lockfile: %+v; want renewing false", rep)
	}
	// Content that is not a record: unreadable, with the reason.
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	_, etag, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutIfMatch(t.Context(), key, []byte("not json"), etag); err != nil {
		t.Fatal(err)
	}
	if rep := statusJSON(); rep.State != "unreadable" || rep.Problem == "" {
		t.Errorf("status of a garbage lockfile: %+v; want unreadable with the reason", rep)
	}

	w.cmd.Process.Signal(syscallTERM)
	if code := w.status(t); code != 0 {
		t.Errorf("watch exited %d on SIGTERM; want 0", code)
	}
	lines := strings.Split(strings.TrimSpace(w.stderr.String()), "\n")
	if len(lines) < 3 {
		t.Errorf("watch printed %d lines; want none, leader-1, none:\n%s", len(lines), w.stderr.String())
	}
}

var syscallTERM = syscall.SIGTERM

// TestStatusWaitSaysWhatItSaw: -wait's verdict speaks of the lockfile's
// state; a released lockfile is not "a leader gone or cut off".
func TestStatusWaitSaysWhatItSaw(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		rep           statusReport
		want, wantNot string
	}{
		{statusReport{State: "held", Leader: "a", Renewing: &yes, Watched: "5s"}, "yes (a new write within 5s)", ""},
		{statusReport{State: "held", Leader: "a", Renewing: &no, Watched: "15s"}, "the leader is gone or cut off", ""},
		{statusReport{State: "released", Leader: "a", Renewing: &no, Watched: "15s"}, "nobody leads (a released the lockfile) and nobody took over in 15s", "gone or cut off"},
		{statusReport{State: "absent", Renewing: &no, Watched: "15s"}, "there is no lockfile", "gone or cut off"},
		{statusReport{State: "unreadable", Renewing: &no, Watched: "15s"}, "not a record", "gone or cut off"},
	} {
		var out strings.Builder
		tc.rep.print(&out)
		if got := out.String(); !strings.Contains(got, "renewing: ") || !strings.Contains(got, tc.want) || tc.wantNot != "" && strings.Contains(got, tc.wantNot) {
			t.Errorf("status -wait of a %s lockfile printed\n%s\nwant %q, not %q", tc.rep.State, got, tc.want, tc.wantNot)
		}
	}
}

// TestParseStatus: status's flags, and what it refuses before reading.
func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the usage error, or "" for accepted
		wait bool
	}{
		{[]string{"-store", "s3://b/k"}, "", false},
		{[]string{"-store", "s3://b/k", "-wait", "-frequent", "1s", "-timeout", "3s"}, "", true},
		{[]string{"-store", "s3://b/k", "-timeout", "0s"}, "must be positive", false},
		{[]string{"-store", "s3://b/k", "extra"}, `unexpected argument "extra"`, false},
	} {
		var stderr strings.Builder
		c, code, ok := parseStatus(tc.args, &stderr)
		switch {
		case tc.want == "" && (!ok || c.wait != tc.wait):
			t.Errorf("parseStatus(%q) = %+v, %v, %q; want accepted, wait %v", tc.args, c, ok, stderr.String(), tc.wait)
		case tc.want != "" && (ok || code != exitUsage || !strings.Contains(stderr.String(), tc.want)):
			t.Errorf("parseStatus(%q) = %v, %d, %q; want a usage error with %q", tc.args, ok, code, stderr.String(), tc.want)
		}
	}
}

// TestStatusReport: one read of the lockfile as status reports it.
func TestStatusReport(t *testing.T) {
	at := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		rec   s3lect.Record
		found bool
		err   error
		want  string // the state, or "error"
	}{
		{"held", s3lect.Record{LeaderID: "a", Term: 2, LastUpdated: at, Held: 3000}, true, nil, "held"},
		{"released", s3lect.Record{LeaderID: "a", Term: 2}, true, nil, "released"},
		{"absent", s3lect.Record{}, false, nil, "absent"},
		{"unreadable", s3lect.Record{}, true, errors.New("not json"), "unreadable"},
		{"unreachable", s3lect.Record{}, false, errors.New("dial tcp: refused"), "error"},
	} {
		rep, err := newStatusReport("s3://b/k", tc.rec, tc.found, tc.err, at.Add(2*time.Second))
		got := rep.State
		if err != nil {
			got = "error"
		}
		if got != tc.want || got == "held" && (*rep.AgeSeconds != 2 || *rep.HeldSeconds != 3) {
			t.Errorf("%s: report %+v, %v; want %s (held: age 2s, held 3s)", tc.name, rep, err, tc.want)
		}
	}
}
