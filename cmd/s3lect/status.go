package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
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

func statusCmd(args []string, stdout, stderr io.Writer) int {
	var (
		sf           storeFlags
		asJSON, wait bool
		frequent, lt time.Duration
	)
	fs := flag.NewFlagSet("s3lect status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), statusUsage)
		fs.PrintDefaults()
	}
	sf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&wait, "wait", false, "watch the lockfile for -timeout and say whether the leader renews")
	fs.DurationVar(&frequent, "frequent", s3lect.DefaultFrequentInterval, "with -wait: how often to read")
	fs.DurationVar(&lt, "timeout", s3lect.DefaultLeaderTimeout, "with -wait: how long to watch (the group's LeaderTimeout)")
	connect := fs.Duration("connect-timeout", 10*time.Second, "how long one read may wait for the store before status exits 6, naming the endpoint")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	if frequent <= 0 || lt <= 0 || *connect <= 0 {
		fmt.Fprintln(stderr, "s3lect status: -frequent, -timeout and -connect-timeout must be positive")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := sf.open(ctx, stderr)
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
		rctx, cancel := context.WithTimeout(ctx, *connect)
		defer cancel()
		rep := statusReport{Lockfile: st.where}
		rec, found, err := readLockfile(rctx, st.st, st.key)
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
		age := time.Since(lu).Seconds()
		held := float64(rec.Held) / 1000
		rep.LastUpdated, rep.AgeSeconds, rep.HeldSeconds = &lu, &age, &held
		return rep, nil
	}
	rep, err := read()
	if err != nil {
		return reportNoAnswer(stderr, "s3lect status", sf.endpointName(st.where), err)
	}
	if wait {
		first := rep
		start := time.Now()
		renewing := false
		t := time.NewTicker(frequent)
		for !renewing && time.Since(start) < lt {
			select {
			case <-ctx.Done():
				t.Stop()
				return exitOK
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
		t.Stop()
		rep.Renewing, rep.Watched = &renewing, time.Since(start).Round(time.Millisecond).String()
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	fmt.Fprintf(stdout, "lockfile %s\n", rep.Lockfile)
	fmt.Fprintf(stdout, "  state:   %s\n", rep.State)
	if rep.Problem != "" {
		fmt.Fprintf(stdout, "  problem: %s\n", rep.Problem)
	}
	if rep.Leader != "" {
		fmt.Fprintf(stdout, "  leader:  %s\n", rep.Leader)
		if rep.Address != "" {
			fmt.Fprintf(stdout, "  address: %s\n", rep.Address)
		}
		fmt.Fprintf(stdout, "  term:    %d\n", rep.Term)
	}
	if rep.LastUpdated != nil {
		fmt.Fprintf(stdout, "  updated: %s (%v ago; the writer's clock against this one)\n",
			rep.LastUpdated.Format(time.RFC3339Nano), time.Duration(*rep.AgeSeconds*float64(time.Second)).Round(time.Millisecond))
		fmt.Fprintf(stdout, "  held:    %v at that write\n", time.Duration(*rep.HeldSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	if rep.Renewing != nil {
		if *rep.Renewing {
			fmt.Fprintf(stdout, "  renewing: yes (a new write within %s)\n", rep.Watched)
		} else {
			fmt.Fprintf(stdout, "  renewing: no (no new write in %s: the leader is gone or cut off, or -timeout is shorter than its renewal period)\n", rep.Watched)
		}
	}
	return exitOK
}

const watchUsage = `usage: s3lect watch [flags]

Prints one line per change of leader (or of the store error it sees) until
interrupted, starting with the current state: the time, the leader and its
term, or "none" with the term that ended and why, or the store error. It
reads the lockfile every FrequentInterval (-frequent), so a leadership that
lasts a FrequentInterval is always seen; when terms rise by more than one
between two reads, a line says which terms were not seen (a leadership
shorter than a read interval, or a takeover whose write did not land).
Leadership is judged as a follower judges it (LeaderTimeout of silence), so
-frequent and -timeout should match the group's. -json prints one JSON object per line.

The store's errors are printed as they change. A store that has not
answered once since start (a wrong endpoint, DNS, a firewall) ends watch
after -connect-timeout with status 6, naming the endpoint, as run does; once
it has answered, outages are printed and waited out.

Exit statuses: 0 interrupted, 2 bad usage, 5 the store refused for good,
6 the store never answered within -connect-timeout.

Flags:
`

// watchLine is one line of watch -json.
type watchLine struct {
	Time    time.Time `json:"time"`
	Leader  string    `json:"leaderID"` // "" when nobody leads; named as in the lockfile
	Address string    `json:"leaderAddr,omitempty"`
	Term    uint64    `json:"term,omitempty"` // on a line where nobody leads, the term of the leadership that ended
	// Vacant says why nobody leads: "released" (the last leader gave the
	// lockfile back), "expired" (its record stopped being renewed),
	// "absent" (no lockfile) or "unreadable"; Was names that last leader.
	Vacant string `json:"vacant,omitempty"`
	Was    string `json:"was,omitempty"`
	Err    string `json:"err,omitempty"`
	// Unseen, on a line of its own, names the terms from Term to UnseenTo
	// that began and ended between two reads (or whose takeover did not
	// land): terms only rise, so none is skipped silently.
	Unseen   bool   `json:"unseen,omitempty"`
	UnseenTo uint64 `json:"unseenTo,omitempty"`

	cause string // Err without its request IDs: a repeat of one failure shares it
	hint  string // what to check, for Err
}

func watchCmd(args []string, stdout, stderr io.Writer) int {
	var (
		sf                       storeFlags
		asJSON                   bool
		frequent, infrequent, lt time.Duration
		connect                  time.Duration
	)
	fs := flag.NewFlagSet("s3lect watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), watchUsage)
		fs.PrintDefaults()
	}
	sf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON lines instead of text")
	fs.DurationVar(&frequent, "frequent", 0, "FrequentInterval (0: 5s)")
	fs.DurationVar(&infrequent, "infrequent", 0, "how often to read once a leader renews steadily (0: -frequent, so that no leadership is missed)")
	fs.DurationVar(&lt, "timeout", 0, "LeaderTimeout (0: 15s)")
	fs.DurationVar(&connect, "connect-timeout", time.Minute, "exit (status 6) if the store has not answered once within this time since start; 0 waits for ever")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	if connect < 0 {
		fmt.Fprintln(stderr, "s3lect watch: -connect-timeout must not be negative")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, "s3lect watch", err)
	}
	defer st.close()
	host, _ := os.Hostname()
	if infrequent == 0 {
		// A watcher reads at the frequent pace: at the InfrequentInterval it
		// would miss a leadership shorter than that between two reads.
		infrequent = cmp.Or(frequent, s3lect.DefaultFrequentInterval)
	}
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st.st, LockfilePath: st.key,
		ServerID:         fmt.Sprintf("s3lect-watch-%s-%d", host, os.Getpid()),
		FrequentInterval: frequent, InfrequentInterval: infrequent, LeaderTimeout: lt,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return reportErr(stderr, "s3lect watch", usageErr("%v", err))
	}
	defer e.Close()
	print := func(l watchLine) {
		if asJSON {
			b, _ := json.Marshal(l)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintf(stdout, "%s %s\n", l.Time.Format(time.RFC3339Nano), l.text())
		}
	}
	var w watcher
	changes := e.Observe(ctx)
	// While nobody leads, the lockfile is read at every FrequentInterval
	// here too: the elector announces a change of leader only, and a
	// leadership that begins and ends between two of its reads (a
	// released record of a higher term behind the same "none") would
	// otherwise go unprinted.
	tick := time.NewTicker(cmp.Or(frequent, s3lect.DefaultFrequentInterval))
	defer tick.Stop()
	var (
		answered bool             // the store has answered once
		silent   <-chan time.Time // -connect-timeout
	)
	if connect > 0 {
		t := time.NewTimer(connect)
		defer t.Stop()
		silent = t.C
	}
	endpoint := sf.endpointName(st.where)
	for {
		var (
			l    watchLine
			perm bool // the store refused for good
		)
		select {
		case c, ok := <-changes:
			if !ok {
				return exitOK
			}
			l = watchLine{Time: time.Now().UTC(), Leader: c.Leader.LeaderID, Address: c.Leader.LeaderAddr, Term: c.Leader.Term}
			switch {
			case c.Err != nil && errors.Is(c.Err, s3lect.ErrNeverAnswered):
				l.Err, l.cause, perm = withoutNeverAnswered(c.Err), errorCause(c.Err), isPermanent(c.Err)
				l.Err = fmt.Sprintf("the store at %s has not answered since watch started: %s", endpoint, l.Err)
				l.hint = " (" + noAnswerFix(endpoint) + ")"
				if connect > 0 {
					l.hint = fmt.Sprintf(" (%s Giving up after -connect-timeout %v unless it answers.)", noAnswerFix(endpoint), connect)
				}
			case c.Err != nil:
				l.Err, l.cause, l.hint, perm = c.Err.Error(), errorCause(c.Err), hint(c.Err), isPermanent(c.Err)
			default:
				answered = true
			}
			if c.Err == nil && l.Leader == "" {
				l.Vacant, l.Was, l.Term = vacancy(ctx, st.st, st.key)
			}
		case <-silent:
			if answered {
				continue
			}
			fmt.Fprintf(stderr, "s3lect watch: the store at %s has not answered since start, for -connect-timeout %v; giving up. %s\n",
				endpoint, connect, noAnswerFix(endpoint))
			return exitNoAnswer
		case <-tick.C:
			if !w.vacant() {
				continue
			}
			l = watchLine{Time: time.Now().UTC()}
			l.Vacant, l.Was, l.Term = vacancy(ctx, st.st, st.key)
			if l.Vacant == "" || l.Vacant == "expired" {
				// The read failed (the elector reports the store's
				// errors), or a record someone renews: whether it leads
				// or has expired takes the elector's LeaderTimeout of
				// watching, and it announces a new leader.
				continue
			}
		}
		for _, line := range w.see(l) {
			print(line)
		}
		if perm {
			fmt.Fprintf(stderr, "s3lect watch: the store refused: %s\n", l.Err)
			return exitRefused
		}
	}
}

// watcher decides what watch prints: a line per change of leader, of
// vacancy or of store error, with a line naming the terms it never saw
// before a line whose term skips some (terms only rise). It does no I/O.
type watcher struct {
	last     watchLine // the last state printed
	printed  bool      // last is set
	lastTerm uint64    // the highest term printed
}

// vacant reports whether the last state printed is that nobody leads.
func (w *watcher) vacant() bool { return w.printed && w.last.Err == "" && w.last.Leader == "" }

// see returns the lines to print for the state l.
func (w *watcher) see(l watchLine) []watchLine {
	if l.Err != "" {
		// The same failure again with only its request IDs changed is
		// not a change worth a line.
		if w.printed && w.last.Err != "" && l.cause == w.last.cause {
			return nil
		}
		w.last, w.printed = l, true
		return []watchLine{l}
	}
	if w.printed && w.last.Err == "" && w.last.Leader == l.Leader && w.last.Term == l.Term &&
		w.last.Vacant == l.Vacant && w.last.Was == l.Was {
		return nil // the same state, seen again
	}
	var out []watchLine
	if gap, ok := unseenTerms(w.lastTerm, l); ok {
		out = append(out, gap)
	}
	w.lastTerm = max(w.lastTerm, l.Term)
	w.last, w.printed = l, true
	return append(out, l)
}

// text is the line's human form, without its time.
func (l watchLine) text() string {
	switch {
	case l.Unseen:
		text := fmt.Sprintf("term %d not seen", l.Term)
		if l.UnseenTo > l.Term {
			text = fmt.Sprintf("terms %d to %d not seen", l.Term, l.UnseenTo)
		}
		return text + " (led between two reads, or a takeover that did not land)"
	case l.Err != "":
		return fmt.Sprintf("store error: %s%s", l.Err, l.hint)
	case l.Leader == "":
		return fmt.Sprintf("leader: none (%s)", describeVacancy(l.Vacant, l.Was, l.Term))
	}
	addr := ""
	if l.Address != "" {
		addr = " address " + l.Address
	}
	return fmt.Sprintf("leader: %s term %d%s", l.Leader, l.Term, addr)
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

// unseenTerms returns the line watch prints before l when terms between
// the highest printed so far, last, and l's were never seen, and false
// when none were skipped (or nothing was printed before).
func unseenTerms(last uint64, l watchLine) (watchLine, bool) {
	if last == 0 || l.Term <= last+1 {
		return watchLine{}, false
	}
	return watchLine{Time: l.Time, Term: last + 1, Unseen: true, UnseenTo: l.Term - 1}, true
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

// vacancy reads the lockfile once to say why nobody leads: released,
// expired, absent or unreadable, and who led last.
func vacancy(ctx context.Context, st store.Store, key string) (why, was string, term uint64) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, found, err := readLockfile(rctx, st, key)
	switch {
	case err != nil && found: // the content is not a valid record
		return "unreadable", "", 0
	case err != nil:
		return "", "", 0 // the next change says what the store does
	case !found:
		return "absent", "", 0
	case rec.LastUpdated.IsZero():
		return "released", rec.LeaderID, rec.Term
	}
	return "expired", rec.LeaderID, rec.Term
}

func describeVacancy(why, was string, term uint64) string {
	switch why {
	case "released":
		return fmt.Sprintf("released by %s, term %d", was, term)
	case "expired":
		return fmt.Sprintf("%s's lease (term %d) expired: its record was not renewed in time", was, term)
	case "absent":
		return "no lockfile"
	case "unreadable":
		return "the lockfile is unreadable; it is taken over after LeaderTimeout"
	}
	return "vacant"
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
