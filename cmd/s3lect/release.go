package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/s3lect/s3lect"
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
only, for a while).

In storage mode the request asks for an announced release (unless -now):
the leader renews over it, announcing its release, and its command runs
on until the announced moment, when every follower reads often (within
InfrequentInterval + FrequentInterval of the request, 35s at the
defaults); then it is stopped and released, and the job's outage is its
drain plus about FrequentInterval/16. With -now the command stops at
the leader's next renewal, and a stable follower finds the release at its
next read, up to an InfrequentInterval later. In peer mode followers hear
the release as it is written: nothing is announced. release prints what
happened:

  - announced: the leader announced its release, and when;

  - stepped down: the leader released the lockfile, and who leads next;
  - did not answer within its lease (a leader of an older version, one
    that is gone, or a program that never ends its leadership): followers
    take over once its lease has run out, as after a crash.

Nothing is done when nobody leads (a released lockfile); no lockfile at all
is an error (a mistyped -store key?). release waits -wait at most, exactly.

With -to in peer mode, release first asks the leader which members have
said their ID to it, and refuses an ID that is not among them (status 2;
nothing is written). In storage mode nobody can know: it says so before
it acts.

Exit statuses: 0 done (another member leads; -to's member with -to), or
nobody led (a released lockfile); 1 unexpected failure; 2 bad usage (or
-to names a member the leader has not heard from, in peer mode);
5 the store refused for good (the message names the fix); 6 the store did
not answer; 8 no lockfile at -store's key; 10 the leadership did not move as
asked within -wait: the member asked to step down leads again, another
member than -to's took over, or nobody was seen taking over yet.

Flags:
`

// releaseConfig is release's command line, parsed.
type releaseConfig struct {
	sf                        storeFlags
	to                        string
	now                       bool
	timeout, wait             time.Duration
	peerCA, peerCert, peerKey string
}

// parseRelease parses release's flags. It reports false, with the exit
// status, when release must not run.
func parseRelease(args []string, stderr io.Writer) (releaseConfig, int, bool) {
	var c releaseConfig
	fs := newFlagSet("s3lect release", releaseUsage, stderr)
	c.sf.register(fs)
	fs.StringVar(&c.to, "to", "", "hand the leadership to the member with this ID (its -id); others wait a while first")
	fs.BoolVar(&c.now, "now", false, "storage mode: stop the leader's job at its next renewal, without announcing the release first (the followers then find it at their next read, up to an InfrequentInterval later)")
	fs.DurationVar(&c.timeout, "timeout", s3lect.DefaultLeaderTimeout, "the group's LeaderTimeout, for a record that does not state its lease")
	fs.DurationVar(&c.wait, "wait", time.Minute, "how long to wait for the next leader, to print who it is; at the end, what is known is printed and the status is 10 if no other member was seen leading (0: do not wait)")
	fs.StringVar(&c.peerCA, "peer-ca", "", "peer mode with a CA: PEM CA that signed the leader's certificate, to ask it to renew at once (default: system roots; not needed when the lockfile pins the leader's certificate, as run -peer-addr alone does)")
	fs.StringVar(&c.peerCert, "peer-cert", "", "peer mode: PEM client certificate, for a leader that requires mutual TLS")
	fs.StringVar(&c.peerKey, "peer-key", "", "peer mode: PEM key for -peer-cert")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return c, code, false
	}
	if c.timeout <= 0 || c.wait < 0 {
		fmt.Fprintln(stderr, "s3lect release: -timeout must be positive and -wait not negative")
		return c, exitUsage, false
	}
	return c, exitOK, true
}

// release asks the leader to step down, then follows the lockfile for
// -wait and says where the leadership went.
func release(ctx context.Context, c releaseConfig, stdout, stderr io.Writer) int {
	client, err := peerClient(c.peerCA, c.peerCert, c.peerKey)
	if err != nil {
		return reportErr(stderr, "s3lect release", err)
	}
	clients := &peerClients{base: client, timeout: client.Timeout}
	defer clients.closeIdle()
	st, err := c.sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, "s3lect release", err)
	}
	defer st.close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	begun := time.Now()
	old, req, err := requestStepDownChecked(wctx, st.st, st.key, c.to, !c.now, func(old s3lect.Record) error {
		return checkTarget(wctx, clients.forRecord(old), st.key, c.to, old, c.leaseOf(old), stdout)
	})
	switch {
	case errors.Is(err, errNoLockfile):
		fmt.Fprintf(stderr, "s3lect release: no lockfile at %s: nobody leads there. Is the key right? "+
			"s3lect status -store %s shows what is there, or list the bucket's keys; every runner of the group uses the same -store.\n", st.where, st.where)
		return exitAbsent
	case errors.Is(err, errNobodyLeads):
		fmt.Fprintf(stdout, "%s: %v; nothing to release\n", st.where, err)
		return exitOK
	case err != nil:
		return reportNoAnswer(stderr, "s3lect release", c.sf.endpointName(st.where), err)
	}
	fmt.Fprintf(stdout, "%s: asked %s (term %d) to step down and hand over to %s\n", st.where, old.LeaderID, old.Term, cmp.Or(c.to, "the next member to read it"))
	if req.ReleaseAt > 0 {
		fmt.Fprintf(stdout, "  storage mode: asked for an announced release; its job runs until the announced moment (within InfrequentInterval + FrequentInterval, 35s at the defaults), when the followers read often, then stops (-now: at its next renewal)\n")
	}
	if err := nudge(wctx, clients.forRecord(req), req, st.key, "/health/leadership"); err != nil && req.LeaderAddr != "" {
		fmt.Fprintf(stdout, "  its peer endpoint was not reached (%v)%s: it sees the request at its next renewal\n", err, tlsHint(err))
	}
	if c.wait == 0 {
		return exitOK
	}
	o := follow(ctx, st.st, st.key, req, begun, c.leaseOf(old), c.wait, 50*time.Millisecond, func(o outcome, what string) {
		reportStep(stdout, old, c.leaseOf(old), o, what)
	})
	return reportMove(stdout, old, c.to, c.wait, o, ctx.Err() != nil)
}

// leaseOf is how long old's lease lasts: as the record states it, or the
// group's -timeout.
func (c releaseConfig) leaseOf(old s3lect.Record) time.Duration {
	if old.TTL > 0 {
		return time.Duration(old.TTL) * time.Millisecond
	}
	return c.timeout
}

// reportStep prints a step follow saw.
func reportStep(stdout io.Writer, old s3lect.Record, lease time.Duration, o outcome, what string) {
	switch what {
	case "announced":
		fmt.Fprintf(stdout, "  %s announced its release for %s (in %v): its job runs until then\n", old.LeaderID,
			o.moment.UTC().Format("15:04:05.000"), time.Until(o.moment).Round(100*time.Millisecond))
	case "released":
		fmt.Fprintf(stdout, "  %s stepped down: it released the lockfile %v after the request\n", old.LeaderID, o.releasedAt.Round(time.Millisecond))
	case "ignored":
		fmt.Fprintf(stdout, "  %s renewed over the request: it does not know step-down requests (the original s3lect?) and keeps leading; "+
			"stop its s3lect run with SIGTERM instead, which drains and hands over\n", old.LeaderID)
	case "lapsed":
		fmt.Fprintf(stdout, "  %s did not answer within its lease (%v): an older version, a leader that is gone, or a program that never ends its leadership; "+
			"followers take over now that its lease has run out\n", old.LeaderID, lease)
	}
}

// checkTarget runs before the request is written, with -to's member: in
// peer mode it asks the leading runner which members it has heard from,
// and refuses (a usage error, nothing written) a member that is not
// among them; where the members cannot be known (storage mode, a leader
// that does not answer the question) it says plainly, before acting,
// what a member that runs nowhere costs.
func checkTarget(ctx context.Context, client *http.Client, key, to string, old s3lect.Record, lease time.Duration, stdout io.Writer) error {
	if to == "" {
		return nil
	}
	why := "storage mode: the members cannot be known"
	if old.LeaderAddr != "" {
		l, err := fetchMembers(ctx, client, old.LeaderAddr, key, "")
		switch {
		case err == nil && l.Leader == old.LeaderID && l.Complete && !slices.Contains(l.Members, to):
			return usageErr("-to %s: no member with that -id runs on this lockfile: the leader %s has heard from %s in the last three FrequentIntervals "+
				"(peer mode: every runner says its ID to the leader); nothing was written. Start it first, or name one of them",
				to, old.LeaderID, strings.Join(l.Members, ", "))
		case err == nil && l.Leader == old.LeaderID && l.Complete:
			return nil // a live member
		case err == nil && l.Leader != old.LeaderID:
			why = "the runner at the leader's address no longer leads"
		case err == nil:
			why = "the leader has not led long enough to know every member"
		default:
			why = fmt.Sprintf("the leader's member list could not be read: %v%s", err, tlsHint(err))
		}
	}
	fmt.Fprintf(stdout, "before asking: -to %s cannot be checked (%s). Only %s may take over at first; the others wait the transfer window "+
		"(the lease, %v, or their read interval if longer, plus a FrequentInterval): if no member runs with -id %s, nobody runs the job until then\n",
		to, why, to, lease, to)
	return nil
}

// reportMove prints where the leadership went after the request over old
// (to: -to's member, or ""), as follow saw it within wait, and returns the
// exit status: exitOK when another member leads (to's member, with -to),
// exitNotMoved when the old leader leads again, another than to's member
// took over, or nobody was seen taking over within wait.
func reportMove(stdout io.Writer, old s3lect.Record, to string, wait time.Duration, o outcome, interrupted bool) int {
	next := o.next
	if next.LeaderID != "" && !o.released && !o.lapsed {
		// Between two reads: nobody takes over a live lease, so the leader
		// released it.
		fmt.Fprintf(stdout, "  %s stepped down: it released the lockfile within %v of the request\n", old.LeaderID, o.nextAt.Round(time.Millisecond))
	}
	switch {
	case next.LeaderID == old.LeaderID:
		fmt.Fprintf(stdout, "  %s leads (term %d), %v after the request: the job is back on %s, the member you asked to step down", next.LeaderID, next.Term, o.nextAt.Round(time.Millisecond), old.LeaderID)
		if to != "" {
			fmt.Fprintf(stdout, "; %s did not take over in its window (is it running, with -id %s, on this lockfile?)\n", to, to)
		} else {
			fmt.Fprintf(stdout, "; no other member took over (is another s3lect run started on this lockfile?)\n")
		}
		return exitNotMoved
	case next.LeaderID != "":
		fmt.Fprintf(stdout, "  %s leads (term %d), %v after the request\n", next.LeaderID, next.Term, o.nextAt.Round(time.Millisecond))
		if to != "" && next.LeaderID != to {
			fmt.Fprintf(stdout, "  %s did not take over in its window (is it running, with -id %s?); %s took over instead\n", to, to, next.LeaderID)
			return exitNotMoved
		}
		return exitOK
	case o.ignored:
		return exitNotMoved
	case interrupted:
		return exitNotMoved
	}
	state := "nobody leads yet"
	switch {
	case !o.read:
		state = "the lockfile could not be read"
	case sameLeadership(o.last, old) && !o.last.LastUpdated.IsZero() && o.announced && !o.lapsed:
		state = fmt.Sprintf("%s announced its release for %s and leads until then", old.LeaderID, o.moment.UTC().Format("15:04:05.000"))
	case sameLeadership(o.last, old) && !o.last.LastUpdated.IsZero():
		state = fmt.Sprintf("%s still holds the lockfile (the request is pending, or its lease has not run out)", old.LeaderID)
	case o.last.LastUpdated.IsZero():
		state = fmt.Sprintf("nobody leads yet (%s released the lockfile)", o.last.LeaderID)
	}
	fmt.Fprintf(stdout, "  no other member seen leading within -wait %v: %s; s3lect status or watch shows the rest\n", wait, state)
	return exitNotMoved
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
