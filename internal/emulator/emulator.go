// Package emulator starts the cloud stores' emulators on loopback for the
// tests of the GCS and Azure backends and of the tools that open them:
// fake-gcs-server (S3LECT_TEST_FAKE_GCS names the binary) and Azurite's
// blob service (S3LECT_TEST_AZURITE names azurite-blob). `bash .ci/run`
// installs both, pinned. Each test gets a server of its own, killed when
// the test ends. Without the binary a test fails under CI=true, and skips
// saying how to get it otherwise.
package emulator

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Need ends a test that lacks a server it needs: it skips with how to get
// one, except under CI=true, where it fails. CI never passes by skipping.
func Need(t testing.TB, how string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
}

// FakeGCSVersion and AzuriteVersion are the pinned versions .ci/run
// installs.
const (
	FakeGCSVersion = "v1.56.1"
	AzuriteVersion = "3.35.0"
)

// FakeGCS starts fake-gcs-server with its in-memory backend and returns
// its base URL, such as http://127.0.0.1:41234. Point the GCS client at
// base + "/storage/v1/" without authentication.
func FakeGCS(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("S3LECT_TEST_FAKE_GCS")
	if bin == "" {
		Need(t, "no fake-gcs-server: run `bash .ci/run`, which installs it, or `go install github.com/fsouza/fake-gcs-server@"+FakeGCSVersion+"` and set S3LECT_TEST_FAKE_GCS to the binary")
	}
	port := freePort(t)
	start(t, "fake-gcs-server", port, bin, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port),
		"-backend", "memory", "-log-level", "error", "-public-host", fmt.Sprintf("127.0.0.1:%d", port))
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// Azurite's well-known development account, the same in every copy.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite starts Azurite's blob service in memory and returns its
// connection string for the development account.
func Azurite(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("S3LECT_TEST_AZURITE")
	if bin == "" {
		Need(t, "no Azurite: run `bash .ci/run`, which installs it, or `npm install azurite@"+AzuriteVersion+"` and set S3LECT_TEST_AZURITE to node_modules/.bin/azurite-blob")
	}
	port := freePort(t)
	// No --location: Azurite 3.35 refuses it together with
	// --inMemoryPersistence, and in memory it writes no files.
	start(t, "azurite-blob", port, bin, "--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry", "--silent")
	return AzuriteConnectionString(fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccount))
}

// AzuriteConnectionString is the connection string of the development
// account at blobEndpoint.
func AzuriteConnectionString(blobEndpoint string) string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AzuriteAccount + ";AccountKey=" + AzuriteKey + ";BlobEndpoint=" + blobEndpoint + ";"
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs bin and waits until it accepts connections on port; the
// process is killed when the test ends.
func start(t testing.TB, name string, port int, bin string, args ...string) {
	t.Helper()
	var out tail
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second) // Azurite's start on a loaded machine
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			select {
			case <-exited: // another process answered on the port we chose
				t.Fatalf("%s exited, and something else answers on %s: %s", name, addr, out.String())
			case <-time.After(50 * time.Millisecond):
			}
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before it accepted connections on %s: %s", name, addr, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not accept connections on %s within 60s: %s", name, addr, out.String())
}

// tail keeps the last few KiB a process wrote, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 4096; over > 0 {
		w.buf = w.buf[over:]
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}
