package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/s3lect/s3lect/internal/cloudtest"
)

// TestAzureStore runs s3lect on Azure Blob Storage: a real Azurite (the
// pinned package .ci/run installs) on loopback, named by the connection
// string in AZURE_STORAGE_CONNECTION_STRING as a user would name it.
func TestAzureStore(t *testing.T) {
	cloudtest.Azure(t, "elections")
	cloudElection(t, "azblob://elections/leader/job.json", "azblob://no-such-container/leader/job.json", "az storage container create")
}

// cloudElection runs a command as leader on url, reads the released
// lockfile back with status, and checks that a missing bucket or
// container is refused with its fix.
func cloudElection(t *testing.T, url, missing, fix string) {
	t.Helper()
	dir := t.TempDir()
	p := start(t, runOn(url, "n1", "sh", "-c", `echo "start $S3LECT_TERM $(date +%s%N)" >> `+dir+`/n1.log`)...)
	if code := p.status(t); code != 0 {
		t.Fatalf("run on %s exited %d\n%s", url, code, p.stderr.String())
	}
	// Once, with a term: 1 on an idle machine, higher where a takeover's
	// lockfile write was answered after its lease (a loaded machine, the
	// emulator slow) and spent its term.
	if evs := readLog(t, dir, "n1"); len(evs) != 1 || !positive(evs[0].term) {
		t.Errorf("command on %s ran %+v; want once with a positive S3LECT_TERM", url, evs)
	}
	out, err := runBin("status", "-store", url)
	if err != nil || !strings.Contains(out, "state:   released") || !strings.Contains(out, "leader:  n1") {
		t.Errorf("status on %s: %v\n%s\nwant released by n1", url, err, out)
	}
	// run and status alike: a missing bucket is not "no lockfile".
	for _, sub := range []string{"run", "status"} {
		args := []string{sub, "-store", missing}
		if sub == "run" {
			args = append(args, "--", "true")
		}
		out, err = runBin(args...)
		ee, _ := err.(interface{ ExitCode() int })
		if ee == nil || ee.ExitCode() != exitRefused || !strings.Contains(out, fix) {
			t.Errorf("%s on %s: %v\n%s\nwant status %d and %q", sub, missing, err, out, exitRefused, fix)
		}
	}
}

// positive reports whether s is a decimal integer above zero.
func positive(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0
}
