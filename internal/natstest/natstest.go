// Package natstest starts the pinned nats-server binary (.ci/run installs
// it; S3LECT_TEST_NATS_SERVER names it) for the tests of the demo and the
// command, so that no test builds nats-server into the main module.
package natstest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

// Start runs nats-server with JetStream on a free loopback port, storing
// into a temporary directory with every write synced before it is
// acknowledged, and returns its client URL. The server is killed when the
// test ends. Without the binary the test fails under CI=true, and skips
// saying how to get it otherwise.
func Start(t testing.TB) string {
	t.Helper()
	return StartOn(t, 0)
}

// StartOn is Start on a given port (0: any free one).
func StartOn(t testing.TB, port int) string {
	t.Helper()
	return start(t, port, "")
}

// StartWithAuth is Start with clients required to give user and pass
// (nats://user:pass@host:port).
func StartWithAuth(t testing.TB, user, pass string) string {
	t.Helper()
	return start(t, 0, fmt.Sprintf("authorization {\n  user: %q\n  password: %q\n}\n", user, pass))
}

// Binary returns the nats-server binary S3LECT_TEST_NATS_SERVER names.
// Without it the test fails under CI=true, and skips saying how to get it
// otherwise.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("S3LECT_TEST_NATS_SERVER")
	if bin == "" {
		s3test.Need(t, "no nats-server: run `bash .ci/run`, which installs the pinned nats-server, or `go install github.com/nats-io/nats-server/v2@v2.14.5` and set S3LECT_TEST_NATS_SERVER to the binary")
	}
	return bin
}

// start runs nats-server on port (0: a free one) with conf appended to
// its configuration.
func start(t testing.TB, port int, conf string) string {
	t.Helper()
	bin := Binary(t)
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n%s", port, filepath.Join(dir, "js"), conf)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", file)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "nats://" + addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("nats-server did not accept connections on %s within 10s", addr)
	return ""
}
