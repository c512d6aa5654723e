package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

const runUsage = `usage: s3lect run [flags] -- command args...

Runs the command only while this instance leads the lockfile's group. Start
the same line on every machine: one runs the command, the others wait and
print who leads (at start and at every change) and every store error.

What is guaranteed:
  - The command runs in a process group of its own, under a small guard
    process. If s3lect dies, even by SIGKILL, the guard kills the whole group
    (Linux: at once, by the parent-death signal; macOS and the BSDs: within
    50ms, by polling). Processes that leave the group (setsid, daemons) are
    not covered. The command cannot read from a terminal: it is not in the
    terminal's foreground group; Ctrl-C reaches it through s3lect.
  - When leadership is lost or its lease expires, the group gets SIGTERM at
    once and SIGKILL LeaderTimeout/20 later (half the lease's safety margin),
    and s3lect confirms that no process of the group runs any more. A follower
    can take over no earlier than LeaderTimeout/10 after the lease ended (by
    the leader's clock), so the command has stopped before any other
    instance may start it, provided the machines' clock rates agree within
    2.5% (the election itself tolerates 5%; NTP-kept clocks agree to far
    better than 0.1%).
  - SIGTERM or SIGINT to s3lect is a voluntary stop: it is forwarded to the
    group, s3lect keeps renewing for up to -grace while the command drains,
    then kills what is left and releases the lockfile, so that a follower
    starts at once. A second signal kills at once.
  - When the command exits, s3lect kills what is left of its group, releases
    the lockfile and exits with the command's status (128+N if signal N
    killed it).

Not guaranteed: a machine that freezes (a paused VM, SIGSTOP) can outlive its
lease. The command gets S3LECT_TERM, the leadership's fencing token, in its
environment: pass it to what it writes, and have that reject writes with a
lower term than it has seen, for full fencing. For objects in the same bucket,
's3lect put KEY FILE' in the command does that (S3LECT_STORE names the store;
docs/fencing.md).

Exit statuses: the command's own; 0 if stopped by a signal before leading;
1 unexpected failure; 2 bad usage; 3 not leader within -try; 4 leadership lost
(with -once); 5 the store refused for good (the message names the fix);
6 the store never answered within -connect-timeout (the message names the
endpoint and what to check; once it has answered, outages are waited out);
127 the command could not be started.

Flags:
`

type runOptions struct {
	sf                  storeFlags
	id                  string
	grace, try          time.Duration
	once, verbose       bool
	frequent            time.Duration
	infrequent, timeout time.Duration
	peerAddr            string
	peerCert, peerKey   string
	peerCA              string
	connectTimeout      time.Duration
}

func runCmd(args []string, stdout, stderr io.Writer) int {
	host, _ := os.Hostname()
	var o runOptions
	fs := flag.NewFlagSet("s3lect run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	o.sf.register(fs)
	fs.StringVar(&o.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's ID, unique in the group")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "on SIGTERM/SIGINT to s3lect: how long the command may drain before SIGKILL")
	fs.DurationVar(&o.try, "try", 0, "give up (exit status 3) if not leader within this time; 0 waits for ever")
	fs.BoolVar(&o.once, "once", false, "exit (status 4) when leadership is lost instead of campaigning again")
	fs.BoolVar(&o.verbose, "v", false, "log the elector's events to stderr")
	fs.DurationVar(&o.connectTimeout, "connect-timeout", time.Minute, "exit (status 6) if the store has not answered once within this time since start; 0 waits for ever")
	fs.DurationVar(&o.frequent, "frequent", 0, "FrequentInterval: renewal period (0: 5s)")
	fs.DurationVar(&o.infrequent, "infrequent", 0, "InfrequentInterval: a stable follower's check period (0: 30s)")
	fs.DurationVar(&o.timeout, "timeout", 0, "LeaderTimeout: silence after which a follower takes over (0: 15s)")
	fs.StringVar(&o.peerAddr, "peer-addr", "", "peer mode: host:port this instance serves its leadership on over HTTPS, and advertises")
	fs.StringVar(&o.peerCert, "peer-cert", "", "peer mode: PEM certificate for -peer-addr")
	fs.StringVar(&o.peerKey, "peer-key", "", "peer mode: PEM key for -peer-cert")
	fs.StringVar(&o.peerCA, "peer-ca", "", "peer mode: PEM CA that signed the other instances' certificates (default: system roots)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	command := fs.Args()
	if len(command) == 0 {
		fmt.Fprintln(stderr, "s3lect run: no command given; usage: s3lect run -store s3://bucket/key -- command args...")
		return exitUsage
	}
	if runSupported != nil {
		fmt.Fprintln(stderr, "s3lect run:", runSupported)
		return exitUsage
	}
	if o.grace < 0 || o.try < 0 || o.connectTimeout < 0 {
		fmt.Fprintln(stderr, "s3lect run: -grace, -try and -connect-timeout must not be negative")
		return exitUsage
	}
	// The timings are checked before the store is opened, so that a usage
	// error is named as one even where the store cannot be reached (no
	// credentials, no network): New checks them the same way on any store.
	if _, err := s3lect.New(s3lect.ElectorConfig{Store: memstore.New(), LockfilePath: "timings", ServerID: o.id,
		FrequentInterval: o.frequent, InfrequentInterval: o.infrequent, LeaderTimeout: o.timeout}); err != nil {
		return reportErr(stderr, "s3lect run", usageErr("%v", err))
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	base, stop := context.WithCancel(context.Background())
	defer stop()

	// Opening a NATS store may wait for its server; a signal ends that.
	opening := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			stop()
		case <-opening:
		}
	}()
	st, err := o.sf.open(base, stderr)
	close(opening)
	if err != nil {
		return reportErr(stderr, "s3lect run", err)
	}
	defer st.close()

	cfg := s3lect.ElectorConfig{
		Store: st.st, LockfilePath: st.key, ServerID: o.id,
		FrequentInterval: o.frequent, InfrequentInterval: o.infrequent, LeaderTimeout: o.timeout,
		Logger: slog.New(slog.DiscardHandler),
	}
	if o.verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	var serverTLS *tls.Config
	if o.peerAddr != "" || o.peerCert != "" || o.peerKey != "" || o.peerCA != "" {
		if serverTLS, err = o.peerConfig(&cfg); err != nil {
			return reportErr(stderr, "s3lect run", err)
		}
	}
	e, err := s3lect.New(cfg)
	if err != nil {
		return reportErr(stderr, "s3lect run", usageErr("%v", err))
	}
	defer e.Close()
	if serverTLS != nil {
		ln, err := net.Listen("tcp", o.peerAddr)
		if err != nil {
			return reportErr(stderr, "s3lect run", usageErr("-peer-addr: %v", err))
		}
		pctx, pstop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- s3lect.ServePeers(pctx, ln, s3lect.PeerHandler(e), serverTLS) }()
		defer func() { pstop(); <-served }()
	}

	lt := o.timeout
	if lt == 0 {
		lt = s3lect.DefaultLeaderTimeout
	}
	r := &runner{o: o, e: e, st: st.st, key: st.key, where: st.where, endpoint: o.sf.endpointName(st.where), command: command, sigs: sigs, stderr: stderr, killAfter: lt / 20}
	return r.loop()
}

// peerConfig fills cfg's peer-mode fields from the flags and returns the
// server's TLS configuration.
func (o runOptions) peerConfig(cfg *s3lect.ElectorConfig) (*tls.Config, error) {
	if o.peerAddr == "" || o.peerCert == "" || o.peerKey == "" {
		return nil, usageErr("peer mode needs -peer-addr, -peer-cert and -peer-key together")
	}
	cert, err := tls.LoadX509KeyPair(o.peerCert, o.peerKey)
	if err != nil {
		return nil, usageErr("-peer-cert/-peer-key: %v", err)
	}
	client := &tls.Config{Certificates: []tls.Certificate{cert}}
	if o.peerCA != "" {
		pem, err := os.ReadFile(o.peerCA)
		if err != nil {
			return nil, usageErr("-peer-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErr("-peer-ca %s holds no PEM certificate", o.peerCA)
		}
		client.RootCAs = pool
	}
	cfg.PeerMode, cfg.ServerAddr, cfg.PeerTLS = true, o.peerAddr, client
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// reportErr prints err and returns the exit status its kind calls for.
func reportErr(stderr io.Writer, who string, err error) int {
	var u errUsage
	switch {
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "%s: %s\n", who, unprefixed(err.Error()))
		return exitUsage
	case store.IsPermanent(err):
		fmt.Fprintf(stderr, "%s: the store refused: %s\n", who, unprefixed(err.Error()))
		return exitRefused
	case errors.Is(err, context.Canceled):
		return exitOK
	default:
		fmt.Fprintf(stderr, "%s: %s%s\n", who, unprefixed(err.Error()), hint(err))
		return exitFailure
	}
}

// runner campaigns, runs the command while leading, and stops it in time.
type runner struct {
	o         runOptions
	e         *s3lect.Elector
	st        store.Store // the elector's store, read once after a leadership is lost (stepRequest)
	key       string
	where     string
	endpoint  string // the store's endpoint as a person names it, for the never-answered warning
	command   []string
	sigs      chan os.Signal // only the runner's goroutine reads it
	stderr    io.Writer
	killAfter time.Duration // from the end of a leadership to SIGKILL
	answered  atomic.Bool   // the store has answered a read since start
	noAnswer  atomic.Bool   // -connect-timeout ran out before it did
	holdOff   atomic.Int64  // until when (Unix ns) this member stays out of the election after a step-down
}

// printf prints one line of the run's narration, stamped with the time
// (UTC, to the millisecond) so that an operator reading a terminal or a
// file can tell when the leadership moved; under systemd the journal's own
// stamp comes first. An error that says "s3lect:" itself is not prefixed
// twice.
func (r *runner) printf(format string, args ...any) {
	msg := unprefixed(fmt.Sprintf(format, args...))
	fmt.Fprintf(r.stderr, "%s s3lect: %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), msg)
}

// unprefixed drops the "s3lect: " that the library's errors begin with
// from a message that is printed after a prefix of the command's own
// ("s3lect: s3lect: ..." read as a stutter).
func unprefixed(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "s3lect: "), ": s3lect: ", ": ")
}

func (r *runner) loop() int {
	for {
		lead, end, code, ok := r.campaign()
		if !ok {
			return code
		}
		code, again := r.supervise(lead)
		end()
		if !again {
			return code
		}
		if r.o.once {
			return exitLost
		}
	}
}

// campaign waits until this instance leads, printing what it sees while
// it waits. ok is false when the run ends instead, with status code. end
// must be called once the leadership is over: the leadership's context
// derives from the campaign's.
func (r *runner) campaign() (lead *s3lect.Leadership, end func(), code int, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var timedOut atomic.Bool
	timer := &time.Timer{}
	if r.o.try > 0 {
		timer = time.AfterFunc(r.o.try, func() { timedOut.Store(true); cancel() })
	}
	if r.o.connectTimeout > 0 && !r.answered.Load() {
		// A store that has not answered once since start is almost always
		// a misconfiguration: give up after -connect-timeout, with a
		// status of its own. Once it has answered, outages are waited out.
		silent := time.AfterFunc(r.o.connectTimeout, func() {
			if !r.answered.Load() {
				r.noAnswer.Store(true)
				cancel()
			}
		})
		defer silent.Stop()
	}
	r.printf("%s campaigning for %s", r.o.id, r.where)
	obsCtx, obsStop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.narrate(r.e.Observe(obsCtx))
	}()
	defer func() { obsStop(); <-watched }()

	type result struct {
		lead *s3lect.Leadership
		err  error
	}
	won := make(chan result, 1)
	go func() {
		l, err := r.e.Campaign(ctx)
		won <- result{l, err}
	}()
	var res result
	select {
	case res = <-won:
	case sig := <-r.sigs:
		r.printf("%v before leading; stopping (nothing ran)", sig)
		cancel()
		<-won // Campaign gives back anything it had won
		return nil, nil, exitOK, false
	}
	if r.o.try > 0 && !timer.Stop() && res.err == nil {
		// -try ran out just as this instance won: the leadership is
		// cancelled already; give it back.
		r.release(res.lead)
		res.lead, res.err = nil, context.DeadlineExceeded
	}
	obsStop()
	<-watched // no narration after the outcome's line
	switch {
	case res.err == nil:
		r.printf("%s leads %s (term %d); starting %s", r.o.id, r.where, res.lead.Term(), r.command[0])
		return res.lead, cancel, 0, true
	case r.noAnswer.Load() && res.err != nil:
		cancel()
		r.printf("the store at %s has not answered since start, for -connect-timeout %v; giving up. %s",
			r.endpoint, r.o.connectTimeout, noAnswerFix(r.endpoint))
		return nil, nil, exitNoAnswer, false
	case timedOut.Load():
		cancel()
		who := "nobody leads"
		if rec, ok := r.e.Leader(); ok {
			who = fmt.Sprintf("%s leads (term %d)", rec.LeaderID, rec.Term)
		}
		r.printf("not leader of %s within -try %v; %s", r.where, r.o.try, who)
		return nil, nil, exitTry, false
	default:
		cancel()
		return nil, nil, reportErr(r.stderr, "s3lect run", res.err), false
	}
}

// narrate prints who leads, at once and at every change, and every store
// error, one line each: an error that persists is repeated every
// errRepeat, and its end is reported.
func (r *runner) narrate(changes <-chan s3lect.Change) {
	tick := time.NewTicker(errRepeat)
	defer tick.Stop()
	var (
		last      s3lect.Change
		seen      bool
		lastErr   string // the last store error printed
		lastCause string // and its cause (errorCause)
	)
	for {
		select {
		case c, ok := <-changes:
			if !ok {
				return
			}
			if c.Err != nil {
				if store.IsPermanent(c.Err) {
					continue // Campaign returns it; the run ends saying so
				}
				if r.noAnswer.Load() {
					continue // giving up: campaign says so
				}
				if cause := errorCause(c.Err); cause != lastCause {
					if !r.answered.Load() && lastCause == "" {
						r.printf("WARNING: the store at %s has not answered since start: %v. %s "+
							"Retrying; giving up after -connect-timeout %v unless it answers.", r.endpoint, withoutNeverAnswered(c.Err), noAnswerFix(r.endpoint), r.o.connectTimeout)
					} else {
						r.printf("store error: %v%s (retrying)", c.Err, hint(c.Err))
					}
					lastErr, lastCause = c.Err.Error(), cause
				}
				continue
			}
			r.answered.Store(true)
			if lastErr != "" {
				r.printf("store reachable again")
				lastErr, lastCause = "", ""
			}
			if seen && c.Leader.LeaderID == last.Leader.LeaderID && c.Leader.Term == last.Leader.Term && c.IsLeader == last.IsLeader {
				continue
			}
			last, seen = c, true
			if c.IsLeader {
				continue // campaign says so
			}
			msg := describe(c.Leader, time.Now())
			if until := time.Unix(0, r.holdOff.Load()); c.Leader.LeaderID == "" && time.Now().Before(until) {
				msg = fmt.Sprintf("nobody leads (released by this member's step-down); holding off until about %s so that another member takes over",
					until.UTC().Format("15:04:05"))
			}
			r.printf("waiting: %s", msg)
		case <-tick.C:
			if lastErr != "" && !r.noAnswer.Load() {
				r.printf("store error persists: %s%s (retrying)", lastErr, hint(errors.New(lastErr)))
			}
		}
	}
}

// describe says who leads, as a waiting instance sees it.
func describe(rec s3lect.Record, now time.Time) string {
	if rec.LeaderID == "" {
		return "nobody leads (lockfile absent, released or expired); taking over when allowed"
	}
	since := now.Add(-time.Duration(rec.Held) * time.Millisecond)
	addr := ""
	if rec.LeaderAddr != "" {
		addr = " at " + rec.LeaderAddr
	}
	return fmt.Sprintf("%s%s leads (term %d) since about %s (for %v)", rec.LeaderID, addr, rec.Term,
		since.Format("15:04:05"), now.Sub(since).Round(time.Second))
}

// supervise runs the command while lead lives. It returns the status to
// exit with, and whether the leadership ended under the command (so that
// the loop campaigns again).
func (r *runner) supervise(lead *s3lect.Leadership) (int, bool) {
	env := append(os.Environ(), childEnv(r.o, lead.Term())...) // S3LECT_TERM, S3LECT_STORE: fence.go
	g, err := startGroup(r.command, env)
	if err != nil {
		r.printf("start %s: %v", r.command[0], err)
		r.release(lead)
		return exitNotStart, false
	}
	select {
	case <-g.exited:
		r.reap(g)
		r.release(lead)
		return g.status, false

	case sig := <-r.sigs:
		r.printf("%v: forwarding it to the command; it has -grace %v to exit while this instance keeps the lease", sig, r.o.grace)
		g.signal(sigNumber(sig))
		t := time.NewTimer(r.o.grace)
		defer t.Stop()
		select {
		case <-g.exited:
		case <-t.C:
			r.printf("the command did not exit within -grace %v; killing its process group", r.o.grace)
		case sig := <-r.sigs:
			r.printf("%v again: killing the command's process group", sig)
		case <-lead.Context().Done():
			r.lost(lead, g)
			return g.status, false
		}
		r.reap(g)
		r.release(lead)
		return g.status, false

	case <-lead.Context().Done():
		r.lost(lead, g)
		r.handBack(lead)
		return exitLost, true
	}
}

// handBack tells the elector the command is gone after a leadership ended
// under it: a leader asked to step down (s3lect release) releases the
// lockfile now, and stays out of the next election for a while
// (docs/protocol.md, section 11). After any other end it does nothing.
func (r *runner) handBack(lead *s3lect.Leadership) {
	req, asked := r.stepRequest(lead.Term()) // before Resign replaces the request with the release
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lead.Resign(ctx); err != nil {
		r.printf("release %s after the step-down: %v (followers take over after LeaderTimeout)", r.where, err)
		return
	}
	if !asked {
		return
	}
	hold := r.holdOffTime(req.To)
	r.holdOff.Store(time.Now().Add(hold).UnixNano())
	r.printf("stepped down at an operator's request (s3lect release): released %s to %s; "+
		"this member stays out of the next election for about %v so that %s takes over", r.where,
		cmp.Or(req.To, "the next member to read it"), hold, cmp.Or(req.To, "another member"))
}

// lost stops the command after the leadership ended under it: SIGTERM at
// once, SIGKILL after killAfter, and returns once no process of the group
// runs any more. A leadership lost to another writer may have been an
// operator's step-down request (s3lect release): the lockfile is read once,
// after SIGTERM is sent, to say which.
func (r *runner) lost(lead *s3lect.Leadership, g *group) {
	ended := time.Now()
	g.signal(syscall.SIGTERM) // first: nothing below delays the stop
	t := time.NewTimer(r.killAfter)
	defer t.Stop()
	cause := context.Cause(lead.Context())
	why := unprefixed(fmt.Sprint(cause))
	if errors.Is(cause, s3lect.ErrLeadershipLost) {
		if req, ok := r.stepRequest(lead.Term()); ok {
			why = "asked to step down by s3lect release, to hand over to " + cmp.Or(req.To, "another member")
		}
	}
	r.printf("leadership ended (%s); stopping the command: SIGTERM sent, SIGKILL in %v", why, r.killAfter)
	select {
	case <-g.exited:
	case <-t.C:
	}
	if _, err := g.kill(); err != nil {
		r.printf("%v", err)
	}
	r.printf("command stopped (status %d) %v after the leadership ended", g.status, time.Since(ended).Round(time.Millisecond))
}

// stepRequest reads the lockfile once, for at most half the time to
// SIGKILL, and returns the step-down request over this member's
// leadership of term, if it finds one.
func (r *runner) stepRequest(term uint64) (s3lect.Record, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), min(r.killAfter/2, 2*time.Second))
	defer cancel()
	rec, found, err := readLockfile(ctx, r.st, r.key)
	if err != nil || !found || rec.StepDown == "" || rec.LastUpdated.IsZero() || rec.LeaderID != r.o.id || rec.Term != term {
		return s3lect.Record{}, false
	}
	return rec, true
}

// holdOffTime is about how long a member that released its leadership
// stays out of the next election, so that another member takes over
// first (the library's hold-off: the others' next read); with a named
// member (-to), the others wait the transfer window too.
func (r *runner) holdOffTime(to string) time.Duration {
	fi := cmp.Or(r.o.frequent, s3lect.DefaultFrequentInterval)
	ii := cmp.Or(r.o.infrequent, s3lect.DefaultInfrequentInterval)
	lt := cmp.Or(r.o.timeout, s3lect.DefaultLeaderTimeout)
	hold := ii + fi
	if r.o.peerAddr != "" {
		hold = fi
	}
	if to != "" {
		hold = max(hold, lt+fi)
	}
	return hold
}

// reap kills what is left of the group once the command is done with it.
func (r *runner) reap(g *group) {
	if _, err := g.kill(); err != nil {
		r.printf("%v", err)
	}
}

// release gives the lockfile back so that a follower starts at once.
func (r *runner) release(lead *s3lect.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lead.Resign(ctx); err != nil {
		r.printf("release %s: %v (followers take over after LeaderTimeout)", r.where, err)
		return
	}
	r.printf("released %s", r.where)
}
