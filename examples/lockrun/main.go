// Command lockrun runs a command only while this instance leads, like
// `consul lock`: start it on every machine, and exactly one runs the
// command at a time.
//
//	lockrun -bucket B -key K [-id ID] -- command args...
//	lockrun -status -bucket B -key K
//
// S3 access comes from the standard AWS environment (credentials,
// AWS_REGION, AWS_ENDPOINT_URL_S3 for MinIO or R2).
//
// The child gets S3LECT_TERM, the leadership's fencing token, in its
// environment. When leadership is lost, lockrun sends the child SIGTERM,
// then SIGKILL after -grace, and campaigns again (or exits, with -once).
// On SIGTERM or SIGINT, lockrun forwards the signal to the child, waits for
// it to exit, and only then releases the lease: drain, then release. When
// the child exits, lockrun releases the lease and exits with the child's
// status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	_ "github.com/s3lect/s3lect/store/s3store" // lets s3lect.New build the S3 store from Bucket
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	bucket, key, id string
	pathStyle       bool
	status, once    bool
	grace           time.Duration
	frequent        time.Duration
	infrequent      time.Duration
	timeout         time.Duration
	verbose         bool
}

func run(args []string, stdout, stderr io.Writer) int {
	host, _ := os.Hostname()
	var o options
	fs := flag.NewFlagSet("lockrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bucket, "bucket", "", "S3 bucket holding the lockfile (required)")
	fs.StringVar(&o.key, "key", "", "lockfile key, e.g. leader/backup.json (required)")
	fs.StringVar(&o.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's unique ID")
	fs.BoolVar(&o.pathStyle, "path-style", false, "path-style bucket addressing (MinIO and most self-hosted stores)")
	fs.BoolVar(&o.status, "status", false, "print the lockfile and exit")
	fs.BoolVar(&o.once, "once", false, "exit after losing leadership instead of campaigning again")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL for the child on loss of leadership")
	fs.DurationVar(&o.frequent, "frequent", 0, "FrequentInterval (0: default 5s)")
	fs.DurationVar(&o.infrequent, "infrequent", 0, "InfrequentInterval (0: default 30s)")
	fs.DurationVar(&o.timeout, "timeout", 0, "LeaderTimeout (0: default 15s)")
	fs.BoolVar(&o.verbose, "v", false, "log the elector's events to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.bucket == "" || o.key == "" {
		fmt.Fprintln(stderr, "lockrun: -bucket and -key are required")
		return 2
	}
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	e, err := s3lect.New(s3lect.ElectorConfig{
		Bucket: o.bucket, S3PathStyle: o.pathStyle, LockfilePath: o.key, ServerID: o.id,
		FrequentInterval: o.frequent, InfrequentInterval: o.infrequent, LeaderTimeout: o.timeout,
		Logger: logger,
	})
	if err != nil {
		fmt.Fprintln(stderr, "lockrun:", err)
		return 2
	}
	defer e.Close()

	if o.status {
		return status(e, o, stdout, stderr)
	}
	command := fs.Args()
	if len(command) == 0 {
		fmt.Fprintln(stderr, "lockrun: no command given; usage: lockrun -bucket B -key K -- command args...")
		return 2
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	for {
		// Only this goroutine reads sigs: while campaigning a signal stops
		// the campaign; while leading, supervise forwards it to the child.
		ctx, cancel := context.WithCancel(context.Background())
		type result struct {
			lead *s3lect.Leadership
			err  error
		}
		won := make(chan result, 1)
		go func() {
			lead, err := e.Campaign(ctx)
			won <- result{lead, err}
		}()
		var r result
		select {
		case r = <-won:
		case <-sigs:
			cancel() // Campaign returns, releasing anything it had won
			<-won
			return 0 // nothing ran
		}
		if r.err != nil {
			cancel()
			fmt.Fprintln(stderr, "lockrun:", r.err)
			return 1
		}
		fmt.Fprintf(stderr, "lockrun: %s leads %s (term %d); starting %s\n", o.id, o.key, r.lead.Term(), command[0])
		code, again := supervise(r.lead, command, o, sigs, stderr)
		cancel()
		if !again || o.once {
			return code
		}
	}
}

// supervise runs the command while lead lives. It returns the exit status
// to exit with, and whether to campaign again.
func supervise(lead *s3lect.Leadership, command []string, o options, sigs <-chan os.Signal, stderr io.Writer) (int, bool) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), fmt.Sprintf("S3LECT_TERM=%d", lead.Term()))
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "lockrun:", err)
		lead.Resign(context.Background())
		return 127, false
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	select {
	case err := <-exited: // the child finished on its own
		if rerr := lead.Resign(context.Background()); rerr != nil {
			fmt.Fprintln(stderr, "lockrun: release:", rerr)
		}
		return exitCode(err), false
	case sig := <-sigs: // drain, then release
		cmd.Process.Signal(sig)
		err := <-exited
		if rerr := lead.Resign(context.Background()); rerr != nil {
			fmt.Fprintln(stderr, "lockrun: release:", rerr)
		}
		return exitCode(err), false
	case <-lead.Done():
		fmt.Fprintf(stderr, "lockrun: leadership ended (%v); stopping the command\n", context.Cause(lead.Context()))
		cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(o.grace)
		defer t.Stop()
		var err error
		select {
		case err = <-exited:
		case <-t.C:
			cmd.Process.Kill()
			err = <-exited
		}
		return exitCode(err), true
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		return 1
	}
}

// status prints the lockfile as a watcher sees it.
func status(e *s3lect.Elector, o options, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, found, err := e.Lockfile(ctx)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "lockrun:", err)
		return 1
	case !found:
		fmt.Fprintf(stdout, "lockfile s3://%s/%s: absent (vacant)\n", o.bucket, o.key)
		return 0
	}
	fmt.Fprintf(stdout, "lockfile s3://%s/%s\n", o.bucket, o.key)
	fmt.Fprintf(stdout, "  leader:  %s\n  address: %s\n  term:    %d\n", rec.LeaderID, rec.LeaderAddr, rec.Term)
	if rec.LastUpdated.IsZero() {
		fmt.Fprintln(stdout, "  state:   vacant (released)")
	} else {
		fmt.Fprintf(stdout, "  updated: %s (%s ago by this machine's clock)\n", rec.LastUpdated.Format(time.RFC3339Nano), time.Since(rec.LastUpdated).Round(time.Millisecond))
	}
	return 0
}
