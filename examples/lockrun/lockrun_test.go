package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildLockrun compiles this command into a temporary directory.
func buildLockrun(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockrun")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build lockrun: %v\n%s", err, out)
	}
	return bin
}

// proc is one lockrun process in a process group of its own, so that a
// SIGKILL takes its child with it, as the death of a machine would.
type proc struct {
	id     string
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, once done is closed
}

// syncBuffer is a bytes.Buffer that a process can write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// wait returns the process's exit once it has exited.
func (p *proc) wait() error {
	<-p.done
	return p.err
}

func startLockrun(t *testing.T, bin, endpoint, bucket, key, id, marker string) *proc {
	t.Helper()
	// The command records its term, then sleeps until told to stop.
	return startCommand(t, bin, endpoint, bucket, key, id, "2s", fmt.Sprintf(`echo "$S3LECT_TERM" > %q; exec sleep 600`, marker))
}

// startCommand starts lockrun running the shell script, with short
// timings and the given grace period.
func startCommand(t *testing.T, bin, endpoint, bucket, key, id, grace, script string) *proc {
	t.Helper()
	p := &proc{id: id, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "-bucket", bucket, "-key", key, "-id", id, "-path-style",
		"-frequent", "300ms", "-infrequent", "900ms", "-timeout", "1500ms", "-grace", grace,
		"--", "sh", "-c", script)
	p.cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_S3="+endpoint)
	p.cmd.Stderr = &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.wait()
	})
	return p
}

// waitLockfile polls the lockfile until ok accepts its record.
func waitLockfile(t *testing.T, st store.Store, key string, ok func(s3lect.Record) bool) s3lect.Record {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a liveness bound, not a speed limit
	for time.Now().Before(deadline) {
		if data, _, err := st.Get(t.Context(), key); err == nil {
			if rec, err := s3lect.ParseRecord(data); err == nil && ok(rec) {
				return rec
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("lockfile %s never reached the expected state", key)
	return s3lect.Record{}
}

func TestThreeProcessesSurviveSIGKILL(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	bin := buildLockrun(t)
	key := "lockrun/sigkill.json"
	dir := t.TempDir()
	procs := map[string]*proc{}
	for _, id := range []string{"p1", "p2", "p3"} {
		procs[id] = startLockrun(t, bin, endpoint, bucket, key, id, filepath.Join(dir, id))
	}

	first := waitLockfile(t, st, key, func(r s3lect.Record) bool { return !r.LastUpdated.IsZero() })
	time.Sleep(2 * time.Second) // let the followers settle
	if err := syscall.Kill(-procs[first.LeaderID].cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	procs[first.LeaderID].wait()
	killed := procs[first.LeaderID]
	delete(procs, first.LeaderID)

	next := waitLockfile(t, st, key, func(r s3lect.Record) bool {
		return r.LeaderID != killed.id && !r.LastUpdated.IsZero()
	})
	time.Sleep(3 * time.Second) // two lease timeouts: no second takeover may follow
	settled := waitLockfile(t, st, key, func(s3lect.Record) bool { return true })
	if settled.LeaderID != next.LeaderID || settled.Term != first.Term+1 {
		t.Fatalf("after SIGKILL of %s (term %d): lockfile names %s term %d, then %s term %d; want one new leader with term %d",
			killed.id, first.Term, next.LeaderID, next.Term, settled.LeaderID, settled.Term, first.Term+1)
	}
	// Exactly one surviving process started its command, with the new term.
	for id := range procs {
		b, err := os.ReadFile(filepath.Join(dir, id))
		switch {
		case id == settled.LeaderID && (err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(settled.Term)):
			t.Errorf("new leader %s's command saw S3LECT_TERM %q (%v); want %d", id, b, err, settled.Term)
		case id != settled.LeaderID && !errors.Is(err, os.ErrNotExist):
			t.Errorf("follower %s ran its command (%q)", id, b)
		}
	}

	// SIGTERM: the leader forwards it, waits for its command, then releases.
	leader := procs[settled.LeaderID]
	leader.cmd.Process.Signal(syscall.SIGTERM)
	err := leader.wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("leader lockrun exit = %v; want status %d, its command's (killed by SIGTERM)\n%s", err, 128+int(syscall.SIGTERM), leader.stderr.String())
	}
	released := waitLockfile(t, st, key, func(s3lect.Record) bool { return true })
	if !released.LastUpdated.IsZero() && released.LeaderID == leader.id {
		t.Errorf("lockfile after the leader's SIGTERM = %+v; want it released or taken over", released)
	}
	for id, p := range procs {
		if id == leader.id {
			continue
		}
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		if err := p.wait(); err != nil && !strings.Contains(err.Error(), "143") {
			// a follower that took over in the meantime exits with its command's status
			t.Logf("%s exit: %v", id, err)
		}
	}
}

func TestStatus(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	key := "lockrun/status.json"
	var out, errb bytes.Buffer
	args := []string{"-status", "-bucket", bucket, "-key", key, "-path-style"}
	if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "absent") {
		t.Fatalf("status of an absent lockfile: exit %d, %q %q", code, out.String(), errb.String())
	}

	e, err := s3lect.New(s3lect.ElectorConfig{Bucket: bucket, S3PathStyle: true, LockfilePath: key, ServerID: "writer", ServerAddr: "10.0.0.1:8443"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lead, err := e.Campaign(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("status: exit %d, %s", code, errb.String())
	}
	for _, want := range []string{"leader:  writer", "10.0.0.1:8443", "term:    1", "ago"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output %q lacks %q", out.String(), want)
		}
	}
	lead.Resign(context.Background())
	out.Reset()
	run(args, &out, &errb)
	if !strings.Contains(out.String(), "vacant (released)") || !strings.Contains(out.String(), "term:    1") {
		t.Errorf("status after resign = %q; want vacant with term 1", out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{},                            // no bucket
		{"-bucket", "b"},              // no key
		{"-bucket", "b", "-key", "k"}, // no command
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
}

func TestLossStopsCommandAndCampaignsAgain(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	bin := buildLockrun(t)
	key := "lockrun/loss.json"
	dir := t.TempDir()
	marker := filepath.Join(dir, "terms")
	// The command ignores SIGTERM, so only the SIGKILL after -grace stops it.
	p := startCommand(t, bin, endpoint, bucket, key, "p1", "1s",
		fmt.Sprintf(`echo "$S3LECT_TERM" >> %q; trap '' TERM; while :; do sleep 0.05; done`, marker))

	first := waitLockfile(t, st, key, func(r s3lect.Record) bool { return r.LeaderID == "p1" && !r.LastUpdated.IsZero() })
	// Another writer takes the lockfile: p1's next renewal finds it changed.
	_, etag, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	thief := s3lect.Record{LeaderID: "thief", LeaderAddr: "", LastUpdated: time.Now().UTC(), Term: first.Term + 1}
	stolen, _ := json.Marshal(thief)
	if _, err := st.PutIfMatch(t.Context(), key, stolen, etag); err != nil {
		t.Fatalf("steal the lease: %v", err)
	}
	// p1 loses, kills its stubborn command after the grace period, campaigns
	// again, and takes the thief's silent lease over after LeaderTimeout.
	again := waitLockfile(t, st, key, func(r s3lect.Record) bool { return r.LeaderID == "p1" && r.Term > thief.Term })
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(marker)
		terms := strings.Fields(string(b))
		if len(terms) == 2 {
			if terms[0] != fmt.Sprint(first.Term) || terms[1] != fmt.Sprint(again.Term) {
				t.Errorf("command ran with terms %v; want %d then %d", terms, first.Term, again.Term)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("command ran with terms %v; want a second run after the re-election\n%s", terms, p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(p.stderr.String(), "leadership ended") {
		t.Errorf("lockrun did not report the loss:\n%s", p.stderr.String())
	}
}
