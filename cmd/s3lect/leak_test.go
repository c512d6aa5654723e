package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// bin is the s3lect binary the tests run, installed once by TestMain
// with `go install`, as a user installs it.
var bin string

// installTags are the build tags TestMain installs the binary with: cloud
// when the tests themselves are built with it, or with gcs (gcs_test.go).
var installTags string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "s3lect-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "install", "-tags="+installTags, ".")
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go install ./cmd/s3lect: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "s3lect")
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
