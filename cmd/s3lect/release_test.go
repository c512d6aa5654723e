package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestStepDownInVirtualTime: a leader and a stable follower at the
// default intervals; an operator's stepDown. The leader's context ends at
// its next renewal (ErrLeadershipLost), and the follower takes over no
// sooner than a whole LeaderTimeout after the step-down was written, after
// the leader's end: never two live leaders.
func TestStepDownInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		newElector := func(id string) *s3lect.Elector {
			e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: "leader/job.json", ServerID: id,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		a, b := newElector("a"), newElector("b")
		defer a.Close()
		defer b.Close()
		lead, err := a.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		won := make(chan time.Time, 1)
		go func() {
			l, err := b.Campaign(t.Context())
			if err != nil {
				t.Errorf("b.Campaign() = %v", err)
				close(won)
				return
			}
			won <- time.Now()
			l.Resign(context.Background())
		}()
		time.Sleep(2 * time.Minute) // b is a stable follower by now
		if lead.Context().Err() != nil {
			t.Fatalf("a's leadership ended before the step-down: %v", context.Cause(lead.Context()))
		}

		released := time.Now()
		old, written, err := stepDown(t.Context(), mem, "leader/job.json", time.Now)
		if err != nil {
			t.Fatalf("stepDown() = %v", err)
		}
		if written.LeaderID != "a" || written.Term != old.Term || written.TTL != old.TTL || written.Held != 0 || written.Lease == old.Lease || written.Lease == "" ||
			!written.LastUpdated.After(old.LastUpdated) {
			t.Errorf("stepDown wrote %+v over %+v; want a's ID, term and ttl, held 0, a new lease, a later lastUpdated", written, old)
		}

		<-lead.Context().Done()
		ended := time.Now()
		if cause := context.Cause(lead.Context()); !errors.Is(cause, s3lect.ErrLeadershipLost) {
			t.Errorf("a's leadership ended with %v; want ErrLeadershipLost", cause)
		}
		if d := ended.Sub(released); d > s3lect.DefaultFrequentInterval {
			t.Errorf("a's leadership ended %v after the step-down; want within FrequentInterval (%v), at its next renewal", d, s3lect.DefaultFrequentInterval)
		}
		at, ok := <-won
		if !ok {
			return
		}
		if d := at.Sub(released); d < s3lect.DefaultLeaderTimeout {
			t.Errorf("b took over %v after the step-down; want no sooner than LeaderTimeout (%v)", d, s3lect.DefaultLeaderTimeout)
		}
		if !ended.Before(at) {
			t.Errorf("b took over at %v, before a's leadership ended at %v", at, ended)
		}
		t.Logf("a's leadership ended %v after the step-down; b took over %v after it", ended.Sub(released), at.Sub(released))
	})
}

// TestStepDownNobodyLeads: no lockfile, or a released one, is left alone.
func TestStepDownNobodyLeads(t *testing.T) {
	mem := memstore.New()
	if _, _, err := stepDown(t.Context(), mem, "k", time.Now); !errors.Is(err, errNobodyLeads) {
		t.Errorf("stepDown(no lockfile) = %v; want errNobodyLeads", err)
	}
	if _, err := mem.PutIfMatch(t.Context(), "k", []byte(`{"leaderID":"a","leaderAddr":"","lastUpdated":"0001-01-01T00:00:00Z","term":3}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := stepDown(t.Context(), mem, "k", time.Now); !errors.Is(err, errNobodyLeads) || !strings.Contains(err.Error(), "a released") {
		t.Errorf("stepDown(released) = %v; want errNobodyLeads saying a released it", err)
	}
}

// TestReleaseCommand: s3lect release on MinIO, with two runners. The
// leading runner's command is stopped as on a loss (and the runner, with
// -once, exits 4); the other runner's command starts only after it, and no
// sooner than LeaderTimeout after the release began.
func TestReleaseCommand(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := "cli/release.json", t.TempDir()
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-timeout", "1500ms"}
	if out, err := runBin(append([]string{"release"}, where...)...); err != nil || !strings.Contains(out, "nobody leads") {
		t.Errorf("release with no lockfile = %q, %v; want status 0 and nobody leads", out, err)
	}
	a := start(t, runArgs(endpoint, bucket, key, "a", []string{"-once"}, childScript(dir, "a", false))...)
	waitFor(t, 20*time.Second, "a's command to start", func() bool { return started(t, dir, "a") })
	b := start(t, runArgs(endpoint, bucket, key, "b", nil, childScript(dir, "b", false))...)
	b.waitLine(t, 10*time.Second, "waiting: a leads (term")

	begun := time.Now()
	out, err := runBin(append([]string{"release"}, where...)...)
	if err != nil || !strings.Contains(out, "a (term 1) steps down") {
		t.Fatalf("release = %q, %v; want status 0 and a (term 1) steps down", out, err)
	}
	if code := a.status(t); code != exitLost || !strings.Contains(a.stderr.String(), "leadership ended") {
		t.Errorf("a (-once) exited %d after the release; want %d saying its leadership ended\n%s", code, exitLost, a.stderr.String())
	}
	waitFor(t, 20*time.Second, "b's command to start", func() bool { return started(t, dir, "b") })
	la, lb := readLog(t, dir, "a"), readLog(t, dir, "b")
	lastA, startB := la[len(la)-1].at, lb[0].at
	// SIGTERM, then SIGKILL LeaderTimeout/20 later, as on any loss (on a
	// busy machine the child's trap may not run before the SIGKILL).
	if !strings.Contains(a.stderr.String(), "stopping the command: SIGTERM now") {
		t.Errorf("a did not stop its command as on a loss:\n%s", a.stderr.String())
	}
	if !lastA.Before(startB) {
		t.Errorf("a's command last wrote at %v, after b's command started at %v", lastA.Format(time.StampMicro), startB.Format(time.StampMicro))
	}
	if d := startB.Sub(begun); d < 1500*time.Millisecond {
		t.Errorf("b's command started %v after the release began; want no sooner than LeaderTimeout 1.5s", d)
	}
	if lb[0].term != "2" {
		t.Errorf("b's command got S3LECT_TERM %q; want 2", lb[0].term)
	}
	t.Logf("a's command stopped %v after the release began; b's started %v after it", lastA.Sub(begun), startB.Sub(begun))
}
