package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

const releaseUsage = `usage: s3lect release [flags]

Makes the group's leader step down, from anywhere, as destroying a consul
lock's session or deleting a Kubernetes Lease does, and without ever giving
two live leaders. It replaces the leader's record (If-Match on what it
read) with a record of a new leadership of the same leader that nobody
renews: same leaderID, term and ttl, lastUpdated now, held 0, a new lease.

  - The leader's next renewal (within -frequent) is refused: its
    leadership's context ends as on any loss, and s3lect run stops its
    command (SIGTERM, then SIGKILL) as it does then.
  - Every follower must watch the new record unchanged for a whole
    LeaderTimeout before it takes over, as if the leader had just renewed
    and then died; the leader's own lease ended before that. A follower of
    the original s3lect waits LeaderTimeout past lastUpdated, which is no
    earlier than the leader's last write.
  - Any member may win next, the old leader included.

Nothing is done when nobody leads (no lockfile, or a released one).

Exit statuses: 0 done, or nobody led; 1 unexpected failure; 2 bad usage;
5 the store refused for good (the message names the fix).

Flags:
`

// errNobodyLeads is stepDown's answer when there is no leader to release.
var errNobodyLeads = errors.New("nobody leads")

// stepDown replaces the live leader's record at key with a record of a
// new leadership of the same leader that is never renewed. It returns the
// record it replaced and the one it wrote. A leader that renews between
// the read and the write makes the write fail its If-Match; stepDown then
// reads again, a bounded number of times.
func stepDown(ctx context.Context, st store.Store, key string, now func() time.Time) (old, written s3lect.Record, err error) {
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
		lease, err := newLease()
		if err != nil {
			return old, written, err
		}
		// lastUpdated no earlier than the leader's last write, whatever this
		// machine's clock says: an original s3lect follower counts its
		// timeout from it.
		stamp := now().UTC()
		if !stamp.After(old.LastUpdated) {
			stamp = old.LastUpdated.Add(time.Microsecond)
		}
		// Everything else as the leader wrote it: its ID, address, term and
		// ttl (the lease followers must wait out, at least).
		written = old
		written.LastUpdated, written.Lease, written.Held = stamp, lease, 0
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

// newLease draws a lease value as the library does: 16 hex digits.
func newLease() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func releaseCmd(args []string, stdout, stderr io.Writer) int {
	var (
		sf storeFlags
		lt time.Duration
	)
	fs := flag.NewFlagSet("s3lect release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), releaseUsage)
		fs.PrintDefaults()
	}
	sf.register(fs)
	fs.DurationVar(&lt, "timeout", s3lect.DefaultLeaderTimeout, "the group's LeaderTimeout, to say when followers may take over")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, "s3lect release", err)
	}
	defer st.close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	old, _, err := stepDown(wctx, st.st, st.key, time.Now)
	switch {
	case errors.Is(err, errNobodyLeads):
		fmt.Fprintf(stdout, "%s: %v; nothing to release\n", st.where, err)
		return exitOK
	case err != nil:
		return reportErr(stderr, "s3lect release", err)
	}
	fmt.Fprintf(stdout, "%s: %s (term %d) steps down at its next renewal; followers take over %v after they read this write, not sooner\n",
		st.where, old.LeaderID, old.Term, lt)
	return exitOK
}
