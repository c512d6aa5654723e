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
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
  - SIGTERM or SIGINT to s3lect is a voluntary stop. In storage mode the
    release is announced first (-announce): the command keeps running
    while the leader's renewals say when it will release, about an
    InfrequentInterval (at most InfrequentInterval + FrequentInterval, 35s
    at the defaults), so that every follower is reading then. Then the
    signal is forwarded to the group, s3lect keeps renewing for up to
    -grace while the command drains, kills what is left and releases the
    lockfile: a follower starts within about a third of a second (the
    job's outage is the drain plus that), where without the announcement
    it starts at its next read, up to an InfrequentInterval later. In peer
    mode nothing is announced and the signal is forwarded at once:
    followers hear the release as it is written. A second signal during
    the announcement forwards it at once; one during the drain kills at
    once. Under Kubernetes, terminationGracePeriodSeconds must cover
    -announce + -grace + a few seconds (50 at the defaults), or give
    -announce what is left of it (docs/command.md).
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

// runConfig is run's command line, parsed.
type runConfig struct {
	sf                  storeFlags
	id                  string
	grace, try          time.Duration
	announce            announceFlag // -announce: announce.go
	once, verbose       bool
	frequent            time.Duration
	infrequent, timeout time.Duration
	peerAddr            string
	peerCert, peerKey   string
	peerCA              string
	connectTimeout      time.Duration
	metricsAddr         string // -metrics-addr: where to serve /metrics and /healthz ("": nowhere)
	logFormat           string // logText or logJSON
	command             []string
}

func runCmd(args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseRun(args, stderr)
	if !ok {
		return code
	}
	return run(c, newRunLog(stderr, c.logFormat))
}

// parseRun parses run's flags and checks them, the intervals as an
// elector would. It reports false, with the exit status, when run must
// not start.
func parseRun(args []string, stderr io.Writer) (runConfig, int, bool) {
	host, _ := os.Hostname()
	var c runConfig
	fs := newFlagSet("s3lect run", runUsage, stderr)
	c.sf.register(fs)
	fs.StringVar(&c.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's ID, unique in the group")
	fs.DurationVar(&c.grace, "grace", 10*time.Second, "on SIGTERM/SIGINT to s3lect: how long the command may drain before SIGKILL")
	fs.Var(&c.announce, "announce", "`auto|off|duration`: on SIGTERM/SIGINT to s3lect, how long the command keeps running while the release is announced, before it gets the signal (default auto: until the announced moment, at most InfrequentInterval + FrequentInterval, 35s at the defaults, at once in peer mode; off: forward the signal at once)")
	fs.DurationVar(&c.try, "try", 0, "give up (exit status 3) if not leader within this time; 0 waits for ever")
	fs.BoolVar(&c.once, "once", false, "exit (status 4) when leadership is lost instead of campaigning again")
	fs.BoolVar(&c.verbose, "v", false, "log the elector's events to stderr")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", time.Minute, "exit (status 6) if the store has not answered once within this time since start; 0 waits for ever")
	fs.DurationVar(&c.frequent, "frequent", 0, "FrequentInterval: renewal period (0: 5s)")
	fs.DurationVar(&c.infrequent, "infrequent", 0, "InfrequentInterval: a stable follower's check period (0: 30s)")
	fs.DurationVar(&c.timeout, "timeout", 0, "LeaderTimeout: silence after which a follower takes over (0: 15s)")
	fs.StringVar(&c.peerAddr, "peer-addr", "", "peer mode: host:port this instance serves its leadership on over HTTPS, and advertises; alone, with a self-signed certificate made at start whose key the lockfile pins (no CA, no files)")
	fs.StringVar(&c.peerCert, "peer-cert", "", "peer mode with a CA instead of a pin: PEM certificate for -peer-addr")
	fs.StringVar(&c.peerKey, "peer-key", "", "peer mode with a CA: PEM key for -peer-cert")
	fs.StringVar(&c.peerCA, "peer-ca", "", "peer mode with a CA: PEM CA that signed the other instances' certificates (default: system roots)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "host:port to serve Prometheus metrics on (/metrics) and a health check (/healthz), over plain HTTP; empty: none")
	fs.StringVar(&c.logFormat, "log-format", logText, "stderr's format: text (a line per event, stamped with the time) or json (one JSON object per line, for log collectors)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, exitOK, false
		}
		return c, exitUsage, false
	}
	c.command = fs.Args()
	if err := c.check(); err != nil {
		fmt.Fprintf(stderr, "s3lect run: %s\n", unprefixed(err.Error()))
		return c, exitUsage, false
	}
	return c, exitOK, true
}

// check finds what is wrong with c before anything is opened, so that a
// usage error is named as one even where the store cannot be reached (no
// credentials, no network).
func (c runConfig) check() error {
	switch {
	case len(c.command) == 0:
		return errors.New("no command given; usage: s3lect run -store s3://bucket/key -- command args...")
	case runSupported != nil:
		return runSupported
	case c.grace < 0 || c.try < 0 || c.connectTimeout < 0:
		return errors.New("-grace, -try and -connect-timeout must not be negative")
	case c.logFormat != logText && c.logFormat != logJSON:
		return fmt.Errorf("-log-format %q: want text or json", c.logFormat)
	case (c.peerCert != "" || c.peerKey != "" || c.peerCA != "") && (c.peerAddr == "" || c.peerCert == "" || c.peerKey == ""):
		return errors.New(peerFlagsErr)
	}
	// New checks the timings the same way on any store.
	_, err := s3lect.New(s3lect.ElectorConfig{Store: memstore.New(), LockfilePath: "timings", ServerID: c.id,
		FrequentInterval: c.frequent, InfrequentInterval: c.infrequent, LeaderTimeout: c.timeout})
	return err
}

// run runs c's command while this instance leads, logging to lg, and
// returns the exit status.
func run(c runConfig, lg *runLog) int {
	stderr := lg.writer(slog.LevelError)
	if err := findCommand(c.command[0], childPath()); err != nil {
		// Before campaigning: a leadership won for a command that cannot
		// start would spend a term and stop the group's job for nothing.
		lg.log(slog.LevelError, fmt.Sprintf("%v; nothing was started and the lockfile was not touched", err), "event", "exit", "status", exitNotStart)
		return exitNotStart
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	st, err := openInterruptible(c.sf, sigs, lg.writer(slog.LevelWarn))
	if err != nil {
		return reportErr(stderr, "s3lect run", err)
	}
	defer st.close()
	e, peer, err := c.elector(st, lg)
	if err != nil {
		return reportErr(stderr, "s3lect run", err)
	}
	defer e.Close()
	r := &runner{o: c, e: e, st: st.st, key: st.key, where: st.where, endpoint: c.sf.endpointName(st.where),
		command: c.command, sigs: sigs, log: lg, started: time.Now(), killAfter: cmp.Or(c.timeout, s3lect.DefaultLeaderTimeout) / 20}
	if peer.server != nil {
		stop, err := servePeer(c, e, st.key, peer)
		if err != nil {
			return reportErr(stderr, "s3lect run", err)
		}
		defer stop()
	}
	if c.metricsAddr != "" {
		stop, err := serveMetrics(c.metricsAddr, r, st.where)
		if err != nil {
			return reportErr(stderr, "s3lect run", err)
		}
		defer stop()
	}
	code := r.loop()
	if lg.json != nil {
		// A collector sees how the run ended; a person reads it in the
		// line before.
		lg.log(slog.LevelInfo, fmt.Sprintf("exiting with status %d", code), "event", "exit", "status", code)
	}
	return code
}

// openInterruptible opens the store; a signal while it waits (opening a
// NATS store may wait for its server) ends the wait.
func openInterruptible(sf storeFlags, sigs <-chan os.Signal, stderr io.Writer) (*opened, error) {
	base, stop := context.WithCancel(context.Background())
	defer stop()
	opening := make(chan struct{})
	defer close(opening)
	go func() {
		select {
		case <-sigs:
			stop()
		case <-opening:
		}
	}()
	return sf.open(base, stderr)
}

// peerFlagsErr says how the peer flags go together.
const peerFlagsErr = "peer mode with a CA needs -peer-addr, -peer-cert and -peer-key together; for peer mode without certificates, give -peer-addr alone"

// peerTLS is peer mode's TLS: the server's, and the client's the elector
// asks the leader with (nil in pinned mode: the record's pin decides).
type peerTLS struct{ server, client *tls.Config }

// elector builds the elector of c on st, and in peer mode the TLS
// configurations.
func (c runConfig) elector(st *opened, lg *runLog) (*s3lect.Elector, peerTLS, error) {
	cfg := s3lect.ElectorConfig{
		Store: st.st, LockfilePath: st.key, ServerID: c.id,
		FrequentInterval: c.frequent, InfrequentInterval: c.infrequent, LeaderTimeout: c.timeout,
		Logger: slog.New(slog.DiscardHandler),
	}
	if c.verbose {
		cfg.Logger = slog.New(lg.handler())
	}
	var peer peerTLS
	pinned := c.peerAddr != "" && c.peerCert == "" && c.peerKey == "" && c.peerCA == ""
	if pinned {
		// Pinned peer mode: New makes a self-signed certificate, and the
		// records carry its key's pin (protocol.md, section 5).
		cfg.PeerMode, cfg.ServerAddr, cfg.PeerPinned = true, c.peerAddr, true
	} else if c.peerAddr != "" || c.peerCert != "" || c.peerKey != "" || c.peerCA != "" {
		var err error
		if peer.server, err = c.peerConfig(&cfg); err != nil {
			return nil, peer, err
		}
		peer.client = cfg.PeerTLS
	}
	e, err := s3lect.New(cfg)
	if err != nil {
		return nil, peer, usageErr("%v", err)
	}
	if pinned {
		peer.server = e.PeerServerTLS()
	}
	return e, peer, nil
}

// servePeer serves e's leadership on c's -peer-addr over TLS, with the
// group's member list (members.go), and announces this runner to the
// leader, until stop is called.
func servePeer(c runConfig, e *s3lect.Elector, key string, peer peerTLS) (stop func(), err error) {
	ln, err := net.Listen("tcp", c.peerAddr)
	if err != nil {
		return nil, usageErr("-peer-addr: %v", err)
	}
	m := newMembers(c.id, key, cmp.Or(c.frequent, s3lect.DefaultFrequentInterval), e)
	mux := http.NewServeMux()
	mux.Handle(membersPath, m)
	mux.Handle("/", s3lect.PeerHandler(e))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s3lect.ServePeers(ctx, ln, mux, peer.server) }()
	clients := &peerClients{base: &http.Client{Transport: &http.Transport{TLSClientConfig: peer.client}}}
	announced := make(chan struct{})
	go func() { defer close(announced); m.announce(ctx, clients) }()
	return func() { cancel(); <-served; <-announced; clients.closeIdle() }, nil
}

// peerConfig fills cfg's peer-mode fields from the flags and returns the
// server's TLS configuration.
func (c runConfig) peerConfig(cfg *s3lect.ElectorConfig) (*tls.Config, error) {
	if c.peerAddr == "" || c.peerCert == "" || c.peerKey == "" {
		return nil, usageErr(peerFlagsErr)
	}
	cert, err := tls.LoadX509KeyPair(c.peerCert, c.peerKey)
	if err != nil {
		return nil, usageErr("-peer-cert/-peer-key: %v", err)
	}
	client := &tls.Config{Certificates: []tls.Certificate{cert}}
	if c.peerCA != "" {
		pem, err := os.ReadFile(c.peerCA)
		if err != nil {
			return nil, usageErr("-peer-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErr("-peer-ca %s holds no PEM certificate", c.peerCA)
		}
		client.RootCAs = pool
	}
	cfg.PeerMode, cfg.ServerAddr, cfg.PeerTLS = true, c.peerAddr, client
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// childPath is the PATH run's command gets (childEnv): this binary's
// directory last.
func childPath() string {
	path := os.Getenv("PATH")
	if exe, err := os.Executable(); err == nil {
		path = withDir(path, filepath.Dir(exe))
	}
	return path
}

// findCommand checks that name can be started as run will start it: a
// name with a slash must be an executable file; any other is looked up
// in path, as the shell and exec.LookPath do.
func findCommand(name, path string) error {
	executable := func(file string) error {
		fi, err := os.Stat(file)
		switch {
		case err != nil:
			return err
		case fi.IsDir():
			return fmt.Errorf("%s is a directory", file)
		case fi.Mode()&0o111 == 0:
			return fmt.Errorf("%s is not executable (chmod +x?)", file)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return fmt.Errorf("cannot start %s: %w", name, err)
		}
		return nil
	}
	for _, dir := range filepath.SplitList(path) {
		if executable(filepath.Join(cmp.Or(dir, "."), name)) == nil {
			return nil
		}
	}
	return fmt.Errorf("cannot start %s: not found in PATH (%s)", name, path)
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
