package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

const releaseUsage = `usage: s3lect release [flags]

Moves the group's leadership off its leader, from anywhere, without ever
giving two live leaders: before maintenance, or to stop a leader that
misbehaves without logging in to it. With -to ID it hands the leadership to
that member, like raft's leadership transfer.

It writes a step-down request over the leader's record (the record as the
leader wrote it, plus stepDown and -to's to; If-Match on what it read), and
asks the leader's peer endpoint, if it has one, to renew at once. The
leader's next renewal is refused: s3lect run stops its command (SIGTERM,
then SIGKILL), releases the lockfile, naming -to's member, and stays out of
the next election; a follower takes over at its next read (-to's member
only, for a while). release prints what happened:

  - stepped down: the leader released the lockfile, and who leads next;
  - did not answer within its lease (a leader of an older version, one
    that is gone, or a program that never ends its leadership): followers
    take over once its lease has run out, as after a crash.

Nothing is done when nobody leads (no lockfile, or a released one).

Exit statuses: 0 done, or nobody led; 1 unexpected failure; 2 bad usage;
5 the store refused for good (the message names the fix); 6 the store did
not answer.

Flags:
`

// errNobodyLeads is requestStepDown's answer when there is no leader to
// release.
var errNobodyLeads = errors.New("nobody leads")

// requestStepDown writes an operator's step-down request over the live
// leader's record at key: the record as the leader wrote it, with stepDown
// set to a new random value and to naming the member to hand over to ("":
// anyone). It returns the record it replaced and the one it wrote. A
// leader that renews between the read and the write makes the write fail
// its If-Match; requestStepDown then reads again, a bounded number of
// times. The leader's next renewal is refused, and a leader of this
// version then finds its own leadership with the request
// (docs/protocol.md, section 11); every other reader sees the same
// leadership as before, and waits out its lease as it would have.
func requestStepDown(ctx context.Context, st store.Store, key, to string) (old, written s3lect.Record, err error) {
	for range 10 {
		data, etag, err := st.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return old, written, fmt.Errorf("%w: no lockfile", errNobodyLeads)
		case err != nil:
			return old, written, err
		}
		old, err = s3lect.ParseRecord(data)
		if err != nil {
			return old, written, fmt.Errorf("the lockfile is not a record s3lect can read (%w); followers take it over after LeaderTimeout by themselves", err)
		}
		if old.LastUpdated.IsZero() {
			return old, written, fmt.Errorf("%w: %s released the lockfile", errNobodyLeads, old.LeaderID)
		}
		if to == old.LeaderID {
			return old, written, usageErr("-to %s names the leader itself; name another member", to)
		}
		written = old
		if written.StepDown, err = newRequestID(); err != nil {
			return old, written, err
		}
		written.To = to
		b, err := json.Marshal(written)
		if err != nil {
			return old, written, err
		}
		_, err = st.PutIfMatch(ctx, key, b, etag)
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue // the leader renewed meanwhile, or another leader won: look again
		}
		return old, written, err
	}
	return old, written, fmt.Errorf("the lockfile changed under every one of 10 attempts; try again")
}

// newRequestID draws a step-down request's value: 16 hex digits.
func newRequestID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// outcome is what became of a step-down request.
type outcome struct {
	released   bool          // the leader released the lockfile
	releasedAt time.Duration // after the request was written
	next       s3lect.Record // the next leader, if one was seen
	nextAt     time.Duration // after the request was written
	lapsed     bool          // the lease ran out before the leader released
	ignored    bool          // the leader renewed over the request: it does not know step-down requests
}

// sameLeadership reports whether a and b are records of one leadership.
func sameLeadership(a, b s3lect.Record) bool {
	return a.LeaderID == b.LeaderID && a.Term == b.Term && a.Lease == b.Lease
}

// follow reads the lockfile every poll after the request req was written
// at begun, until another leadership holds it or wait has passed since
// begun; lease is how long the leader's lease may last. It reports each
// step on report as it sees it.
func follow(ctx context.Context, st store.Store, key string, req s3lect.Record, begun time.Time, lease, wait, poll time.Duration, report func(outcome, string)) outcome {
	var o outcome
	t := time.NewTicker(poll)
	defer t.Stop()
	for time.Since(begun) < wait {
		select {
		case <-ctx.Done():
			return o
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, poll*10)
		rec, found, err := readLockfile(rctx, st, key)
		cancel()
		if err != nil || !found {
			continue
		}
		now := time.Since(begun)
		switch {
		case sameLeadership(rec, req) && rec.LastUpdated.IsZero():
			if !o.released {
				o.released, o.releasedAt = true, now
				report(o, "released")
			}
		case sameLeadership(rec, req) && rec.StepDown == "" && rec.LastUpdated.After(req.LastUpdated):
			// A leader that renews whatever record names it (the original
			// s3lect) wrote over the request: it will not step down.
			o.ignored = true
			report(o, "ignored")
			return o
		case sameLeadership(rec, req):
			if !o.lapsed && now > lease {
				o.lapsed = true
				report(o, "lapsed")
			}
		case !rec.LastUpdated.IsZero():
			o.next, o.nextAt = rec, now
			return o
		}
	}
	return o
}

// nudge asks the leader's peer endpoint to renew at once, so that it
// sees the request now rather than at its next renewal. It is best
// effort: a leader without a peer endpoint, or one that cannot be
// reached, sees the request at its next renewal anyway.
func nudge(ctx context.Context, client *http.Client, rec s3lect.Record, key, path string) error {
	if rec.LeaderAddr == "" {
		return errors.New("the leader advertises no peer address")
	}
	q := url.Values{"lockfile": {key}, "stepDown": {rec.StepDown}}
	u := url.URL{Scheme: "https", Host: rec.LeaderAddr, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// peerClient builds the HTTPS client for the nudge from the peer flags.
func peerClient(ca, cert, key string) (*http.Client, error) {
	cfg := &tls.Config{}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usageErr("-peer-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErr("-peer-ca %s holds no PEM certificate", ca)
		}
		cfg.RootCAs = pool
	}
	if cert != "" || key != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, usageErr("-peer-cert/-peer-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

func releaseCmd(args []string, stdout, stderr io.Writer) int {
	var (
		sf                        storeFlags
		to                        string
		lt, wait                  time.Duration
		peerCA, peerCert, peerKey string
	)
	fs := flag.NewFlagSet("s3lect release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), releaseUsage)
		fs.PrintDefaults()
	}
	sf.register(fs)
	fs.StringVar(&to, "to", "", "hand the leadership to the member with this ID (its -id); others wait a while first")
	fs.DurationVar(&lt, "timeout", s3lect.DefaultLeaderTimeout, "the group's LeaderTimeout, for a record that does not state its lease")
	fs.DurationVar(&wait, "wait", time.Minute, "how long to wait for the next leader, to print who it is (0: do not wait)")
	fs.StringVar(&peerCA, "peer-ca", "", "peer mode: PEM CA that signed the leader's certificate, to ask it to renew at once (default: system roots)")
	fs.StringVar(&peerCert, "peer-cert", "", "peer mode: PEM client certificate, for a leader that requires mutual TLS")
	fs.StringVar(&peerKey, "peer-key", "", "peer mode: PEM key for -peer-cert")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	if lt <= 0 || wait < 0 {
		fmt.Fprintln(stderr, "s3lect release: -timeout must be positive and -wait not negative")
		return exitUsage
	}
	client, err := peerClient(peerCA, peerCert, peerKey)
	if err != nil {
		return reportErr(stderr, "s3lect release", err)
	}
	defer client.CloseIdleConnections()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, "s3lect release", err)
	}
	defer st.close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	begun := time.Now()
	old, req, err := requestStepDown(wctx, st.st, st.key, to)
	switch {
	case errors.Is(err, errNobodyLeads):
		fmt.Fprintf(stdout, "%s: %v; nothing to release\n", st.where, err)
		return exitOK
	case err != nil:
		return reportNoAnswer(stderr, "s3lect release", sf.endpointName(st.where), err)
	}
	handTo := "the next member to read it"
	if to != "" {
		handTo = to
	}
	fmt.Fprintf(stdout, "%s: asked %s (term %d) to step down and hand over to %s\n", st.where, old.LeaderID, old.Term, handTo)
	lease := lt
	if old.TTL > 0 {
		lease = time.Duration(old.TTL) * time.Millisecond
	}
	if to != "" {
		// Said at once: a mistyped ID leaves the job stopped for the
		// whole window, and the outcome comes only at its end.
		fmt.Fprintf(stdout, "  only %s may take over at first; the others wait the transfer window (the lease, %v, or their read interval if longer, plus a FrequentInterval): "+
			"if no member runs with -id %s, nobody runs the job until then\n", to, lease, to)
	}
	if err := nudge(wctx, client, req, st.key, "/health/leadership"); err != nil && req.LeaderAddr != "" {
		fmt.Fprintf(stdout, "  its peer endpoint was not reached (%v)%s: it sees the request at its next renewal\n", err, tlsHint(err))
	}
	if wait == 0 {
		return exitOK
	}
	o := follow(ctx, st.st, st.key, req, begun, lease, max(wait, lease+lease/10+time.Second), 50*time.Millisecond, func(o outcome, what string) {
		switch what {
		case "released":
			fmt.Fprintf(stdout, "  %s stepped down: it released the lockfile %v after the request\n", old.LeaderID, o.releasedAt.Round(time.Millisecond))
		case "ignored":
			fmt.Fprintf(stdout, "  %s renewed over the request: it does not know step-down requests (the original s3lect?) and keeps leading; "+
				"stop its s3lect run with SIGTERM instead, which drains and hands over\n", old.LeaderID)
		case "lapsed":
			fmt.Fprintf(stdout, "  %s did not answer within its lease (%v): an older version, a leader that is gone, or a program that never ends its leadership; "+
				"followers take over now that its lease has run out\n", old.LeaderID, lease)
		}
	})
	if o.next.LeaderID != "" && !o.released && !o.lapsed {
		// Between two reads: nobody takes over a live lease, so the leader
		// released it.
		fmt.Fprintf(stdout, "  %s stepped down: it released the lockfile within %v of the request\n", old.LeaderID, o.nextAt.Round(time.Millisecond))
	}
	switch {
	case o.next.LeaderID != "":
		fmt.Fprintf(stdout, "  %s leads (term %d), %v after the request\n", o.next.LeaderID, o.next.Term, o.nextAt.Round(time.Millisecond))
		if to != "" && o.next.LeaderID != to {
			fmt.Fprintf(stdout, "  %s did not take over in its window (is it running, with -id %s?); another member did\n", to, to)
		}
	case o.ignored:
	case ctx.Err() == nil:
		fmt.Fprintf(stdout, "  no other member led within %v of the request\n", max(wait, lease+lease/10+time.Second))
	}
	return exitOK
}

// tlsHint names the flag that fixes a peer endpoint whose certificate
// this command could not verify.
func tlsHint(err error) string {
	var (
		unknown x509.UnknownAuthorityError
		verify  *tls.CertificateVerificationError
	)
	if errors.As(err, &unknown) || errors.As(err, &verify) {
		return " (pass -peer-ca with the CA that signed the leader's certificate)"
	}
	return ""
}
