package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

var releaseTrials = flag.Int("release.trials", 1, "TestReleaseMovesJob: releases per mode (more for the figures in docs/command.md)")

// TestReleaseMovesJob: three real runners on MinIO, in storage and in peer
// mode, and `release -to` the next one, -release.trials times in each
// mode. Every release moves the job to the named runner, whose command
// starts only after the old one's last heartbeat. It logs the time from
// the release's start to the job's start on the other machine (median
// and slowest), the figures docs/command.md gives with this command:
//
//	go test -run TestReleaseMovesJob -v ./cmd/s3lect -release.trials=20
//
// askedRE finds the member a release asked to step down in its output.
var askedRE = regexp.MustCompile(`asked (\S+) \(term`)

func TestReleaseMovesJob(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	for _, mode := range []string{"storage", "peer"} {
		t.Run(mode, func(t *testing.T) {
			key, dir := freshKey("cli/move-"+mode+".json"), t.TempDir()
			cert, pkey := selfSigned(t, dir)
			ids := []string{"a", "b", "c"}
			ports := map[string]string{"a": freePort(t), "b": freePort(t), "c": freePort(t)}
			var procs []*proc
			for _, id := range ids {
				// The intervals docs/command.md's figures were measured at:
				// LeaderTimeout 1.5s, shorter than the other tests' 4s. A
				// lease that lapses on a loaded machine moves the job
				// before a trial, which the trials count and go on from.
				extra := []string{"-timeout", "1500ms"}
				if mode == "peer" {
					extra = []string{"-timeout", "1500ms", "-peer-addr", "127.0.0.1:" + ports[id], "-peer-cert", cert, "-peer-key", pkey, "-peer-ca", cert}
				}
				procs = append(procs, start(t, runArgs(endpoint, bucket, key, id, extra, childScript(dir, id, false))...))
				if id == "a" {
					waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") }, procs...)
				}
			}
			starts := func(id string) []event {
				var s []event
				for _, ev := range readLog(t, dir, id) {
					if ev.kind == "start" {
						s = append(s, ev)
					}
				}
				return s
			}
			where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-timeout", "1500ms", "-wait", "0",
				"-peer-ca", cert}
			var took []time.Duration
			var missed int
			leader := "a"
			for trial := 0; len(took) < *releaseTrials; trial++ {
				if trial == *releaseTrials+10 {
					t.Fatalf("%d trials, %d releases measured: the leadership kept moving before the release", trial, len(took))
				}
				time.Sleep(3 * time.Second) // the followers settle at their steady pace
				// Who leads now: on a loaded machine a lease can lapse and
				// another runner take over between two trials.
				waitFor(t, eventually, "a live leader", func() bool {
					rec, ok := lockfile(t, bucket, key)
					if ok && !rec.LastUpdated.IsZero() && slices.Contains(ids, rec.LeaderID) {
						leader = rec.LeaderID
						return true
					}
					return false
				}, procs...)
				next := ids[(slices.Index(ids, leader)+1)%len(ids)]
				begun := time.Now()
				out, err := runBin(append(append([]string{"release"}, where...), "-to", next)...)
				// The leadership can still move between the read above and
				// the release on a loaded machine (ci12 saw c asked where
				// the lockfile had just said a): the member asked is the
				// one release names.
				if m := askedRE.FindStringSubmatch(out); m != nil && m[1] != leader && slices.Contains(ids, m[1]) {
					t.Logf("trial %d: the leadership moved from %s to %s before the release (a loaded machine?)", trial, leader, m[1])
					if leader = m[1]; leader == next {
						continue // asked to hand over to itself: no move to measure
					}
				}
				if err != nil || !strings.Contains(out, fmt.Sprintf("asked %s", leader)) {
					t.Fatalf("trial %d: release -to %s = %q, %v; want it to ask %s", trial, next, out, err, leader)
				}
				// The job moves off the leader. The named runner is a
				// preference with a window of FrequentInterval/2 (docs/moves.md
				// 11.2): on a machine too loaded to run it within that window
				// another runner takes over, which is counted, not failed
				// (the preference itself is pinned in virtual time by
				// TestCoreHandover and TestCoreAnnounce's 11.2 rows).
				before := map[string]int{}
				for _, id := range ids {
					before[id] = len(starts(id))
				}
				var took1 string
				waitFor(t, eventually, "the job to start off "+leader, func() bool {
					for _, id := range ids {
						if id != leader && len(starts(id)) > before[id] {
							took1 = id
							return true
						}
					}
					return false
				}, procs...)
				s := starts(took1)[before[took1]]
				last := readLog(t, dir, leader)
				if lastAt := last[len(last)-1].at; !lastAt.Before(s.at) {
					t.Errorf("trial %d: %s's command wrote at %v, after %s's started at %v", trial, leader, lastAt, took1, s.at)
				}
				if took1 != next {
					missed++
					t.Logf("trial %d: release -to %s: %s took the job over first (the named runner did not within its window)", trial, next, took1)
				}
				took = append(took, s.at.Sub(begun))
				leader = took1
			}
			slices.Sort(took)
			t.Logf("%s mode, FrequentInterval 200ms, InfrequentInterval 600ms, LeaderTimeout 1.5s: release -to moved the job in %v at the median, %v at the slowest, over %d releases (%d to another runner than the named one)",
				mode, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took), missed)
		})
	}
}
