package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

const statusUsage = `usage: s3lect status [flags]

Prints the lockfile: leader, address, term, when it was last written (by the
writer's clock, so its age is only as right as the two clocks agree), and its
state: held (a leader wrote it; -wait says whether it still renews), released,
absent or unreadable. With -wait it reads the lockfile for LeaderTimeout
(-timeout) and says whether the leader renewed in that time, judged by this
machine's clock alone.

Exit statuses: 0 read (whatever the state), 1 unexpected failure, 2 bad usage,
5 the store refused for good (the message names the fix), 6 the store did
not answer (the message names the endpoint and what to check).

Flags:
`

// statusReport is status's answer; -json prints it as it is.
type statusReport struct {
	Lockfile    string     `json:"lockfile"`
	State       string     `json:"state"`                // held, released, absent or unreadable
	Leader      string     `json:"leaderID,omitempty"`   // named as in the lockfile
	Address     string     `json:"leaderAddr,omitempty"` // named as in the lockfile
	Term        uint64     `json:"term,omitempty"`
	LastUpdated *time.Time `json:"lastUpdated,omitempty"` // the writer's clock
	AgeSeconds  *float64   `json:"ageSeconds,omitempty"`  // now (this machine's clock) minus lastUpdated
	HeldSeconds *float64   `json:"heldSeconds,omitempty"` // how long this leadership had lasted at its last write
	Problem     string     `json:"problem,omitempty"`     // why the content is unreadable
	Renewing    *bool      `json:"renewing,omitempty"`    // -wait: whether a new write was seen within watched
	Watched     string     `json:"watched,omitempty"`     // -wait: how long it was watched
}

// statusConfig is status's command line, parsed.
type statusConfig struct {
	sf                storeFlags
	asJSON, wait      bool
	frequent, timeout time.Duration // -wait: how often to read, and for how long
	connect           time.Duration // how long one read may wait for the store
}

// parseStatus parses status's flags. It reports false, with the exit
// status, when status must not run.
func parseStatus(args []string, stderr io.Writer) (statusConfig, int, bool) {
	var c statusConfig
	fs := newFlagSet("s3lect status", statusUsage, stderr)
	c.sf.register(fs)
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&c.wait, "wait", false, "watch the lockfile for -timeout and say whether the leader renews")
	fs.DurationVar(&c.frequent, "frequent", s3lect.DefaultFrequentInterval, "with -wait: how often to read")
	fs.DurationVar(&c.timeout, "timeout", s3lect.DefaultLeaderTimeout, "with -wait: how long to watch (the group's LeaderTimeout)")
	fs.DurationVar(&c.connect, "connect-timeout", 10*time.Second, "how long one read may wait for the store before status exits 6, naming the endpoint")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return c, code, false
	}
	if c.frequent <= 0 || c.timeout <= 0 || c.connect <= 0 {
		fmt.Fprintln(stderr, "s3lect status: -frequent, -timeout and -connect-timeout must be positive")
		return c, exitUsage, false
	}
	return c, exitOK, true
}

// status reads the lockfile (for -timeout with -wait) and prints what it
// found.
func status(ctx context.Context, c statusConfig, stdout, stderr io.Writer) int {
	st, err := c.sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, "s3lect status", err)
	}
	defer st.close()
	// New only checks the lockfile key as an elector would; it starts nothing.
	if _, err := s3lect.New(s3lect.ElectorConfig{Store: st.st, LockfilePath: st.key, ServerID: "s3lect-status",
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return reportErr(stderr, "s3lect status", usageErr("%v", err))
	}
	read := func() (statusReport, error) {
		rctx, cancel := context.WithTimeout(ctx, c.connect)
		defer cancel()
		rec, found, err := readLockfile(rctx, st.st, st.key)
		return newStatusReport(st.where, rec, found, err, time.Now())
	}
	rep, err := read()
	if err != nil {
		return reportNoAnswer(stderr, "s3lect status", c.sf.endpointName(st.where), err)
	}
	if c.wait {
		var ok bool
		if rep, ok = waitRenewal(ctx, rep, c.frequent, c.timeout, read, stderr); !ok {
			return exitOK // interrupted
		}
	}
	if c.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	rep.print(stdout)
	return exitOK
}

// newStatusReport is the report of one read of the lockfile at where:
// rec, whether there was a lockfile, and the read's error (an error with
// found true: content that is not a record).
func newStatusReport(where string, rec s3lect.Record, found bool, err error, now time.Time) (statusReport, error) {
	rep := statusReport{Lockfile: where}
	switch {
	case err != nil && found: // the content is not a valid record
		rep.State, rep.Problem = "unreadable", err.Error()
		return rep, nil
	case err != nil:
		return rep, err
	case !found:
		rep.State = "absent"
		return rep, nil
	}
	rep.Leader, rep.Address, rep.Term = rec.LeaderID, rec.LeaderAddr, rec.Term
	if rec.LastUpdated.IsZero() {
		rep.State = "released"
		return rep, nil
	}
	rep.State = "held"
	lu := rec.LastUpdated
	age := now.Sub(lu).Seconds()
	held := float64(rec.Held) / 1000
	rep.LastUpdated, rep.AgeSeconds, rep.HeldSeconds = &lu, &age, &held
	return rep, nil
}

// waitRenewal reads the lockfile every frequent for at most timeout, until
// a write newer than first's is seen, and returns the last report with
// Renewing and Watched set; false when ctx ended first.
func waitRenewal(ctx context.Context, first statusReport, frequent, timeout time.Duration, read func() (statusReport, error), stderr io.Writer) (statusReport, bool) {
	rep := first
	start := time.Now()
	renewing := false
	t := time.NewTicker(frequent)
	defer t.Stop()
	for !renewing && time.Since(start) < timeout {
		select {
		case <-ctx.Done():
			return rep, false
		case <-t.C:
		}
		next, err := read()
		if err != nil {
			fmt.Fprintf(stderr, "s3lect status: %v%s\n", err, hint(err))
			continue
		}
		rep = next
		renewing = rep.State == "held" && (first.State != "held" || !rep.LastUpdated.Equal(*first.LastUpdated) || rep.Leader != first.Leader)
	}
	rep.Renewing, rep.Watched = &renewing, time.Since(start).Round(time.Millisecond).String()
	return rep, true
}

// print writes the report as a person reads it.
func (rep statusReport) print(w io.Writer) {
	fmt.Fprintf(w, "lockfile %s\n", rep.Lockfile)
	fmt.Fprintf(w, "  state:   %s\n", rep.State)
	if rep.Problem != "" {
		fmt.Fprintf(w, "  problem: %s\n", rep.Problem)
	}
	if rep.Leader != "" {
		fmt.Fprintf(w, "  leader:  %s\n", rep.Leader)
		if rep.Address != "" {
			fmt.Fprintf(w, "  address: %s\n", rep.Address)
		}
		fmt.Fprintf(w, "  term:    %d\n", rep.Term)
	}
	if rep.LastUpdated != nil {
		fmt.Fprintf(w, "  updated: %s (%v ago; the writer's clock against this one)\n",
			rep.LastUpdated.Format(time.RFC3339Nano), time.Duration(*rep.AgeSeconds*float64(time.Second)).Round(time.Millisecond))
		fmt.Fprintf(w, "  held:    %v at that write\n", time.Duration(*rep.HeldSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	if rep.Renewing != nil {
		fmt.Fprintf(w, "  renewing: %s\n", rep.renewal())
	}
}

// renewal says what -wait saw, in the terms of the lockfile's last state.
func (rep statusReport) renewal() string {
	switch {
	case *rep.Renewing:
		return fmt.Sprintf("yes (a new write within %s)", rep.Watched)
	case rep.State == "released":
		return fmt.Sprintf("no: nobody leads (%s released the lockfile) and nobody took over in %s; is any s3lect run started on this lockfile?", rep.Leader, rep.Watched)
	case rep.State == "absent":
		return fmt.Sprintf("no: there is no lockfile, and nobody wrote one in %s; is the key right, and is any s3lect run started on it?", rep.Watched)
	case rep.State == "unreadable":
		return fmt.Sprintf("no: the lockfile is not a record, and nobody wrote one in %s (followers take it over after LeaderTimeout)", rep.Watched)
	}
	return fmt.Sprintf("no (no new write in %s: the leader is gone or cut off, or -timeout is shorter than its renewal period)", rep.Watched)
}

// reportNoAnswer reports err, a read that failed; when the store did not
// answer at all (not a refusal, not an interrupt) it names the endpoint
// and what to check, and returns exitNoAnswer.
func reportNoAnswer(stderr io.Writer, who, endpoint string, err error) int {
	if store.IsPermanent(err) || errors.Is(err, context.Canceled) {
		return reportErr(stderr, who, err)
	}
	var u errUsage
	if errors.As(err, &u) {
		return reportErr(stderr, who, err)
	}
	fmt.Fprintf(stderr, "%s: the store at %s did not answer: %v. %s\n", who, endpoint, err, noAnswerFix(endpoint))
	return exitNoAnswer
}

// readLockfile reads the lockfile once, retrying a failed read twice (after
// 100 ms and 1 s, the library's retry policy), and returns its record;
// found is false when there is no lockfile. Content that is not a valid
// record gives found true with ParseRecord's error; every other error
// comes with found false.
func readLockfile(ctx context.Context, st store.Store, key string) (rec s3lect.Record, found bool, err error) {
	var data []byte
	for _, pause := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return s3lect.Record{}, false, fmt.Errorf("read %q: %w (last attempt: %w)", key, ctx.Err(), err)
		}
		data, _, err = st.Get(ctx, key)
		if err == nil || errors.Is(err, store.ErrNotFound) || store.IsPermanent(err) {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s3lect.Record{}, false, nil
	case err != nil:
		return s3lect.Record{}, false, fmt.Errorf("read %q: %w", key, err)
	}
	rec, err = s3lect.ParseRecord(data)
	if err != nil {
		return s3lect.Record{}, true, fmt.Errorf("lockfile %q: %w", key, err)
	}
	return rec, true, nil
}

// parseNoArgs parses the flags of a command that takes no arguments. It
// reports false, with the exit status, when the command must stop: -h
// (status 0), a bad flag or a stray argument (usage, with the argument
// named).
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return exitOK, true
}
