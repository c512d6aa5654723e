package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/natskv"
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
	key, obj := freshKey("cli/fence-lock.json"), freshKey("cli/fence-checkpoint")
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

// TestParseFence: the fenced subcommands take the store and the term
// from run's environment where no flag gives them, parse -term as
// S3LECT_TERM is (decimal: "-term 010" is 10, never the octal 8), and
// name what is missing.
func TestParseFence(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	run := env(envStore, "s3://b/lock.json", envTerm, "3", envEndpoint, "http://127.0.0.1:9000", envPathStyle, "1")
	cases := []struct {
		name     string
		cmd      string
		args     []string
		getenv   func(string) string
		want     string // the usage error, or "" for accepted
		wantTerm uint64
		wantURL  string
	}{
		{"run's command", "put", []string{"k"}, run, "", 3, "s3://b/lock.json"},
		{"-term in decimal", "put", []string{"-term", "010", "k"}, run, "", 10, "s3://b/lock.json"},
		{"-term in hex", "seal", []string{"-term", "0x10", "k"}, run, `-term "0x10" is not a positive decimal number`, 0, ""},
		{"-store over the environment", "delete", []string{"-store", "s3://c/l.json", "k"}, run, "", 3, "s3://c/l.json"},
		{"get needs no term", "get", []string{"k"}, env(envStore, "s3://b/k"), "", 0, "s3://b/k"},
		{"no key", "put", nil, run, "no key named", 0, ""},
		{"no store", "put", []string{"k"}, env(envTerm, "3"), "no store named", 0, ""},
		{"no term", "put", []string{"k"}, env(envStore, "s3://b/k"), "no term", 0, ""},
		{"term zero", "delete", []string{"k"}, env(envStore, "s3://b/k", envTerm, "0"), "no term", 0, ""},
		{"get extra", "get", []string{"k", "l"}, run, `unexpected argument "l"`, 0, ""},
		{"missing file", "put", []string{"k", "/nonexistent/file"}, run, "/nonexistent/file", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			c, code, ok := parseFence(tc.cmd, tc.args, strings.NewReader("data"), &stderr, tc.getenv)
			switch {
			case tc.want == "" && (!ok || c.term != tc.wantTerm || c.sf.url != tc.wantURL):
				t.Errorf("s3lect %s %q: %v, term %d, store %q, %q; want term %d, store %q", tc.cmd, tc.args, ok, c.term, c.sf.url, stderr.String(), tc.wantTerm, tc.wantURL)
			case tc.want != "" && (ok || code != exitUsage || !strings.Contains(stderr.String(), tc.want)):
				t.Errorf("s3lect %s %q: %v, exit %d, %q; want a usage error with %q", tc.cmd, tc.args, ok, code, stderr.String(), tc.want)
			}
		})
	}
	c, _, _ := parseFence("put", []string{"k"}, strings.NewReader("data"), io.Discard, run)
	if string(c.data) != "data" || c.sf.endpoint != "http://127.0.0.1:9000" || !c.sf.pathStyle {
		t.Errorf("put from run's environment: data %q, endpoint %q, path style %v; want stdin's data and run's endpoint, path style", c.data, c.sf.endpoint, c.sf.pathStyle)
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

// TestRunChildReachesANATSStoreWithCredentials: with -store
// nats://user:pass@host/bucket/key, run gives its command the URL it was
// given, credentials included (S3LECT_STORE; the child's environment is
// no more exposed than run's own command line), so the command's
// `s3lect put` reaches the store run elects on with no flags, as
// docs/fencing.md promises. It used to get the URL without them, be
// refused, and retry for ever.
func TestRunChildReachesANATSStoreWithCredentials(t *testing.T) {
	addr := startNATSWithAuth(t, "u", "secret")
	kv := natsBucket(t, "nats://u:secret@"+addr, "FENCED")
	t.Setenv("S3LECT", bin)
	url := "nats://u:secret@" + addr + "/FENCED/leader/job.json"
	// timeout bounds the put, which otherwise retries for ever.
	script := `printf 'step 1' | timeout 15 "$S3LECT" put jobs/checkpoint -`
	p := start(t, runOn(url, "n1", "sh", "-c", script)...)
	if code := p.status(t); code != 0 {
		out := p.stderr.String()
		if i := strings.Index(out, "store error"); i >= 0 {
			out = out[i:min(len(out), i+400)]
		}
		t.Fatalf("s3lect run -store nats://u:***@... -- s3lect put: exit %d; want 0 (the command could not reach the store run elects on)\n%s", code, out)
	}
	data, term, err := fence.Read(t.Context(), natskv.New(kv), "jobs/checkpoint")
	if err != nil || string(data) != "step 1" || term == 0 {
		t.Fatalf("fence.Read = %q, term %d, %v; want %q of the leadership's term", data, term, err, "step 1")
	}
}

// TestFenceRefusesElectionObjects: the fenced subcommands refuse, as a
// usage error naming the lockfile, the lockfile's own key and its term
// object's (<lockfile>.term). A `seal $KEY` with KEY the lockfile (a slip
// of a shell job) would rewrite the live lease record with a fence
// header, end the leadership under the command and leave every elector a
// lockfile that is not a record; a put of the term object would hide the
// term from the next takeover. As run's command the seal is refused and
// the leadership kept (run exits 0).
func TestFenceRefusesElectionObjects(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	dir := t.TempDir()
	key := freshKey("cli/election-objects.json")
	t.Setenv("S3LECT", bin)
	t.Setenv("OUT", filepath.Join(dir, "out"))
	script := `"$S3LECT" seal ` + key + `; echo "seal exit $?" > "$OUT"; sleep 1`
	p := start(t, runArgs(endpoint, bucket, key, "a", []string{"-once"}, []string{"sh", "-c", script})...)
	code := p.status(t)
	got, _ := os.ReadFile(filepath.Join(dir, "out"))
	if strings.TrimSpace(string(got)) != fmt.Sprintf("seal exit %d", exitUsage) || code != 0 {
		t.Fatalf("s3lect seal <the lockfile's own key> as run's command: %q, run exit %d; want the seal refused (exit %d) and the leadership kept (run exit 0)\n%s",
			strings.TrimSpace(string(got)), code, exitUsage, p.stderr.String())
	}
	for _, k := range []string{key, key + ".term"} {
		out, err := runBin("put", "-store", "s3://"+bucket+"/"+key, "-endpoint", endpoint, "-path-style", "-term", "7", k, "/dev/null")
		ee, _ := err.(interface{ ExitCode() int })
		if ee == nil || ee.ExitCode() != exitUsage {
			t.Errorf("s3lect put %s (an election object of -store): %v\n%s\nwant a usage error naming the lockfile", k, err, out)
		}
	}
}
