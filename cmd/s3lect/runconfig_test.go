package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

// TestFindCommand: run finds a command that cannot start before it
// campaigns, as the shell would look it up.
func TestFindCommand(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("data"), 0o644)
	script := filepath.Join(dir, "job.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		name, path string
		want       string // "" for found
	}{
		{"sh", "/usr/bin:/bin", ""},
		{script, "", ""},
		{"job.sh", "/nonexistent:" + dir, ""},
		{"/nonexistent/cmd", "/usr/bin:/bin", "cannot start /nonexistent/cmd: stat /nonexistent/cmd: no such file or directory"},
		{"no-such-command", "/usr/bin:/bin", "cannot start no-such-command: not found in PATH (/usr/bin:/bin)"},
		{plain, "", "is not executable"},
		{dir, "", "is a directory"},
		{"plain", dir, "not found in PATH"},
	} {
		err := findCommand(tc.name, tc.path)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("findCommand(%q, %q) = %v; want %q", tc.name, tc.path, err, tc.want)
		}
	}
}

// stamped is how every line of run's text log begins.
var stamped = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z s3lect: `)

// TestRunLinesAreStamped: every line run prints once its flags are parsed
// carries the time, its last fatal line included (it had none), and
// -log-format json prints JSON objects that say the same. Each case ends
// before the store is reached.
func TestRunLinesAreStamped(t *testing.T) {
	s3test.NoCredentials(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no credentials", []string{"-store", "s3://b/k", "-endpoint", "http://127.0.0.1:1", "--", "true"},
			exitRefused, "the store refused: s3store: no AWS credentials found"},
		{"a command that cannot start", []string{"-store", "s3://b/k", "-endpoint", "http://127.0.0.1:1", "--", "/nonexistent/cmd"},
			exitNotStart, "cannot start /nonexistent/cmd"},
	} {
		for _, format := range []string{logText, logJSON} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				var stderr strings.Builder
				c, code, ok := parseRun(append([]string{"-log-format", format}, tc.args...), &stderr)
				if !ok {
					t.Fatalf("parseRun: %d %s", code, stderr.String())
				}
				if code := run(c, newRunLog(&stderr, format)); code != tc.code {
					t.Errorf("run() = %d; want %d\n%s", code, tc.code, stderr.String())
				}
				lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
				for _, l := range lines {
					if format == logText && !stamped.MatchString(l) {
						t.Errorf("line %q is not stamped", l)
					}
					var obj map[string]any
					if format == logJSON && (json.Unmarshal([]byte(l), &obj) != nil || obj["time"] == nil || obj["level"] == nil || obj["msg"] == nil) {
						t.Errorf("line %q is not a JSON object with time, level and msg", l)
					}
				}
				if last := lines[len(lines)-1]; !strings.Contains(last, tc.want) || strings.Contains(stderr.String(), "campaigning") {
					t.Errorf("run printed\n%s\nwant its last line saying %q, and no campaign", stderr.String(), tc.want)
				}
			})
		}
	}
}

// TestParseRun: flags that cannot work are refused before anything
// starts, with the flag named.
func TestParseRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for accepted
	}{
		{[]string{"-store", "s3://b/k", "--", "true"}, ""},
		{[]string{"-store", "s3://b/k"}, "no command given"},
		{[]string{"-store", "s3://b/k", "-grace", "-1s", "--", "true"}, "must not be negative"},
		{[]string{"-store", "s3://b/k", "-log-format", "xml", "--", "true"}, `-log-format "xml": want text or json`},
		{[]string{"-store", "s3://b/k", "-frequent", "10s", "-timeout", "15s", "--", "true"}, "LeaderTimeout"},
		{[]string{"-store", "s3://b/k", "-peer-addr", "127.0.0.1:0", "--", "true"}, ""}, // pinned: no certificate to give
		{[]string{"-store", "s3://b/k", "-peer-addr", "127.0.0.1:0", "-peer-cert", "c.pem", "--", "true"}, "peer mode with a CA needs -peer-addr, -peer-cert and -peer-key together; for peer mode without certificates, give -peer-addr alone"},
		{[]string{"-store", "s3://b/k", "-peer-ca", "ca.pem", "--", "true"}, "needs -peer-addr, -peer-cert and -peer-key together"},
		{[]string{"-store", "s3://b/k", "-metrics-addr", "127.0.0.1:0", "-log-format", "json", "--", "true"}, ""},
		{[]string{"-store", "s3://b/k", "-announce", "15s", "--", "true"}, ""},
		{[]string{"-store", "s3://b/k", "-announce", "off", "--", "true"}, ""},
		{[]string{"-store", "s3://b/k", "-announce", "5x", "--", "true"}, `invalid value "5x" for flag -announce: want auto, off or a duration`},
	} {
		var stderr strings.Builder
		c, code, ok := parseRun(tc.args, &stderr)
		switch {
		case tc.want == "" && (!ok || c.command[0] != "true"):
			t.Errorf("parseRun(%q) refused: %d %s", tc.args, code, stderr.String())
		case tc.want != "" && (ok || code != exitUsage || !strings.Contains(stderr.String(), tc.want)):
			t.Errorf("parseRun(%q) = %v, %d, %q; want usage error %q", tc.args, ok, code, stderr.String(), tc.want)
		}
	}
	_ = time.Second
}
