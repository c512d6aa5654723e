package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/s3lect/s3lect/internal/s3test"
)

// TestWaitingRunnerGuardStartsNothing: a waiting runner starts the guard
// of its next command in advance (prestartGroup), so that a Go binary's
// start is not on the path from the leadership to the command's: the
// guard runs, the command does not, and the guard ends with its runner,
// whether the runner stops (SIGTERM while waiting) or is killed.
func TestWaitingRunnerGuardStartsNothing(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/warm-guard.json"), t.TempDir()
	start(t, runArgs(endpoint, bucket, key, "a", nil, childScript(dir, "a", false))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") })
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		b := start(t, runArgs(endpoint, bucket, key, "b", nil, childScript(dir, "b", false))...)
		b.waitLine(t, eventually, "waiting: a leads (term")
		var guard int
		waitFor(t, eventually, "b's guard, started in advance", func() bool { guard = guardOf(b.cmd.Process.Pid); return guard != 0 }, b)
		if started(t, dir, "b") {
			t.Fatalf("b's command started while b waits")
		}
		b.cmd.Process.Signal(sig)
		<-b.done
		waitFor(t, eventually, "b's guard to end with b ("+sig.String()+")", func() bool { return !alive(guard) })
		if started(t, dir, "b") {
			t.Errorf("b's command started after %v to b", sig)
		}
	}
}

// guardOf returns the PID of a guard process whose parent is runner, or 0.
func guardOf(runner int) int {
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(guardArg)) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		f := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
		if len(f) > 1 && string(f[1]) == strconv.Itoa(runner) && alive(pid) {
			return pid
		}
	}
	return 0
}
