// Command s3lect runs a command on one instance at a time, and shows who
// leads an election group, using one lockfile in S3, Google Cloud Storage,
// Azure Blob Storage or NATS JetStream KV as the only coordination service.
//
//	go install github.com/s3lect/s3lect/cmd/s3lect@latest   (or ./cmd/s3lect in a clone)
//
//	s3lect run    [flags] -- command args...   run the command while this instance leads
//	s3lect status [flags]                      print the lockfile as a person reads it
//	s3lect watch  [flags]                      print one line per change of leader
//	s3lect release [flags]                     make the leader step down safely
//	s3lect version                             print the version and commit of this build
//	s3lect put|get|delete|seal KEY             fenced objects for run's command (docs/fencing.md)
//
// `s3lect <subcommand> -h` lists each subcommand's flags and exit
// statuses; `s3lect run -h` also says what run guarantees.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses of s3lect itself. run otherwise exits with its command's
// status (128+N when the command was killed by signal N).
const (
	exitOK       = 0
	exitFailure  = 1  // an unexpected failure, described on stderr
	exitUsage    = 2  // bad flags or arguments
	exitTry      = 3  // run: not leader within -try
	exitLost     = 4  // run -once: leadership was lost or expired while the command ran
	exitRefused  = 5  // the store refused for good (missing bucket, bad credentials, ...); stderr names the fix
	exitNoAnswer = 6  // the store never answered (run: within -connect-timeout); stderr names the endpoint and what to check
	exitNotMoved = 10 // release: the leadership did not move as asked within -wait (the old leader leads again, another than -to's member took over, or nobody yet)
	exitNotStart = 127
)

// guardArg is the hidden first argument with which run re-executes this
// binary as the guard of its command's process group.
const guardArg = "__s3lect_guard"

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: s3lect <subcommand> [flags] [-- command args...]

Subcommands:
  run [flags] -- command args...   run the command only while this instance leads;
                                   start it on every machine: one runs it at a time
  status [flags]                   print the lockfile: leader, term, age, state
  watch [flags]                    print one line per change of leader until interrupted
  release [flags]                  make the leader step down and hand over (-to ID: to that member)
  version                          print the version, commit and Go version of this build
  put|get|delete|seal KEY          read and write objects fenced by run's term (S3LECT_TERM)

The lockfile is named by -store s3://bucket/key, gs://bucket/key,
azblob://container/key or nats://host:port/bucket/key (or -bucket B -key K
for S3). gs:// needs a build with Google Cloud Storage in: go install -tags
cloud (it makes the binary three times larger). S3 access comes from the standard AWS environment
(AWS_ACCESS_KEY_ID, AWS_REGION, AWS_ENDPOINT_URL_S3, profiles); -endpoint
and -path-style point it at MinIO or another S3-compatible store. GCS uses
Application Default Credentials (STORAGE_EMULATOR_HOST for an emulator);
Azure uses AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with
DefaultAzureCredential.

Run 's3lect <subcommand> -h' for the subcommand's flags.

Example:
  s3lect run -store s3://my-bucket/leader/backup.json -- ./backup.sh --full

Exit statuses: the command's own (run), 0 done, 1 unexpected failure,
2 bad usage, 3 not leader within -try, 4 leadership lost (-once),
5 the store refused for good (the message names the fix), 6 the store never
answered (run: within -connect-timeout), 7 fenced, 8 absent, 9 unknown
(put, get, delete, seal), 10 release: the leadership did not move as
asked, 127 command not started.
`

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stdout, stderr)
	case "status":
		return parseThenRun(args[1:], stdout, stderr, parseStatus, status)
	case "watch":
		return parseThenRun(args[1:], stdout, stderr, parseWatch, watch)
	case "release":
		return parseThenRun(args[1:], stdout, stderr, parseRelease, release)
	case "put", "get", "delete", "seal": // fence.go
		return fenceCmd(args[0], args[1:], os.Stdin, stdout, stderr)
	case "version", "-version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case guardArg:
		return guard(args[1:], stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "s3lect: unknown subcommand %q; want run, status, watch, release or version\n\n%s", args[0], usage)
		return exitUsage
	}
}

// parseThenRun parses a subcommand's flags into its configuration and,
// when the subcommand must run, runs it with a context that SIGINT and
// SIGTERM cancel.
func parseThenRun[C any](args []string, stdout, stderr io.Writer,
	parse func([]string, io.Writer) (C, int, bool), run func(context.Context, C, io.Writer, io.Writer) int) int {
	c, code, ok := parse(args, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, c, stdout, stderr)
}

// newFlagSet returns the flag set of a subcommand: errors and -h go to
// stderr, and -h prints usage, then every flag.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}
