package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// The step-down request of s3lect release (docs/moves.md, section
// 11.3): writing it over the leader's record, asking the leader to renew
// at once, and following the lockfile to see what became of it.

// errNobodyLeads is requestStepDown's answer when there is no leader to
// release.
var errNobodyLeads = errors.New("nobody leads")

// errNoLockfile is requestStepDown's answer when there is no lockfile at
// all: nobody leads there, and the key may be mistyped.
var errNoLockfile = fmt.Errorf("%w: no lockfile", errNobodyLeads)

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
	return requestStepDownChecked(ctx, st, key, to, false, nil)
}

// requestStepDownChecked is requestStepDown that calls before, if not
// nil, with the leader's record once, before it writes anything: an
// error from before is returned, and nothing is written. With announce,
// a request over a storage-mode leader's record (no leaderAddr) asks for
// an announced release (docs/moves.md, 11.5): it carries releaseAt,
// the record's held time.
func requestStepDownChecked(ctx context.Context, st store.Store, key, to string, announce bool, before func(old s3lect.Record) error) (old, written s3lect.Record, err error) {
	checked := before == nil
	for range 10 {
		data, etag, err := st.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return old, written, errNoLockfile
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
		if !checked {
			if err := before(old); err != nil {
				return old, written, err
			}
			checked = true
		}
		written = old
		if written.StepDown, err = newRequestID(); err != nil {
			return old, written, err
		}
		written.To = to
		if announce && old.LeaderAddr == "" {
			written.ReleaseAt = max(old.Held, 1)
		}
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
	announced  bool          // the leader renewed over the request announcing its release (11.5)
	moment     time.Time     // then: the announced moment, by the leader's clock
	last       s3lect.Record // the last record read
	read       bool          // last is set
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
	renewed := time.Duration(0) // when the leadership last wrote, after begun: its lease runs from about then
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
		prev := o.last
		o.last, o.read = rec, true
		now := time.Since(begun)
		switch {
		case sameLeadership(rec, req) && rec.LastUpdated.IsZero():
			if !o.released {
				o.released, o.releasedAt = true, now
				report(o, "released")
			}
		case sameLeadership(rec, req) && rec.StepDown == "" && rec.ReleaseAt > 0 && req.ReleaseAt > 0 && rec.LastUpdated.After(req.LastUpdated):
			// The leader took the request in and announces its release
			// (docs/moves.md, 11.5): its job runs until the moment.
			if rec.LastUpdated.After(prev.LastUpdated) || !o.announced {
				renewed = now
			}
			if !o.announced {
				o.announced = true
				o.moment = rec.LastUpdated.Add(time.Duration(rec.ReleaseAt-rec.Held) * time.Millisecond)
				report(o, "announced")
			}
			if !o.lapsed && now-renewed > lease {
				o.lapsed = true
				report(o, "lapsed")
			}
		case sameLeadership(rec, req) && rec.StepDown == "" && rec.LastUpdated.After(req.LastUpdated):
			// A leader that renews whatever record names it (the original
			// s3lect) wrote over the request: it will not step down.
			o.ignored = true
			report(o, "ignored")
			return o
		case sameLeadership(rec, req):
			if !o.lapsed && now-renewed > lease {
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
