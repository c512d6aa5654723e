package main

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// timings are the runners' timings in these tests: renew every 200ms,
// take over after a lease of 4s. A leader steps down when 3.6s (the lease
// less a tenth) pass without a successful renewal: with 1.5s (1.35s) a
// two-core machine at load average 15 to 20 missed that now and then, and
// the leadership a test had set up moved before the step it checks (the
// loaded CI run's TestPinnedPeerMode: a lost its leadership before the
// release). The lease is only waited out where a test crashes or cuts
// off a leader.
var timings = []string{"-frequent", "200ms", "-infrequent", "600ms", "-timeout", "4s"}

// fast is timings for an s3:// store on MinIO (path-style addressing).
var fast = append(slices.Clip(timings), "-path-style")

// runArgs builds `s3lect run` arguments for one runner.
func runArgs(endpoint, bucket, key, id string, extra []string, command []string) []string {
	args := append([]string{"run", "-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-id", id}, fast...)
	args = append(args, extra...)
	return append(append(args, "--"), command...)
}

// runOn builds `s3lect run` arguments for one runner on any store URL.
func runOn(url, id string, command ...string) []string {
	args := append(append([]string{"run", "-store", url, "-id", id}, timings...), "--")
	return append(args, command...)
}

// lockfile reads the test lockfile directly.
func lockfile(t *testing.T, bucket, key string) (s3lect.Record, bool) {
	t.Helper()
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	data, _, err := st.Get(context.Background(), key)
	if err != nil {
		return s3lect.Record{}, false
	}
	rec, err := s3lect.ParseRecord(data)
	return rec, err == nil
}

func started(t *testing.T, dir, id string) bool {
	evs := readLog(t, dir, id)
	return len(evs) > 0 && evs[0].kind == "start"
}

// TestCutOffLeaderStopsBeforeTakeover partitions the leading runner from
// the store: its command, which ignores SIGTERM, must be dead before the
// other runner's command starts.
func TestCutOffLeaderStopsBeforeTakeover(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/cutoff.json"), t.TempDir()
	proxy := newStallProxy(t, strings.TrimPrefix(endpoint, "http://"))
	a := start(t, runArgs("http://"+proxy.addr(), bucket, key, "a", []string{"-once"}, childScript(dir, "a", true))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })
	b := start(t, runArgs(endpoint, bucket, key, "b", nil, childScript(dir, "b", true))...)
	b.waitLine(t, eventually, "waiting: a leads (term")

	proxy.stalled.Store(true)
	waitFor(t, eventually, "b's command to start", func() bool { return started(t, dir, "b") }, a, b)
	a.waitLine(t, eventually, "command stopped")

	la, lb := readLog(t, dir, "a"), readLog(t, dir, "b")
	lastA, startB := la[len(la)-1].at, lb[0].at
	if !lastA.Before(startB) {
		t.Errorf("a's command last wrote at %v, after b's command started at %v: two ran at once\na:\n%s\nb:\n%s",
			lastA.Format(time.StampMicro), startB.Format(time.StampMicro), a.stderr.String(), b.stderr.String())
	}
	t.Logf("a's command's last sign of life %v before b's command started", startB.Sub(lastA))
	for _, f := range []string{"a.pid", "a.gpid"} {
		if pid := readPID(t, dir+"/"+f); alive(pid) {
			t.Errorf("a's process %d (%s) still runs after its leadership was lost", pid, f)
		}
	}
	if !strings.Contains(a.stderr.String(), "leadership ended") {
		t.Errorf("a did not say its leadership ended:\n%s", a.stderr.String())
	}
	if code := a.status(t); code != exitLost {
		t.Errorf("a (-once) exited with %d after losing its leadership; want %d", code, exitLost)
	}
	proxy.stalled.Store(false)
}

// TestSIGKILLOfRunnerKillsGroup kills the leading runner with SIGKILL: its
// command and the command's child must die with it, before the next
// runner's command starts.
func TestSIGKILLOfRunnerKillsGroup(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/sigkill.json"), t.TempDir()
	a := start(t, runArgs(endpoint, bucket, key, "a", nil, childScript(dir, "a", true))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })
	b := start(t, runArgs(endpoint, bucket, key, "b", nil, childScript(dir, "b", true))...)
	b.waitLine(t, eventually, "waiting: a leads (term")
	child, grandchild := readPID(t, dir+"/a.pid"), readPID(t, dir+"/a.gpid")

	killed := time.Now()
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	var gone time.Time
	waitFor(t, eventually, "a's command and its child to die with a", func() bool {
		gone = time.Now()
		return !alive(child) && !alive(grandchild)
	})
	t.Logf("a's command and its child gone %v after SIGKILL of a", gone.Sub(killed))
	waitFor(t, eventually, "b's command to start", func() bool { return started(t, dir, "b") }, a, b)
	la, lb := readLog(t, dir, "a"), readLog(t, dir, "b")
	if !gone.Before(lb[0].at) || !la[len(la)-1].at.Before(lb[0].at) {
		t.Errorf("b's command started at %v; a's command was seen gone at %v, last wrote at %v",
			lb[0].at.Format(time.StampMicro), gone.Format(time.StampMicro), la[len(la)-1].at.Format(time.StampMicro))
	}
}

// TestSIGTERMDrainsReleasesHandsOver stops the leading runner with
// SIGTERM: the command gets it and drains, the runner exits with the
// command's status after releasing, and the waiting runner starts at its
// next read instead of waiting out the lease.
func TestSIGTERMDrainsReleasesHandsOver(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/sigterm.json"), t.TempDir()
	// A lease far longer than the next read takes even on a loaded
	// machine: a takeover by expiry could not come sooner than 20s after
	// a's last write, so b's start before that is the release's doing.
	slow := []string{"-timeout", "20s"}
	a := start(t, runArgs(endpoint, bucket, key, "a", slow, childScript(dir, "a", false))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })
	b := start(t, runArgs(endpoint, bucket, key, "b", slow, childScript(dir, "b", false))...)
	b.waitLine(t, eventually, "waiting: a leads (term")

	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.status(t); code != 0 {
		t.Errorf("a exited with %d; want 0, its command's status\n%s", code, a.stderr.String())
	}
	for _, want := range []string{"announcing the release", "release announced", "forwarding it to the command", "released s3://"} {
		if !strings.Contains(a.stderr.String(), want) {
			t.Errorf("a's output lacks %q:\n%s", want, a.stderr.String())
		}
	}
	la := readLog(t, dir, "a")
	if last := la[len(la)-1]; last.kind != "stop" {
		t.Errorf("a's command's last record is %q; want stop (SIGTERM forwarded and handled)", last.kind)
	}
	waitFor(t, eventually, "b's command to start", func() bool { return started(t, dir, "b") }, a, b)
	lb := readLog(t, dir, "b")
	handover := lb[0].at.Sub(a.exitAt)
	t.Logf("b's command started %v after a exited", handover)
	if lb[0].at.Before(la[len(la)-1].at) {
		t.Errorf("b's command started before a's stopped")
	}
	if handover >= 18*time.Second {
		t.Errorf("b's command started %v after a exited; a release is taken at the next read, before the lease (20s) could run out", handover)
	}
	if lb[0].term == "" || lb[0].term == readLog(t, dir, "a")[0].term {
		t.Errorf("S3LECT_TERM: a %q, b %q; want two different terms", la[0].term, lb[0].term)
	}

	// status sees b's leadership.
	st := start(t, "status", "-store", "s3://"+bucket+"/"+key, "-endpoint", endpoint, "-path-style")
	if code := st.status(t); code != 0 || !strings.Contains(st.stderr.String(), "leader:  b") || !strings.Contains(st.stderr.String(), "state:   held") {
		t.Errorf("status = %d\n%s\nwant 0, held by b", code, st.stderr.String())
	}
}

// TestStoreErrorsSaySo checks that a broken store is reported within
// seconds, and that refusals end the run with status 5 and the fix.
func TestStoreErrorsSaySo(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	dead := "http://127.0.0.1:" + freePort(t) // nothing listens on it
	cases := []struct {
		name     string
		endpoint string
		bucket   string
		env      []string
		want     string
		code     int // 0: keeps retrying
	}{
		{"wrong endpoint", dead, bucket, nil, "has not answered since start", 0},
		{"missing bucket", endpoint, "no-such-bucket-s3lect", nil, "NoSuchBucket: the bucket does not exist; create it", exitRefused},
		{"bad credentials", endpoint, bucket, []string{"AWS_ACCESS_KEY_ID=nobody", "AWS_SECRET_ACCESS_KEY=wrong-secret"}, "InvalidAccessKeyId", exitRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startEnv(t, tc.env, runArgs(tc.endpoint, tc.bucket, "cli/errors.json", "e", nil, []string{"true"})...)
			p.waitLine(t, eventually, tc.want)
			if tc.code == 0 {
				// It keeps retrying (every 200ms here) but says so once: the
				// same error is repeated only every 30s.
				time.Sleep(2 * time.Second)
				if n := strings.Count(p.stderr.String(), "has not answered since start"); n != 1 {
					t.Errorf("%d never-answered lines in 2s of the same failure; want 1\n%s", n, p.stderr.String())
				}
				return
			}
			if code := p.status(t); code != tc.code {
				t.Errorf("exit status %d; want %d\n%s", code, tc.code, p.stderr.String())
			}
			if out := p.stderr.String(); strings.Contains(out, "s3lect: s3lect:") || strings.Contains(out, ": s3lect: ") {
				t.Errorf("the message says s3lect twice:\n%s", out)
			}
		})
	}
}

// startEnv is start with extra environment variables.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return start(t, args...)
}

// TestUsage checks the help of the command and its subcommands, and that
// bad input is refused with a message saying what to do. A table on
// dispatch, main's body, with no process: every case ends at the flags,
// before a store is reached (TestVersion runs the binary itself).
func TestUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-h"}, 0, []string{"usage: s3lect"}},
		{[]string{"--help"}, 0, []string{"usage: s3lect"}},
		{[]string{"run", "-h"}, 0, []string{"usage: s3lect", "-- command", "S3LECT_TERM", "-grace"}},
		{[]string{"run", "--help"}, 0, []string{"usage: s3lect", "-- command", "S3LECT_TERM", "-grace"}},
		{[]string{"status", "-h"}, 0, []string{"usage: s3lect"}},
		{[]string{"watch", "--help"}, 0, []string{"usage: s3lect"}},
		{[]string{}, exitUsage, []string{"usage: s3lect"}},
		{[]string{"lock"}, exitUsage, []string{`unknown subcommand "lock"`}},
		{[]string{"run", "-store", "s3://b/k"}, exitUsage, []string{"no command given"}},
		{[]string{"run", "--", "true"}, exitUsage, []string{"no lockfile named"}},
		{[]string{"run", "-store", "ftp://b/k", "--", "true"}, exitUsage, []string{"the ftp:// scheme is not supported"}},
		{[]string{"run", "-store", "gs://only-bucket", "--", "true"}, exitUsage, []string{"want gs://only-bucket/path/to/lock.json"}},
		{[]string{"run", "-store", "azblob:///k", "--", "true"}, exitUsage, []string{"want azblob://container/path/to/lock.json"}},
		{[]string{"run", "-store", "nats://127.0.0.1:4222/onlybucket", "--", "true"}, exitUsage, []string{"want nats://host:port/bucket/path/to/lock.json"}},
		{[]string{"run", "-bucket", "b", "--", "true"}, exitUsage, []string{"no lockfile key named"}},
		{[]string{"run", "-store", "s3://b/k", "-endpoint", "127.0.0.1:9000", "--", "true"}, exitUsage, []string{"not an http:// or https:// URL"}},
		{[]string{"run", "-store", "s3://b/k", "-timeout", "1s", "-frequent", "1s", "--", "true"}, exitUsage, []string{"LeaderTimeout 1s must exceed two FrequentIntervals"}},
		{[]string{"status", "-store", "s3://b/k", "extra"}, exitUsage, []string{`unexpected argument "extra"`}},
	}
	for _, tc := range cases {
		var out strings.Builder
		code := dispatch(tc.args, &out, &out)
		for _, want := range tc.want {
			if code != tc.code || !strings.Contains(out.String(), want) {
				t.Errorf("s3lect %q: status %d\n%s\nwant status %d and %q", tc.args, code, out.String(), tc.code, want)
			}
		}
	}
}

func runBin(args ...string) (string, error) {
	var out syncBuffer
	cmd := execCommand(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestGraceAndNotFound checks the two other ends of a run: a command that
// ignores the forwarded SIGTERM is killed after -grace (status 137, and
// the lockfile released), and a command that cannot be started gives
// status 127 and releases too.
func TestGraceAndNotFound(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/grace.json"), t.TempDir()
	a := start(t, runArgs(endpoint, bucket, key, "a", []string{"-grace", "300ms"}, childScript(dir, "a", true))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })
	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.status(t); code != 128+int(syscall.SIGKILL) || !strings.Contains(a.stderr.String(), "did not exit within -grace 300ms") {
		t.Errorf("a exited %d; want %d after -grace\n%s", code, 128+int(syscall.SIGKILL), a.stderr.String())
	}
	for _, f := range []string{"a.pid", "a.gpid"} {
		if pid := readPID(t, dir+"/"+f); alive(pid) {
			t.Errorf("a's process %d (%s) outlived -grace", pid, f)
		}
	}
	rec, ok := lockfile(t, bucket, key)
	if !ok || !rec.LastUpdated.IsZero() {
		t.Errorf("lockfile after -grace: %+v; want released", rec)
	}

	// A command that cannot start is found before the campaign: no term
	// is spent, and the lockfile is left as it was (released by a).
	n := start(t, runArgs(endpoint, bucket, key, "n", nil, []string{dir + "/no-such-command"})...)
	if code := n.status(t); code != exitNotStart || !strings.Contains(n.stderr.String(), "no-such-command") || strings.Contains(n.stderr.String(), "campaigning") {
		t.Errorf("run of a missing command exited %d; want %d naming it, before campaigning\n%s", code, exitNotStart, n.stderr.String())
	}
	if after, ok := lockfile(t, bucket, key); !ok || after != rec {
		t.Errorf("lockfile after a command that could not start: %+v; want %+v, as a released it", after, rec)
	}
}
