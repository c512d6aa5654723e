package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

// TestReleaseCommand: s3lect release on MinIO, with three runners. The
// leading runner's command is stopped and the lockfile released (the
// runner, with -once, exits 4); the member -to names starts its command
// only after the old one stopped, at a later term; release says so.
func TestReleaseCommand(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/release.json"), t.TempDir()
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-timeout", "4s", "-wait", "20s"}
	if out, err := runBin(append([]string{"release"}, where...)...); binStatus(err) != exitAbsent ||
		!strings.Contains(out, "no lockfile at s3://"+bucket+"/"+key) || !strings.Contains(out, "Is the key right?") {
		t.Errorf("release with no lockfile = %q, %v; want status %d naming the key and asking whether it is right", out, err, exitAbsent)
	}
	a := start(t, runArgs(endpoint, bucket, key, "a", []string{"-once"}, childScript(dir, "a", false))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })
	b := start(t, runArgs(endpoint, bucket, key, "b", nil, childScript(dir, "b", false))...)
	c := start(t, runArgs(endpoint, bucket, key, "c", nil, childScript(dir, "c", false))...)
	b.waitLine(t, eventually, "waiting: a leads (term")
	c.waitLine(t, eventually, "waiting: a leads (term")

	begun := time.Now()
	out, err := runBin(append(append([]string{"release"}, where...), "-to", "c")...)
	asked := askedRE.FindStringSubmatch(out)
	if asked == nil || asked[1] != "a" || !strings.Contains(out, "to step down and hand over to c") || !strings.Contains(out, "a stepped down") ||
		!strings.Contains(out, "Only c may take over at first") || strings.Index(out, "Only c may") > strings.Index(out, "asked a (term") {
		t.Fatalf("release -to c = %q, %v; want the transfer window named before the request, a asked and stepped down", out, err)
	}
	if code := a.status(t); code != exitLost || !strings.Contains(a.stderr.String(), "leadership ended (asked to step down by s3lect release, to hand over to c)") ||
		!strings.Contains(a.stderr.String(), "stays out of the next election") || strings.Contains(a.stderr.String(), "lost to another holder") {
		t.Errorf("a (-once) exited %d after the release; want %d saying it stepped down at the operator's request for c and holds off\n%s", code, exitLost, a.stderr.String())
	}
	// The job moves to c, the member named; on a machine too loaded to
	// run c within its window (FrequentInterval/2) b takes over instead,
	// and release says so (status 10): what happened is checked, not that
	// the machine kept up. Either way no two commands ever ran at once.
	var next jobRun
	waitFor(t, eventually, "the job to start off a", func() bool {
		runs := jobRuns(t, dir, "a", "b", "c")
		next = runs[len(runs)-1]
		return next.id != "a"
	}, a, b, c)
	runs := checkNoOverlap(t, dir, "a", "b", "c")
	switch {
	case next.id == "c" && err == nil && strings.Contains(out, "c leads (term"):
		if termA, termC := termOf(runs[0]), termOf(next); runs[0].id != "a" || termC <= termA {
			t.Errorf("the job ran %+v; want a's, then c's at a later term", runs)
		}
	case next.id == "b" && binStatus(err) == exitNotMoved && strings.Contains(out, "c did not take over in its window") && strings.Contains(out, "b took over instead"):
		t.Logf("b took over before c, the member named (a loaded machine?)\n%s", out)
	default:
		t.Errorf("release -to c = %v\n%s\nbut %s's command started next: want release to name who took over", err, out, next.id)
	}
	t.Logf("a's command stopped %v after the release began; %s's started %v after it\n%s", runs[0].to.Sub(begun), next.id, next.from.Sub(begun), out)
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

// termOf is the term a run's command was given (S3LECT_TERM), 0 if none.
func termOf(r jobRun) uint64 {
	n, _ := strconv.ParseUint(r.term, 10, 64)
	return n
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
	key, dir := freshKey("cli/release-back.json"), t.TempDir()
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-timeout", "4s"}
	a := start(t, runArgs(endpoint, bucket, key, "a", nil, childScript(dir, "a", false))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })

	out, err := runBin(append(append([]string{"release"}, where...), "-to", "web-9", "-wait", "20s")...)
	if binStatus(err) != exitNotMoved || !strings.Contains(out, "the job is back on a, the member you asked to step down") ||
		!strings.Contains(out, "web-9 did not take over in its window") {
		t.Errorf("release -to web-9 (runs nowhere) = %q, %v; want status %d, the job back on a, web-9 named", out, err, exitNotMoved)
	}
	a.waitLine(t, eventually, "a leads")
	said := a.stderr.String()
	if !strings.Contains(said, "leadership ended (asked to step down by s3lect release, to hand over to web-9)") ||
		!strings.Contains(said, "stays out of the next election") || !strings.Contains(said, "holding off until about") {
		t.Errorf("a's narration after release -to web-9:\n%s\nwant the step-down named, with web-9, and the hold-off", said)
	}

	// a leads again, at a term above the first. Not an exact term: on a
	// machine too loaded to renew in time a lease lapses and a takes over
	// again at the next (the loaded CI run ci10 saw terms 3 and 4).
	var term uint64
	waitFor(t, eventually, "a to lead again", func() bool {
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

	waitFor(t, eventually, "a to lead again", func() bool {
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
		t.Errorf("release -wait 300ms waited out the lease (4s):\n%s", out)
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
