package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

const watchUsage = `usage: s3lect watch [flags]

Prints one line per change of leader (or of the store error it sees) until
interrupted, starting with the current state: the time (UTC, to the
millisecond, as run's lines), the leader and its term, or "none" with the
term that ended and why, or the store error. It reads the lockfile every
FrequentInterval (-frequent), whatever -infrequent says, so a leadership
that lasts a FrequentInterval is always seen; when terms rise by more than one
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

// watchConfig is watch's command line, parsed.
type watchConfig struct {
	sf       storeFlags
	asJSON   bool
	frequent time.Duration // how often the lockfile is read, always (0: the default)
	timeout  time.Duration // LeaderTimeout (0: the default)
	connect  time.Duration // -connect-timeout (0: for ever)
	note     string        // printed to stderr before watching: a flag that has no effect, and why
}

// parseWatch parses watch's flags. It reports false, with the exit
// status, when watch must not run.
func parseWatch(args []string, stderr io.Writer) (watchConfig, int, bool) {
	var (
		c          watchConfig
		infrequent time.Duration
	)
	fs := newFlagSet("s3lect watch", watchUsage, stderr)
	c.sf.register(fs)
	fs.BoolVar(&c.asJSON, "json", false, "print JSON lines instead of text")
	fs.DurationVar(&c.frequent, "frequent", 0, "how often to read the lockfile: the group's FrequentInterval (0: 5s)")
	fs.DurationVar(&infrequent, "infrequent", 0, "accepted so that a runner's interval flags can be given as they are; watch always reads every -frequent, so that no leadership is missed")
	fs.DurationVar(&c.timeout, "timeout", 0, "LeaderTimeout (0: 15s)")
	fs.DurationVar(&c.connect, "connect-timeout", time.Minute, "exit (status 6) if the store has not answered once within this time since start; 0 waits for ever")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return c, code, false
	}
	if c.connect < 0 {
		fmt.Fprintln(stderr, "s3lect watch: -connect-timeout must not be negative")
		return c, exitUsage, false
	}
	if fi := cmp.Or(c.frequent, s3lect.DefaultFrequentInterval); infrequent > fi {
		// At a stable follower's pace, leaderships that begin and end
		// between two reads would show only as unseen terms, or not at
		// all before watch ends.
		c.note = fmt.Sprintf("s3lect watch: reading every -frequent %v, not -infrequent %v: a watcher reads at the frequent pace so that no leadership is missed", fi, infrequent)
	}
	return c, exitOK, true
}

// electorConfig is the configuration of watch's elector: a follower that
// never campaigns and reads every FrequentInterval.
func (c watchConfig) electorConfig(st store.Store, key string) s3lect.ElectorConfig {
	host, _ := os.Hostname()
	fi := cmp.Or(c.frequent, s3lect.DefaultFrequentInterval)
	return s3lect.ElectorConfig{Store: st, LockfilePath: key,
		ServerID:         fmt.Sprintf("s3lect-watch-%s-%d", host, os.Getpid()),
		FrequentInterval: c.frequent, InfrequentInterval: fi, LeaderTimeout: c.timeout,
		Logger: slog.New(slog.DiscardHandler)}
}

// watch prints the lockfile's changes of leader until ctx ends.
func watch(ctx context.Context, c watchConfig, stdout, stderr io.Writer) int {
	if c.note != "" {
		fmt.Fprintln(stderr, c.note)
	}
	st, err := c.sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, "s3lect watch", err)
	}
	defer st.close()
	e, err := s3lect.New(c.electorConfig(st.st, st.key))
	if err != nil {
		return reportErr(stderr, "s3lect watch", usageErr("%v", err))
	}
	defer e.Close()
	wl := &watchLoop{c: c, st: st, endpoint: c.sf.endpointName(st.where), stdout: stdout, stderr: stderr}
	return wl.run(ctx, e.Observe(ctx))
}

// watchLoop turns the elector's changes, and reads of the lockfile while
// nobody leads, into watch's lines.
type watchLoop struct {
	c        watchConfig
	st       *opened
	endpoint string
	stdout   io.Writer
	stderr   io.Writer
	w        watcher
	answered bool // the store has answered once
}

func (wl *watchLoop) run(ctx context.Context, changes <-chan s3lect.Change) int {
	// While nobody leads, the lockfile is read at every FrequentInterval
	// here too: the elector announces a change of leader only, and a
	// leadership that begins and ends between two of its reads (a
	// released record of a higher term behind the same "none") would
	// otherwise go unprinted.
	tick := time.NewTicker(cmp.Or(wl.c.frequent, s3lect.DefaultFrequentInterval))
	defer tick.Stop()
	var silent <-chan time.Time // -connect-timeout
	if wl.c.connect > 0 {
		t := time.NewTimer(wl.c.connect)
		defer t.Stop()
		silent = t.C
	}
	for {
		var (
			l    watchLine
			ok   bool
			perm bool // the store refused for good
		)
		select {
		case c, open := <-changes:
			if !open {
				return exitOK
			}
			l, perm = wl.change(ctx, c)
			ok = true
		case <-silent:
			if wl.answered {
				continue
			}
			fmt.Fprintf(wl.stderr, "s3lect watch: the store at %s has not answered since start, for -connect-timeout %v; giving up. %s\n",
				wl.endpoint, wl.c.connect, noAnswerFix(wl.endpoint))
			return exitNoAnswer
		case <-tick.C:
			if !wl.w.vacant() {
				continue
			}
			rec, found, err := readVacancy(ctx, wl.st.st, wl.st.key)
			// A record someone renews: whether it leads or has expired
			// takes the elector's LeaderTimeout of watching, and it
			// announces a new leader.
			l, ok = wl.w.vacancy(watchLine{Time: now()}, rec, found, err, false)
		}
		if !ok {
			continue
		}
		for _, line := range wl.w.see(l) {
			wl.print(line)
		}
		if perm {
			fmt.Fprintf(wl.stderr, "s3lect watch: the store refused: %s\n", l.Err)
			return exitRefused
		}
	}
}

// change is the line for one of the elector's changes, and whether the
// store refused for good.
func (wl *watchLoop) change(ctx context.Context, c s3lect.Change) (watchLine, bool) {
	l := watchLine{Time: now(), Leader: c.Leader.LeaderID, Address: c.Leader.LeaderAddr, Term: c.Leader.Term}
	switch {
	case c.Err != nil && errors.Is(c.Err, s3lect.ErrNeverAnswered):
		l.Err, l.cause = withoutNeverAnswered(c.Err), errorCause(c.Err)
		l.Err = fmt.Sprintf("the store at %s has not answered since watch started: %s", wl.endpoint, l.Err)
		l.hint = " (" + noAnswerFix(wl.endpoint) + ")"
		if wl.c.connect > 0 {
			l.hint = fmt.Sprintf(" (%s Giving up after -connect-timeout %v unless it answers.)", noAnswerFix(wl.endpoint), wl.c.connect)
		}
		return l, isPermanent(c.Err)
	case c.Err != nil:
		l.Err, l.cause, l.hint = c.Err.Error(), errorCause(c.Err), hint(c.Err)
		return l, isPermanent(c.Err)
	}
	wl.answered = true
	if l.Leader == "" {
		rec, found, err := readVacancy(ctx, wl.st.st, wl.st.key)
		if v, ok := wl.w.vacancy(l, rec, found, err, true); ok {
			l = v
		}
	}
	return l, false
}

func (wl *watchLoop) print(l watchLine) {
	if wl.c.asJSON {
		b, _ := json.Marshal(l)
		fmt.Fprintln(wl.stdout, string(b))
		return
	}
	fmt.Fprintf(wl.stdout, "%s %s\n", stamp(l.Time), l.text())
}

// now is the time of a line: UTC, to the millisecond, as run's lines.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// stamp formats t as every line of run and watch begins: UTC, to the
// millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

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

// unseenTerms returns the line watch prints before l when terms between
// the highest printed so far, last, and l's were never seen, and false
// when none were skipped (or nothing was printed before).
func unseenTerms(last uint64, l watchLine) (watchLine, bool) {
	if last == 0 || l.Term <= last+1 {
		return watchLine{}, false
	}
	return watchLine{Time: l.Time, Term: last + 1, Unseen: true, UnseenTo: l.Term - 1}, true
}

// readVacancy reads the lockfile once, when the elector says nobody
// leads, for watcher.vacancy to say why.
func readVacancy(ctx context.Context, st store.Store, key string) (rec s3lect.Record, found bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return readLockfile(rctx, st, key)
}

// vacancy returns the line for l, a state in which nobody leads, given
// what one read of the lockfile found: why nobody leads (released,
// expired, absent or unreadable) and who led last. false: nothing to
// print (the read failed: the elector reports the store's errors). A
// record of a higher term than any printed, still held, is a leadership
// that began after the elector's own read: a takeover (after a crash, the
// next leader takes over about when a watcher sees the lease expire), so
// its leader is printed, never as expired. expiredOK is false for a read
// of watch's own: whether a record nobody renews has expired takes the
// elector's LeaderTimeout of watching, and it says so.
func (w *watcher) vacancy(l watchLine, rec s3lect.Record, found bool, err error, expiredOK bool) (watchLine, bool) {
	switch {
	case err != nil && found: // the content is not a valid record
		l.Vacant = "unreadable"
		return l, true
	case err != nil:
		return l, false
	case !found:
		l.Vacant = "absent"
		return l, true
	case rec.LastUpdated.IsZero():
		l.Vacant, l.Was, l.Term = "released", rec.LeaderID, rec.Term
		return l, true
	case w.printed && rec.Term > w.lastTerm:
		l.Leader, l.Address, l.Term = rec.LeaderID, rec.LeaderAddr, rec.Term
		return l, true
	case !expiredOK:
		return l, false
	}
	l.Vacant, l.Was, l.Term = "expired", rec.LeaderID, rec.Term
	return l, true
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
