package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

// TestReleaseCommand: s3lect release on MinIO, with three runners. The
// leading runner's command is stopped and the lockfile released (the
// runner, with -once, exits 4); the member -to names starts its command
// only after the old one stopped, well before the lease could have run
// out; release says so.
func TestReleaseCommand(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := "cli/release.json", t.TempDir()
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-timeout", "1500ms", "-wait", "20s"}
	if out, err := runBin(append([]string{"release"}, where...)...); binStatus(err) != exitAbsent ||
		!strings.Contains(out, "no lockfile at s3://"+bucket+"/"+key) || !strings.Contains(out, "Is the key right?") {
		t.Errorf("release with no lockfile = %q, %v; want status %d naming the key and asking whether it is right", out, err, exitAbsent)
	}
	a := start(t, runArgs(endpoint, bucket, key, "a", []string{"-once"}, childScript(dir, "a", false))...)
	waitFor(t, 20*time.Second, "a's command to start", func() bool { return started(t, dir, "a") })
	b := start(t, runArgs(endpoint, bucket, key, "b", nil, childScript(dir, "b", false))...)
	c := start(t, runArgs(endpoint, bucket, key, "c", nil, childScript(dir, "c", false))...)
	b.waitLine(t, 10*time.Second, "waiting: a leads (term")
	c.waitLine(t, 10*time.Second, "waiting: a leads (term")

	begun := time.Now()
	out, err := runBin(append(append([]string{"release"}, where...), "-to", "c")...)
	if err != nil || !strings.Contains(out, "asked a (term 1) to step down and hand over to c") || !strings.Contains(out, "a stepped down") ||
		!strings.Contains(out, "c leads (term 2)") || !strings.Contains(out, "Only c may take over at first") ||
		strings.Index(out, "Only c may") > strings.Index(out, "asked a (term 1)") {
		t.Fatalf("release -to c = %q, %v; want status 0, the transfer window named before the request, a stepped down, c leads (term 2)", out, err)
	}
	if code := a.status(t); code != exitLost || !strings.Contains(a.stderr.String(), "leadership ended (asked to step down by s3lect release, to hand over to c)") ||
		!strings.Contains(a.stderr.String(), "stays out of the next election") || strings.Contains(a.stderr.String(), "lost to another holder") {
		t.Errorf("a (-once) exited %d after the release; want %d saying it stepped down at the operator's request for c and holds off\n%s", code, exitLost, a.stderr.String())
	}
	waitFor(t, 20*time.Second, "c's command to start", func() bool { return started(t, dir, "c") })
	la, lc := readLog(t, dir, "a"), readLog(t, dir, "c")
	lastA, startC := la[len(la)-1].at, lc[0].at
	if !lastA.Before(startC) {
		t.Errorf("a's command last wrote at %v, after c's command started at %v", lastA.Format(time.StampMicro), startC.Format(time.StampMicro))
	}
	// Which member runs the job is checked only while c's leadership
	// lasts: on a machine too loaded to renew within 1.5 s it lapses and
	// b may take over, at a later term (the loaded CI run ci10 saw c's
	// command start at term 4, after b's). That is no step-down's doing.
	if lapsed := strings.Contains(c.stderr.String(), "leadership ended"); lapsed {
		t.Logf("c's leadership lapsed before the checks (a loaded machine?): b's start and c's term are not checked\n%s", c.stderr.String())
	} else {
		if started(t, dir, "b") {
			t.Errorf("b started its command; want only c, named by -to")
		}
		if lc[0].term != "2" {
			t.Errorf("c's command got S3LECT_TERM %q; want 2", lc[0].term)
		}
	}
	t.Logf("a's command stopped %v after the release began; c's started %v after it (LeaderTimeout 1.5s)\n%s", lastA.Sub(begun), startC.Sub(begun), out)
}

// TestTLSHintNamesPeerCA: a leader's peer endpoint whose certificate this
// command cannot verify gets the flag that fixes it; other failures none.
func TestTLSHintNamesPeerCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("GET of a server with a self-signed certificate succeeded; want a verification error")
	}
	if h := tlsHint(err); !strings.Contains(h, "-peer-ca") {
		t.Errorf("tlsHint(%v) = %q; want it to name -peer-ca", err, h)
	}
	if h := tlsHint(errors.New("connection refused")); h != "" {
		t.Errorf("tlsHint(connection refused) = %q; want none", h)
	}
}

// binStatus is the exit status of runBin's err.
func binStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestReleaseBackOnTheSameMember: a group of one on MinIO. release -to a
// member that runs nowhere, and a plain release, end with the job back on
// the member asked to step down: release says so plainly and exits 10;
// the runner says it stepped down at an operator's request and held off.
// release -wait shorter than the lease ends at -wait, saying what it knows.
func TestReleaseBackOnTheSameMember(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := "cli/release-back.json", t.TempDir()
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-timeout", "1500ms"}
	a := start(t, runArgs(endpoint, bucket, key, "a", nil, childScript(dir, "a", false))...)
	waitFor(t, 20*time.Second, "a's command to start", func() bool { return started(t, dir, "a") })

	out, err := runBin(append(append([]string{"release"}, where...), "-to", "web-9", "-wait", "20s")...)
	if binStatus(err) != exitNotMoved || !strings.Contains(out, "the job is back on a, the member you asked to step down") ||
		!strings.Contains(out, "web-9 did not take over in its window") {
		t.Errorf("release -to web-9 (runs nowhere) = %q, %v; want status %d, the job back on a, web-9 named", out, err, exitNotMoved)
	}
	a.waitLine(t, 10*time.Second, "a leads")
	said := a.stderr.String()
	if !strings.Contains(said, "leadership ended (asked to step down by s3lect release, to hand over to web-9)") ||
		!strings.Contains(said, "stays out of the next election") || !strings.Contains(said, "holding off until about") {
		t.Errorf("a's narration after release -to web-9:\n%s\nwant the step-down named, with web-9, and the hold-off", said)
	}

	// a leads again, at a term above the first. Not an exact term: on a
	// machine too loaded to renew in time a lease lapses and a takes over
	// again at the next (the loaded CI run ci10 saw terms 3 and 4).
	var term uint64
	waitFor(t, 20*time.Second, "a to lead again", func() bool {
		rec, ok := lockfile(t, bucket, key)
		if ok && rec.LeaderID == "a" && !rec.LastUpdated.IsZero() && rec.Term >= 2 {
			term = rec.Term
			return true
		}
		return false
	}, a)
	out, err = runBin(append(append([]string{"release"}, where...), "-wait", "20s")...)
	if binStatus(err) != exitNotMoved || !strings.Contains(out, "the job is back on a, the member you asked to step down") ||
		!strings.Contains(out, "no other member took over") {
		t.Errorf("plain release in a group of one = %q, %v; want status %d and the job back on a", out, err, exitNotMoved)
	}

	waitFor(t, 20*time.Second, "a to lead again", func() bool {
		rec, ok := lockfile(t, bucket, key)
		return ok && rec.LeaderID == "a" && !rec.LastUpdated.IsZero() && rec.Term > term
	}, a)
	out, err = runBin(append(append([]string{"release"}, where...), "-to", "web-9", "-wait", "300ms")...)
	if binStatus(err) != exitNotMoved || !strings.Contains(out, "no other member seen leading within -wait 300ms") {
		t.Errorf("release -wait 300ms = %q, %v; want status %d, saying what is known at -wait", out, err, exitNotMoved)
	}
	// Before, release waited at least the lease and a tenth, plus a
	// second, whatever -wait said, and then reported the lease as run
	// out. What it printed says which (no wall-clock limit: on a loaded
	// machine starting the process alone can take seconds).
	if strings.Contains(out, "did not answer within its lease") {
		t.Errorf("release -wait 300ms waited out the lease (1.5s):\n%s", out)
	}
	t.Logf("release -wait 300ms:\n%s", out)
}

// TestParseRelease: release's flags, and what it refuses before acting.
func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the usage error, or "" for accepted
		to   string
	}{
		{[]string{"-store", "s3://b/k"}, "", ""},
		{[]string{"-store", "s3://b/k", "-to", "db-2", "-wait", "0s"}, "", "db-2"},
		{[]string{"-store", "s3://b/k", "-wait", "-1s"}, "-wait not negative", ""},
		{[]string{"-store", "s3://b/k", "db-2"}, `unexpected argument "db-2"`, ""},
	} {
		var stderr strings.Builder
		c, code, ok := parseRelease(tc.args, &stderr)
		switch {
		case tc.want == "" && (!ok || c.to != tc.to):
			t.Errorf("parseRelease(%q) = %+v, %v, %q; want accepted, -to %q", tc.args, c, ok, stderr.String(), tc.to)
		case tc.want != "" && (ok || code != exitUsage || !strings.Contains(stderr.String(), tc.want)):
			t.Errorf("parseRelease(%q) = %v, %d, %q; want a usage error with %q", tc.args, ok, code, stderr.String(), tc.want)
		}
	}
}
