package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/memstore"
)

// job is one leadership of a virtual-time member as s3lect run holds it:
// from Campaign's return to the end of its work, which stops stopTime
// after the leadership's context ends, before the member resigns.
type job struct {
	id         string
	term       uint64
	start, end time.Time
}

// jobLog collects the members' jobs.
type jobLog struct {
	mu   sync.Mutex
	jobs []job
}

func (l *jobLog) add(j job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs = append(l.jobs, j)
}

func (l *jobLog) all() []job {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]job(nil), l.jobs...)
}

// member campaigns for ever as s3lect run does: it works while it leads,
// stops its work stopTime after the leadership ends, then resigns (a
// leader asked to step down releases then) and campaigns again.
func member(ctx context.Context, e *s3lect.Elector, id string, stopTime time.Duration, log *jobLog) {
	for {
		lead, err := e.Campaign(ctx)
		if err != nil {
			return
		}
		j := job{id: id, term: lead.Term(), start: time.Now()}
		<-lead.Context().Done()
		time.Sleep(stopTime) // SIGTERM, the command's exit, the group confirmed gone
		j.end = time.Now()
		log.add(j)
		lead.Resign(context.Background())
	}
}

// TestStepDownInVirtualTime: three members at the default intervals in a
// testing/synctest bubble on the memory store, and an operator's step-down
// request written at many phases of the leader's renewal cycle, with and
// without -to. At every phase the leader's work ends within a
// FrequentInterval (its next renewal is refused), the next leader is
// another member (the one named by -to), it starts only after the old
// leader's work has stopped, and no two jobs ever overlap.
func TestStepDownInVirtualTime(t *testing.T) {
	for _, to := range []string{"", "c"} {
		for phase := range 7 {
			offset := time.Duration(phase) * s3lect.DefaultFrequentInterval / 7
			t.Run(fmt.Sprintf("to=%q/phase %v", to, offset), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					stepDownAt(t, to, offset)
				})
			})
		}
	}
}

func stepDownAt(t *testing.T, to string, offset time.Duration) {
	mem := memstore.New()
	key := "leader/job.json"
	ctx, cancel := context.WithCancel(t.Context())
	var (
		log jobLog
		wg  sync.WaitGroup
	)
	electors := map[string]*s3lect.Elector{}
	stopTime := s3lect.DefaultLeaderTimeout / 40 // well within run's LeaderTimeout/20 to SIGKILL
	for _, id := range []string{"a", "b", "c"} {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: key, ServerID: id, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		electors[id] = e
		wg.Go(func() { member(ctx, e, id, stopTime, &log) })
		time.Sleep(time.Second) // a leads first
	}
	time.Sleep(2*time.Minute + offset) // the followers are stable
	rec, ok := electors["b"].Leader()
	if !ok || rec.LeaderID != "a" {
		t.Fatalf("leader before the request = %+v, %v; want a", rec, ok)
	}
	requested := time.Now()
	old, req, err := requestStepDown(t.Context(), mem, key, to)
	if err != nil {
		t.Fatalf("requestStepDown() = %v", err)
	}
	if !sameLeadership(old, req) || req.StepDown == "" || req.To != to || !req.LastUpdated.Equal(old.LastUpdated) || req.TTL != old.TTL || req.Held != old.Held {
		t.Errorf("request %+v over %+v; want the leader's record as it is, with stepDown and to %q", req, old, to)
	}
	time.Sleep(2 * time.Minute)
	cancel()
	for _, e := range electors {
		e.Close()
	}
	wg.Wait()

	jobs := log.all()
	if len(jobs) < 2 || jobs[0].id != "a" {
		t.Fatalf("jobs %+v; want a's, then another's", jobs)
	}
	first, next := jobs[0], jobs[1]
	if d := first.end.Sub(requested); d > s3lect.DefaultFrequentInterval+stopTime {
		t.Errorf("a's work ended %v after the request; want within a FrequentInterval and its stop time", d)
	}
	switch {
	case next.id == "a":
		t.Errorf("the leadership went back to a, which was asked to step down; want another member")
	case to != "" && next.id != to:
		t.Errorf("the leadership went to %s; want %s, named by -to", next.id, to)
	}
	if !first.end.Before(next.start) {
		t.Errorf("%s's job started at %v, before a's stopped at %v", next.id, next.start.Sub(requested), first.end.Sub(requested))
	}
	// Followers read every InfrequentInterval: the next leader comes
	// within the renewal, the stop and one such read.
	if d := next.start.Sub(requested); d > s3lect.DefaultFrequentInterval+stopTime+s3lect.DefaultInfrequentInterval+s3lect.DefaultFrequentInterval {
		t.Errorf("%s led %v after the request; want within the renewal, the stop and the followers' read interval", next.id, d)
	}
	for i := 1; i < len(jobs); i++ {
		if !jobs[i-1].end.Before(jobs[i].start) {
			t.Errorf("jobs overlap: %+v and %+v", jobs[i-1], jobs[i])
		}
	}
	t.Logf("a stopped %v after the request; %s led %v after it", first.end.Sub(requested), next.id, next.start.Sub(requested))
}

// TestStepDownNobodyLeads: no lockfile, or a released one, is left alone;
// -to naming the leader itself is refused.
func TestStepDownNobodyLeads(t *testing.T) {
	mem := memstore.New()
	if _, _, err := requestStepDown(t.Context(), mem, "k", ""); !errors.Is(err, errNobodyLeads) {
		t.Errorf("requestStepDown(no lockfile) = %v; want errNobodyLeads", err)
	}
	if _, err := mem.PutIfMatch(t.Context(), "k", []byte(`{"leaderID":"a","leaderAddr":"","lastUpdated":"0001-01-01T00:00:00Z","term":3}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := requestStepDown(t.Context(), mem, "k", ""); !errors.Is(err, errNobodyLeads) || !strings.Contains(err.Error(), "a released") {
		t.Errorf("requestStepDown(released) = %v; want errNobodyLeads saying a released it", err)
	}
	if _, err := mem.PutIfMatch(t.Context(), "h", []byte(`{"leaderID":"a","leaderAddr":"","lastUpdated":"2026-11-26T16:00:00Z","term":3}`), ""); err != nil {
		t.Fatal(err)
	}
	var u errUsage
	if _, _, err := requestStepDown(t.Context(), mem, "h", "a"); !errors.As(err, &u) {
		t.Errorf("requestStepDown(-to the leader) = %v; want a usage error", err)
	}
}

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
	if started(t, dir, "b") {
		t.Errorf("b started its command; want only c, named by -to")
	}
	if lc[0].term != "2" {
		t.Errorf("c's command got S3LECT_TERM %q; want 2", lc[0].term)
	}
	t.Logf("a's command stopped %v after the release began; c's started %v after it (LeaderTimeout 1.5s)\n%s", lastA.Sub(begun), startC.Sub(begun), out)
}

// TestReleaseSeesRequestIgnored: a leader that renews over the request
// (the original s3lect renews whatever record names it) is reported as
// ignoring it, at once, instead of waiting for a lease that never lapses.
func TestReleaseSeesRequestIgnored(t *testing.T) {
	mem := memstore.New()
	orig := `{"leaderID":"old","leaderAddr":"","lastUpdated":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
	if _, err := mem.PutIfMatch(t.Context(), "k", []byte(orig), ""); err != nil {
		t.Fatal(err)
	}
	_, req, err := requestStepDown(t.Context(), mem, "k", "")
	if err != nil {
		t.Fatal(err)
	}
	go func() { // the original's next cycle: it reads, sees its own ID, and renews over what it read
		time.Sleep(50 * time.Millisecond)
		_, etag, _ := mem.Get(context.Background(), "k")
		renewed := `{"leaderID":"old","leaderAddr":"","lastUpdated":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
		mem.PutIfMatch(context.Background(), "k", []byte(renewed), etag)
	}()
	var said []string
	o := follow(t.Context(), mem, "k", req, time.Now(), time.Minute, time.Minute, 10*time.Millisecond, func(_ outcome, what string) { said = append(said, what) })
	if !o.ignored || o.released || o.lapsed || len(said) != 1 || said[0] != "ignored" {
		t.Errorf("follow() = %+v, said %v; want the request reported as ignored", o, said)
	}
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

	waitFor(t, 20*time.Second, "a to lead again", func() bool {
		rec, ok := lockfile(t, bucket, key)
		return ok && rec.LeaderID == "a" && !rec.LastUpdated.IsZero() && rec.Term == 2
	}, a)
	out, err = runBin(append(append([]string{"release"}, where...), "-wait", "20s")...)
	if binStatus(err) != exitNotMoved || !strings.Contains(out, "the job is back on a, the member you asked to step down") ||
		!strings.Contains(out, "no other member took over") {
		t.Errorf("plain release in a group of one = %q, %v; want status %d and the job back on a", out, err, exitNotMoved)
	}

	waitFor(t, 20*time.Second, "a to lead again", func() bool {
		rec, ok := lockfile(t, bucket, key)
		return ok && rec.LeaderID == "a" && !rec.LastUpdated.IsZero() && rec.Term == 3
	}, a)
	begun := time.Now()
	out, err = runBin(append(append([]string{"release"}, where...), "-to", "web-9", "-wait", "300ms")...)
	took := time.Since(begun)
	if binStatus(err) != exitNotMoved || !strings.Contains(out, "no other member seen leading within -wait 300ms") {
		t.Errorf("release -wait 300ms = %q, %v; want status %d, saying what is known at -wait", out, err, exitNotMoved)
	}
	// Before, release waited at least the lease and a tenth, plus a
	// second (2.65s here), whatever -wait said.
	if took >= 2650*time.Millisecond {
		t.Errorf("release -wait 300ms took %v; want it to end at -wait, not after the lease", took)
	}
	t.Logf("release -wait 300ms ended after %v:\n%s", took, out)
}

// TestTransferToAMemberThatJustJoined: release -to a member that started
// shortly before lands on it. It does not today, because of the library
// (reported, not fixed here: the root package is not this change's to
// edit). A follower that has just turned stable (followed a leader for
// LeaderTimeout) reads next at alignedRead's time: InfrequentInterval
// after its last read, then moved forward to its slot's renewal, up to
// k-1 more FrequentIntervals (k = InfrequentInterval/FrequentInterval),
// so up to 2×InfrequentInterval − FrequentInterval after its last read.
// The transfer window, transferWait = max(lease, InfrequentInterval) +
// FrequentInterval, assumes the target reads within an
// InfrequentInterval, and closes before that read: the member asked to
// step down takes its own release back. Here (the intervals,
// 500ms/2s/1.5s, c started 1.7 s before the request) c reads 3.5 s after
// its previous read, the window is 2.5 s, and a leads again 2.81 s after
// the request; 4 of 200 join and request times fail the same way (joins
// 0-450 ms after a renewal, requests 1.5-3.4 s after the join). At the
// defaults the gap can reach 55 s against a 35 s window. A fix is the
// library's: a window of max(lease, 2×InfrequentInterval −
// FrequentInterval) + FrequentInterval, or a slot shift that never
// postpones a read past InfrequentInterval.
func TestTransferToAMemberThatJustJoined(t *testing.T) {
	if os.Getenv("S3LECT_TEST_KNOWN_BUGS") == "" {
		t.Skip("fails until the library's transfer window covers a newly stable follower's read (see the comment); S3LECT_TEST_KNOWN_BUGS=1 runs it")
	}
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		key := "leader/job.json"
		ctx, cancel := context.WithCancel(t.Context())
		var (
			log      jobLog
			wg       sync.WaitGroup
			electors []*s3lect.Elector
		)
		add := func(id string) {
			e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: key, ServerID: id, Logger: slog.New(slog.DiscardHandler),
				FrequentInterval: 500 * time.Millisecond, InfrequentInterval: 2 * time.Second, LeaderTimeout: 1500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			electors = append(electors, e)
			wg.Go(func() { member(ctx, e, id, 10*time.Millisecond, &log) })
		}
		add("A")
		time.Sleep(time.Second)
		add("B")
		time.Sleep(10 * time.Second)
		add("C")
		time.Sleep(1700 * time.Millisecond)
		requested := time.Now()
		if _, _, err := requestStepDown(t.Context(), mem, key, "C"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(8 * time.Second)
		cancel()
		for _, e := range electors {
			e.Close()
		}
		wg.Wait()
		for _, j := range log.all() {
			if j.start.After(requested) {
				if j.id != "C" {
					t.Errorf("%s took over %v after release -to C; want C, which had run for 1.7 s", j.id, j.start.Sub(requested))
				}
				return
			}
		}
		t.Errorf("nobody took over within 8 s of release -to C")
	})
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
