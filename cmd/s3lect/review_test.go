package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/natskv"
	"github.com/s3lect/s3lect/store/s3store"
)

// Tests from the adversarial review of issue 27. Each fails on the code
// it was written against; the comment says why that is a bug.

// startNATSWithAuth runs the pinned nats-server with JetStream and a user
// and password, on a free loopback port, and returns its host:port.
func startNATSWithAuth(t *testing.T, user, pass string) string {
	t.Helper()
	srv := os.Getenv("S3LECT_TEST_NATS_SERVER")
	if srv == "" {
		s3test.Need(t, "no nats-server: run `bash .ci/run`, or set S3LECT_TEST_NATS_SERVER to the pinned binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n}\nauthorization {\n  user: %q\n  password: %q\n}\n",
		port, filepath.Join(dir, "js"), user, pass)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(srv, "-c", conf)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("nats-server did not accept connections on %s within 10s", addr)
	return ""
}

// TestReviewRunChildFencedOnNATSWithCredentials: `s3lect run -store
// nats://user:pass@host/bucket/key` elects fine (storeurl: "A NATS URL may
// carry a user and password"), but the S3LECT_STORE it gives its command is
// the lockfile's URL for messages, without the credentials. The command's
// `s3lect put` then connects without them, is refused (authorization
// violation), and retries that forever: the leader's shell job hangs
// instead of checkpointing, and never says why beyond a retrying line.
// docs/fencing.md promises "a shell job needs no flags". Fix: give the
// command the URL run was given (credentials included; the child's
// environment is no more exposed than run's own command line), or the
// credentials in variables of their own; and treat an authorization
// violation as permanent in storeurl.openNATS.
func TestReviewRunChildFencedOnNATSWithCredentials(t *testing.T) {
	addr := startNATSWithAuth(t, "u", "secret")
	nc, err := nats.Connect("nats://u:secret@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "FENCED"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("S3LECT", bin)
	url := "nats://u:secret@" + addr + "/FENCED/leader/job.json"
	// timeout bounds the put, which otherwise retries for ever.
	script := `printf 'step 1' | timeout 15 "$S3LECT" put jobs/checkpoint -`
	p := start(t, "run", "-store", url, "-id", "n1", "-frequent", "200ms", "-infrequent", "600ms", "-timeout", "1500ms",
		"--", "sh", "-c", script)
	if code := p.status(t); code != 0 {
		out := p.stderr.String()
		if i := strings.Index(out, "store error"); i >= 0 {
			out = out[i:min(len(out), i+400)]
		}
		t.Fatalf("s3lect run -store nats://u:***@... -- s3lect put: exit %d; want 0 (the command could not reach the store run elects on)\n%s", code, out)
	}
	data, term, err := fence.Read(ctx, natskv.New(kv), "jobs/checkpoint")
	if err != nil || string(data) != "step 1" || term == 0 {
		t.Fatalf("fence.Read = %q, term %d, %v; want %q of the leadership's term", data, term, err, "step 1")
	}
}

// TestReviewFenceCommandRefusesElectionObjects: the fenced subcommands
// write any key of the lockfile's bucket, the lockfile itself and its
// term object (<lockfile>.term) included, and they know both keys (from
// S3LECT_STORE or -store). `s3lect seal $KEY` with KEY the lockfile (a
// slip of a shell job that seals "its" objects by a variable) rewrites the
// live lease record with a fence header: the leader's next renewal fails
// its If-Match, the leadership ends under the command, and every elector
// then reads a lockfile that is not a record. A put of the term object
// hides the term from the next takeover (read as 0). Fix: refuse, with a
// usage error naming the lockfile, a KEY equal to the lockfile's key or
// its term object's (fence.New could refuse them too when the store is
// known to hold an election; docs/fencing.md should say not to fence
// them).
func TestReviewFenceCommandRefusesElectionObjects(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	dir := t.TempDir()
	key := "cli/review-lock.json"
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

// TestReviewTermFlagIsDecimal: S3LECT_TERM is parsed as a decimal number,
// but -term is a flag.Uint64, which takes Go literals: "-term 010" is
// term 8, "-term 0x10" term 16. A term pasted zero-padded (a log column, a
// file name) writes with a lower term than meant: refused as fenced where
// it should land, or worse, fencing a key at a term no leader has. Fix:
// parse -term as S3LECT_TERM is (strconv.ParseUint(s, 10, 64)), with a
// usage error for anything else.
func TestReviewTermFlagIsDecimal(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	obj := "cli/review-term-flag"
	out, err := runBin("put", "-store", "s3://"+bucket+"/cli/review-term-lock.json", "-endpoint", endpoint, "-path-style", "-term", "010", obj, "/dev/null")
	if ee, ok := err.(interface{ ExitCode() int }); ok && ee.ExitCode() == exitUsage {
		return // refused: fine
	}
	if err != nil {
		t.Fatalf("s3lect put -term 010: %v\n%s", err, out)
	}
	st := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	if _, term, _ := fence.Read(context.Background(), st, obj); term != 10 {
		t.Fatalf("s3lect put -term 010 wrote term %d; want 10 (decimal, as S3LECT_TERM) or a usage error", term)
	}
}
