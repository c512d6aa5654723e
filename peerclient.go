package s3lect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/s3lect/s3lect/internal/retry"
)

// maxPeerBody bounds a peer's answer; a lockfile record is far smaller.
const maxPeerBody = 4 << 10

// peerTarget is the leader the run loop wants the poller to ask. A target
// with an empty addr stops the poller. gen tells reports about an old
// target from current ones.
type peerTarget struct {
	gen   uint64
	id    string
	term  uint64
	lease string
	addr  string
	etag  string // the ETag the follower knows; the long-poll waits for another
	pin   string // pinned peer mode: the pin the leader's record carries
}

// peerReport is what the poller heard.
type peerReport struct {
	gen  uint64
	rec  Record
	etag string    // "" from a server that does not send one (the original s3lect)
	at   time.Time // local time (e.now) the answer arrived: the leader wrote etag before it
	err  error
}

// newPeerClient builds the followers' HTTP client from PeerTLS. It never
// follows redirects: a leader answers itself or not at all.
func newPeerClient(cfg ElectorConfig) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.PeerTLS != nil {
		tr.TLSClientConfig = cfg.PeerTLS.Clone()
	}
	if cfg.PeerPinned {
		// No chain to verify: askPeer checks the leader's key against
		// the pin its record carries, on every answer (peerpin.go).
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	tr.TLSHandshakeTimeout = cfg.PeerTimeout
	tr.MaxIdleConnsPerHost = 1
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// setPeerTarget hands the poller a new target, replacing one it has not
// taken yet. Only the run loop calls it.
func (e *Elector) setPeerTarget(t peerTarget) {
	select {
	case <-e.peerTargets:
	default:
	}
	e.peerTargets <- t
}

// pollPeers asks the leader the run loop names, over and over, and reports
// each answer to the run loop. With long-polling, each request waits at the
// leader until its next renewal, so the follower hears of every write, and
// of a resignation, as it happens; against a server that answers at once
// (the original s3lect) it asks once per InfrequentInterval. After a
// failure it waits for the run loop to name a target again.
func (e *Elector) pollPeers(ctx context.Context) error {
	var t peerTarget
	for {
		select { // the loop named another target: it replaces this one
		case t = <-e.peerTargets:
		default:
		}
		if t.addr == "" {
			select {
			case t = <-e.peerTargets:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		start := time.Now()
		var wait time.Duration
		if e.cfg.PeerWait > 0 && t.etag != "" {
			wait = e.cfg.PeerWait
		}
		rec, etag, err := e.askPeer(ctx, t, wait)
		if ctx.Err() != nil {
			return nil
		}
		// A target the loop named while the request was out replaces this
		// one, and the loop would drop the answer about it (its gen is
		// stale): take it instead. Not as a case of the select below,
		// whose choice among ready cases is random: the answer would be
		// reported, or the target taken, by chance, and a simulation's
		// seed would not replay.
		select {
		case t = <-e.peerTargets:
			continue
		default:
		}
		select {
		case e.peerReports <- peerReport{gen: t.gen, rec: rec, etag: etag, at: e.clock.Now(), err: err}:
		case <-ctx.Done():
			return nil
		}
		if err != nil {
			t = peerTarget{} // the run loop reads the store and decides
			continue
		}
		fresh := etag != "" && etag != t.etag
		if etag != "" {
			t.etag = etag
		}
		if wait > 0 && (fresh || time.Since(start) >= wait/2) {
			continue // long-polling: the wait itself paces the requests
		}
		// Without a long-poll, ask often enough that an answer (with an
		// ETag) comes before the follower's takeover clock runs out; a
		// server without ETags is asked once per InfrequentInterval.
		pace := e.cfg.InfrequentInterval
		if etag != "" {
			pace = min(pace, e.cfg.LeaderTimeout/2)
		}
		pause := time.NewTimer(time.Until(start.Add(pace)))
		select {
		case <-pause.C:
		case t = <-e.peerTargets:
		case <-ctx.Done():
			pause.Stop()
			return nil
		}
		pause.Stop()
	}
}

// askPeer asks the leader at t.addr for its record, waiting up to wait for
// an ETag other than t.etag. It accepts only a 200 whose record names
// t.id and t.term; anything else is an error, and only failures to get an
// answer at all are retried.
func (e *Elector) askPeer(ctx context.Context, t peerTarget, wait time.Duration) (Record, string, error) {
	q := url.Values{"lockfile": {e.key}}
	if wait > 0 {
		q.Set("etag", t.etag)
		q.Set("wait", wait.String())
	}
	u := (&url.URL{Scheme: "https", Host: t.addr, Path: e.cfg.PeerHealthPath, RawQuery: q.Encode()}).String()
	type answer struct {
		rec  Record
		etag string
	}
	refuse := func(format string, args ...any) (answer, error) {
		return answer{}, retry.Final(fmt.Errorf(format, args...))
	}
	a, err := retry.Do(ctx, wait+e.cfg.PeerTimeout, func(ctx context.Context, _ int) (answer, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return refuse("%w", err)
		}
		resp, err := e.peerClient.Do(req)
		if err != nil {
			if wait > 0 && errors.Is(err, context.DeadlineExceeded) {
				return refuse("no answer within %v: %w", wait+e.cfg.PeerTimeout, err) // a stalled leader: retrying only delays the fallback
			}
			return answer{}, err
		}
		defer resp.Body.Close()
		if e.cfg.PeerPinned {
			if err := checkPin(resp, t.pin); err != nil {
				return refuse("%w", err)
			}
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerBody+1))
		switch {
		case err != nil && wait > 0 && errors.Is(err, context.DeadlineExceeded):
			return refuse("answer not finished within %v: %w", wait+e.cfg.PeerTimeout, err)
		case err != nil:
			return answer{}, err
		case resp.StatusCode != http.StatusOK:
			return refuse("answered %s", resp.Status)
		}
		rec, etag, err := decodePeerAnswer(body, t.id, t.term, t.lease)
		if err != nil {
			return refuse("%w", err)
		}
		return answer{rec, etag}, nil
	})
	e.stats.peerCall(err)
	if err != nil {
		return Record{}, "", fmt.Errorf("s3lect: peer %s: %w", t.addr, err)
	}
	return a.rec, a.etag, nil
}

// decodePeerAnswer checks a peer's 200 answer: at most maxPeerBody bytes,
// a valid record, naming the leader id with the term (and the lease, when
// the follower knows one), not released. It returns the record and the
// ETag the answer carries ("" if none).
func decodePeerAnswer(body []byte, id string, term uint64, lease string) (Record, string, error) {
	if len(body) > maxPeerBody {
		return Record{}, "", fmt.Errorf("answer is larger than %d bytes", maxPeerBody)
	}
	w, err := parseWire(body)
	switch {
	case err != nil:
		return Record{}, "", fmt.Errorf("bad answer: %w", err)
	case *w.LeaderID != id || w.Term != term:
		return Record{}, "", fmt.Errorf("answered for %q term %d; expected %q term %d", *w.LeaderID, w.Term, id, term)
	case lease != "" && w.Lease != lease:
		return Record{}, "", fmt.Errorf("answered for lease %q; expected %q", w.Lease, lease)
	case w.LastUpdated.IsZero():
		return Record{}, "", errors.New("answered with a released record")
	}
	return w.record(), w.ETag, nil
}
