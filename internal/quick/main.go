// Command quick runs the main module's tests the way the README's quick
// command promises: `go test` on every package, with one line per package
// and, under it, one line per reason tests skipped (a test that needs a
// server says how to run it), naming the tests; plain `go test ./...`
// hides why for packages that pass.
//
//	go run ./internal/quick            # go test ./...
//	go run ./internal/quick -race ./pool/...
//
// Arguments are passed to `go test -json` as they are; with no package
// pattern among them, ./... is added. It prints a failing test's output in
// full and exits with go test's status.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

func main() {
	args := append([]string{"test", "-json"}, os.Args[1:]...)
	if !hasPackage(os.Args[1:]) {
		args = append(args, "./...")
	}
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quick:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "quick: cannot run go test:", err)
		os.Exit(2)
	}
	s := summarize(out, os.Stdout)
	err = cmd.Wait()
	fmt.Printf("%d packages passed, %d failed; %d tests skipped\n", s.passed, s.failed, s.skipped)
	if err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "quick:", err)
		os.Exit(2)
	}
}

// hasPackage reports whether args name a package (anything not a flag).
// A flag's separate value ("-run X") is not told apart from a package,
// so such flags must be written "-run=X".
func hasPackage(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return true
		}
	}
	return false
}

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type tally struct{ passed, failed, skipped int }

// summarize reads go test's JSON events from r and writes the summary to w.
func summarize(r io.Reader, w io.Writer) tally {
	var t tally
	output := map[string][]string{} // package or package+test: its output
	skips := map[string]*skipList{} // package: its skipped tests by reason
	key := func(e event) string { return e.Package + "\x00" + e.Test }
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text()) // not an event: show it as it is
			continue
		}
		switch e.Action {
		case "output", "build-output":
			output[key(e)] = append(output[key(e)], e.Output)
		case "skip":
			if e.Test == "" { // a package with no test files
				break
			}
			t.skipped++
			if skips[e.Package] == nil {
				skips[e.Package] = &skipList{}
			}
			skips[e.Package].add(skipReason(output[key(e)]), e.Test)
		case "fail":
			if e.Test != "" {
				fmt.Fprint(w, strings.Join(output[key(e)], ""))
				break
			}
			t.failed++
			fmt.Fprint(w, strings.Join(output[key(e)], "")) // a panic, a timeout, a build error
			fmt.Fprintf(w, "FAIL  %s (%.1fs)\n", e.Package, e.Elapsed)
			skips[e.Package].print(w)
		case "pass":
			if e.Test == "" {
				t.passed++
				fmt.Fprintf(w, "ok    %s (%.1fs)\n", e.Package, e.Elapsed)
				skips[e.Package].print(w)
			}
		}
		if (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") && e.Test != "" {
			delete(output, key(e))
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(w, "quick: reading go test's output:", err)
	}
	return t
}

// skipList keeps a package's skipped tests grouped by the reason given,
// in the order the reasons first came.
type skipList struct {
	reasons []string
	tests   map[string][]string
}

func (l *skipList) add(reason, test string) {
	if l.tests == nil {
		l.tests = map[string][]string{}
	}
	if l.tests[reason] == nil {
		l.reasons = append(l.reasons, reason)
	}
	l.tests[reason] = append(l.tests[reason], test)
}

// print writes one line per reason: "  skip N: reason (TestA, TestB)".
func (l *skipList) print(w io.Writer) {
	if l == nil {
		return
	}
	for _, r := range l.reasons {
		fmt.Fprintf(w, "  skip %d: %s (%s)\n", len(l.tests[r]), r, strings.Join(l.tests[r], ", "))
	}
}

// skipReason is the message a skipped test gave: its last output line
// that is not go test's own "=== RUN" or "--- SKIP" line, without the
// "file.go:12: " that t.Skip puts before it (so that tests skipping for
// one reason share a line).
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if i := strings.Index(l, ": "); i > 0 && strings.Contains(l[:i], ".go:") && !strings.Contains(l[:i], " ") {
			l = l[i+2:]
		}
		return l
	}
	return "(no reason given)"
}
