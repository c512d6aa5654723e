package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// versionLine says which build of s3lect this is: the module version it
// was built from ("(devel)" for a build in a clone), the commit and
// whether the tree had changes, when the build recorded them (builds in a
// clone do; a `go install ...@version` build is named by its version),
// and the Go version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "s3lect (no build information)"
	}
	line := "s3lect " + bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		line += " commit " + rev
		if modified == "true" {
			line += " (with uncommitted changes)"
		}
	}
	return line + " " + bi.GoVersion
}

const versionUsage = `usage: s3lect version

Prints the module version this build of s3lect came from ("(devel)" for a
build in a clone), the commit and whether the tree had changes (when the
build recorded them), and the Go version. Also s3lect -version or --version.

Exit statuses: 0 printed, 2 bad usage.
`

func versionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, versionUsage)
		return exitOK
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "s3lect version: unexpected argument %q; usage: s3lect version (no arguments; -h for help)\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}
