package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// TestRunChildWritesFenced runs `s3lect put` and `s3lect get` as the
// command of `s3lect run`: they find the term and the store in the
// environment run gives them. A later command finds the key sealed by a
// higher term: its put exits 7 (fenced), and run exits with it. The
// command calls plain `s3lect` with a PATH that lacks it: run puts its own
// directory last on the command's PATH.
func TestRunChildWritesFenced(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	dir := t.TempDir()
	key, obj := "cli/fence-lock.json", "cli/fence-checkpoint"
	script := `printf 'step 1\n' | s3lect put ` + obj + ` - && s3lect get ` + obj + ` > "$OUT"`
	env := append(os.Environ(), "PATH=/usr/bin:/bin", "OUT="+filepath.Join(dir, "out"))
	run := func() (int, string) {
		cmd := exec.Command(bin, runArgs(endpoint, bucket, key, "a", []string{"-once"}, []string{"sh", "-c", script})...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run(); code != 0 {
		t.Fatalf("s3lect run -- put, get: exit %d; want 0\n%s", code, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out"))
	if err != nil || string(got) != "step 1\n" {
		t.Fatalf("get wrote %q (%v); want %q", got, err, "step 1\n")
	}
	rec, ok := lockfile(t, bucket, key)
	if !ok {
		t.Fatal("no lockfile after run")
	}
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	data, term, err := fence.Read(context.Background(), st, obj)
	if err != nil || term != rec.Term || string(data) != "step 1\n" {
		t.Fatalf("fence.Read(%q) = %q, term %d, %v; want %q, the leadership's term %d", obj, data, term, err, "step 1\n", rec.Term)
	}

	// A newer leader (term 1,000) seals the key: the next run's command,
	// of a lower term, is fenced.
	seal := exec.Command(bin, "seal", "-store", "s3://"+bucket+"/"+key, "-endpoint", endpoint, "-path-style", "-term", "1000", obj)
	if out, err := seal.CombinedOutput(); err != nil {
		t.Fatalf("s3lect seal -term 1000: %v\n%s", err, out)
	}
	code, out := run()
	if code != exitFenced || !strings.Contains(out, "holds term 1000, higher than this writer's term") {
		t.Fatalf("s3lect run -- put after a seal of term 1000: exit %d; want %d (fenced), saying so\n%s", code, exitFenced, out)
	}
	if _, term, _ := fence.Read(context.Background(), st, obj); term != 1000 {
		t.Fatalf("after the fenced put the key holds term %d; want 1000", term)
	}
}

func TestFenceCommandUsage(t *testing.T) {
	env := func(kv ...string) []string {
		var out []string
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "S3LECT_") {
				out = append(out, e)
			}
		}
		return append(out, kv...)
	}
	cases := []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"no key", []string{"put"}, env("S3LECT_STORE=s3://b/k", "S3LECT_TERM=3"), exitUsage, "no key named"},
		{"no store", []string{"put", "k"}, env("S3LECT_TERM=3"), exitUsage, "no store named"},
		{"no term", []string{"put", "k"}, env("S3LECT_STORE=s3://b/k"), exitUsage, "no term"},
		{"term zero", []string{"delete", "k"}, env("S3LECT_STORE=s3://b/k", "S3LECT_TERM=0"), exitUsage, "no term"},
		{"get extra", []string{"get", "k", "l"}, env("S3LECT_STORE=s3://b/k"), exitUsage, `unexpected argument "l"`},
		{"missing file", []string{"put", "k", "/nonexistent/file"}, env("S3LECT_STORE=s3://b/k", "S3LECT_TERM=3"), exitUsage, "/nonexistent/file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = tc.env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			_ = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("s3lect %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestNATSWrongCredentialsArePermanent: a NATS server that refuses the
// URL's credentials is a permanent error naming the fix (exit 5), not a
// failure retried for ever.
func TestNATSWrongCredentialsArePermanent(t *testing.T) {
	addr := startNATSWithAuth(t, "u", "secret")
	for _, url := range []string{"nats://" + addr + "/FENCED/leader.json", "nats://u:wrong@" + addr + "/FENCED/leader.json"} {
		out, err := runBin("get", "-store", url, "jobs/checkpoint")
		ee, _ := err.(interface{ ExitCode() int })
		if ee == nil || ee.ExitCode() != exitRefused || !strings.Contains(out, "refused the credentials") {
			t.Errorf("s3lect get -store %s: %v\n%s\nwant exit %d naming the credentials", url, err, out, exitRefused)
		}
	}
}

// TestFenceUsageNamesTheExitStatuses checks that the help a script is
// written from gives the statuses the subcommands exit with.
func TestFenceUsageNamesTheExitStatuses(t *testing.T) {
	for _, want := range []string{
		fmt.Sprintf("%d fenced", exitFenced),
		fmt.Sprintf("%d get: no such key", exitAbsent),
		fmt.Sprintf("%d the outcome is unknown", exitUnknown),
		fmt.Sprintf("%d the store refused for good", exitRefused),
	} {
		if !strings.Contains(strings.Join(strings.Fields(fenceUsage), " "), want) {
			t.Errorf("put -h does not say %q:\n%s", want, fenceUsage)
		}
	}
}
