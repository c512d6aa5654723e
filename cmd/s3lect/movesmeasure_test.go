//go:build s3lect_measure

package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

var moveTrials = flag.Int("moves.trials", 10, "TestMeasurePlannedMoves: moves per mode and action")

// TestMeasurePlannedMoves measures planned moves as a user meets them:
// three real `s3lect run` runners on MinIO at the default intervals (5s,
// 30s, 15s), in storage mode and in pinned peer mode (-peer-addr alone),
// moved -moves.trials times each by SIGTERM to the leading runner (which
// is then started again), by `s3lect release` and by `s3lect release -to`
// another runner, each after the
// followers have followed the leader for 20 to 45s (stable). It prints, per
// mode and action, the job's outage (the old command's last line, written
// by its SIGTERM trap, to the new command's first) and the time from the
// action to the new command's start, median and worst. It asserts only
// what must hold (the next job starts after the old one stopped, on
// another runner), never a wall-clock limit. It runs the six series at
// once, each on a lockfile of its own. About 12 minutes for 10 moves. A
// measurement, not a check: it is built only with the tag s3lect_measure,
// so the ordinary test runs never see it:
//
//	go test -tags s3lect_measure -run TestMeasurePlannedMoves -v -parallel 6 -timeout 60m ./cmd/s3lect -moves.trials=10
func TestMeasurePlannedMoves(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	for _, series := range []struct {
		mode, action string
		ports        []string
	}{
		{"storage", "sigterm", nil},
		{"storage", "release", nil},
		{"storage", "release-to", nil},
		{"pinned", "sigterm", []string{"19451", "19452", "19453"}},
		{"pinned", "release", []string{"19454", "19455", "19456"}},
		{"pinned", "release-to", []string{"19457", "19458", "19459"}},
	} {
		t.Run(series.mode+"/"+series.action, func(t *testing.T) {
			t.Parallel()
			measureMoves(t, endpoint, bucket, series.mode, series.action, series.ports, *moveTrials)
		})
	}
}

// quietJob is a command for the measurement: it writes "start TERM NANOS"
// to dir/ID.log when it starts and "stop NANOS" when SIGTERM ends it, and
// nothing in between (no drain).
func quietJob(dir, id string) []string {
	log := filepath.Join(dir, id+".log")
	return []string{"sh", "-c", fmt.Sprintf(`echo "start $S3LECT_TERM $(date +%%s%%N)" >> %[1]q
trap 'echo "stop $(date +%%s%%N)" >> %[1]q; exit 0' TERM
while :; do sleep 1 & wait $!; done`, log)}
}

func measureMoves(t *testing.T, endpoint, bucket, mode, action string, ports []string, trials int) {
	key, dir := "cli/measure-"+mode+"-"+action+".json", t.TempDir()
	ids := []string{"a", "b", "c"}
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style"}
	runner := func(i int) *proc {
		args := append([]string{"run"}, where...)
		args = append(args, "-id", ids[i])
		if ports != nil {
			args = append(args, "-peer-addr", "127.0.0.1:"+ports[i])
		}
		return start(t, append(append(args, "--"), quietJob(dir, ids[i])...)...)
	}
	procs := make([]*proc, len(ids))
	for i := range ids {
		procs[i] = runner(i)
		if i == 0 {
			waitFor(t, 60*time.Second, "a's command to start", func() bool { return starts(t, dir, "a") == 1 }, procs[0])
		}
	}
	total := func() int {
		n := 0
		for _, id := range ids {
			n += starts(t, dir, id)
		}
		return n
	}
	var outages, moves []time.Duration
	for trial := range trials {
		// The followers have followed the leader for longer than
		// LeaderTimeout (stable), at a random phase of their reads.
		time.Sleep(20*time.Second + rand.N(25*time.Second))
		rec, ok := lockfile(t, bucket, key)
		if !ok || rec.LastUpdated.IsZero() {
			t.Fatalf("trial %d: lockfile %+v; want a leader", trial, rec)
		}
		li := slices.Index(ids, rec.LeaderID)
		to := ""
		before := total()
		begun := time.Now()
		switch action {
		case "sigterm":
			procs[li].cmd.Process.Signal(syscall.SIGTERM)
			if code := procs[li].status(t); code != 0 {
				t.Fatalf("trial %d: %s's runner exited %d after SIGTERM\n%s", trial, rec.LeaderID, code, procs[li].stderr.String())
			}
		case "release":
			if out, err := runBin(append(append([]string{"release"}, where...), "-wait", "0")...); err != nil || !strings.Contains(out, "asked "+rec.LeaderID) {
				t.Fatalf("trial %d: release = %v\n%s", trial, err, out)
			}
		case "release-to":
			to = ids[(li+1+rand.IntN(len(ids)-1))%len(ids)]
			if out, err := runBin(append(append([]string{"release"}, where...), "-to", to, "-wait", "0")...); err != nil || !strings.Contains(out, "asked "+rec.LeaderID) {
				t.Fatalf("trial %d: release -to %s = %v\n%s", trial, to, err, out)
			}
		}
		waitFor(t, 3*time.Minute, "the next job to start", func() bool { return total() > before }, procs...)
		var next event
		nextID := ""
		for _, id := range ids {
			evs := readLog(t, dir, id)
			for _, ev := range evs {
				if ev.kind == "start" && ev.at.After(begun) && (nextID == "" || ev.at.Before(next.at)) {
					next, nextID = ev, id
				}
			}
		}
		old := readLog(t, dir, rec.LeaderID)
		stopped := old[len(old)-1]
		if stopped.kind != "stop" {
			// SIGKILL (LeaderTimeout/20 after SIGTERM) came before the
			// job's trap wrote its line (a loaded machine): the job was
			// gone when its runner says so.
			at, ok := commandStopped(procs[li].stderr.String())
			t.Logf("trial %d: %s's job has no stop line; its runner says it stopped at %v", trial, rec.LeaderID, at)
			if !ok {
				t.Fatalf("trial %d: %s's job has no stop line, and its runner did not say when it stopped:\n%s", trial, rec.LeaderID, procs[li].stderr.String())
			}
			stopped = event{kind: "stop", at: at}
		}
		if to != "" && nextID != to {
			t.Errorf("trial %d: %s took over; want %s, named by -to", trial, nextID, to)
		}
		if nextID == rec.LeaderID || !stopped.at.Before(next.at) {
			t.Errorf("trial %d: %s's job started at %v, %s's stopped at %v; want another runner's start after the old job's stop",
				trial, nextID, next.at, rec.LeaderID, stopped.at)
		}
		outages = append(outages, next.at.Sub(stopped.at))
		moves = append(moves, next.at.Sub(begun))
		t.Logf("%s %s trial %d: %s → %s, outage %v, action to the next job %v", mode, action, trial, rec.LeaderID, nextID,
			next.at.Sub(stopped.at).Round(time.Millisecond), next.at.Sub(begun).Round(time.Millisecond))
		if next.at.Sub(stopped.at) > time.Second {
			// What the next leader's runner saw, to tell the machine's
			// load from the protocol's reads.
			ni := slices.Index(ids, nextID)
			lines := strings.Split(strings.TrimSpace(procs[ni].stderr.String()), "\n")
			t.Logf("trial %d: outage over 1s; %s's last lines:\n%s", trial, nextID, strings.Join(lines[max(0, len(lines)-4):], "\n"))
		}
		if action == "sigterm" {
			procs[li] = runner(li) // back as a follower
		}
	}
	slices.Sort(outages)
	slices.Sort(moves)
	t.Logf("%s mode, %s, default intervals, %d moves: outage median %v, worst %v; action to the next job median %v, worst %v",
		mode, action, len(outages), outages[len(outages)/2].Round(time.Millisecond), outages[len(outages)-1].Round(time.Millisecond),
		moves[len(moves)/2].Round(time.Millisecond), moves[len(moves)-1].Round(time.Millisecond))
}

// commandStopped finds, in a runner's output, when it last said its
// command had stopped (the "command stopped" line, stamped to the
// millisecond).
func commandStopped(out string) (time.Time, bool) {
	var at time.Time
	found := false
	for _, l := range strings.Split(out, "\n") {
		stamp, rest, ok := strings.Cut(l, " ")
		if !ok || !strings.HasPrefix(rest, "s3lect: command stopped") {
			continue
		}
		if t, err := time.Parse("2006-01-02T15:04:05.000Z", stamp); err == nil {
			at, found = t, true
		}
	}
	return at, found
}
