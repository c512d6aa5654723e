package pool

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Peer mode (docs/pool-protocol.md, "Peer mode"): instead of listing the
// session objects every FrequentInterval, each worker asks one worker,
// the hub (the live one with the lowest ID that serves PeerHandler), for
// the session writes the others reported to it lately, and reports its
// own. The hub holds each request until every worker it counts live has
// reported, or a short wait runs out, so that every worker learns of every
// renewal at about the moment a listing would have shown it. An answer
// that names every worker this worker counts live stands in for the
// listing; anything less (a death, a join, a hub down, stalled or
// unknown) and the tick lists the store. The store is listed every
// InfrequentInterval all the same, and every interval for four leases
// once a listing contradicts what the hub said. A peer's answer is a
// hint of the same kind as a listing: an ETag it names ages a sighting
// from the answer's arrival only once a fresh read returns that ETag.

// PeerPath is the HTTP path at which PeerHandler answers.
const PeerPath = "/s3lect/pool"

const (
	// peerIIFactor is InfrequentInterval in FrequentIntervals when
	// PeerMode leaves it zero: the election's default ratio (30 s / 5 s).
	peerIIFactor = 6
	// maxDigest bounds a hub's answer: about 10,000 workers.
	maxDigest = 1 << 20
	// maxReports bounds the reports a hub keeps (a client that makes up
	// worker IDs must not grow it without end).
	maxReports = 10000
	// maxStrangers bounds the reports a hub takes from workers it neither
	// counts live nor finds in the member list (a joiner, before the hub
	// has read the list that names it): anyone who reaches PeerHandler can
	// report, and must not crowd the members out.
	maxStrangers = 64
)

// digest is a hub's answer: the session writes reported to it this round
// or, for a worker late for it, the round before (recent).
type digest struct {
	Pool     int                    `json:"s3lectPoolPeer"` // formatVersion
	Prefix   string                 `json:"prefix"`
	Worker   string                 `json:"worker"`  // the hub
	Members  string                 `json:"members"` // the member list's ETag as the hub last read it
	Sessions map[string]peerSession `json:"sessions"`
}

// peerSession is a worker's last session write as it reported it: the
// ETag, and the content's SHA-256 (its first 16 bytes, in hex), so that a
// read ages from the digest only when it returns those very bytes.
type peerSession struct {
	ETag string `json:"etag"`
	Sum  string `json:"sum"`
}

// peerSum is how a digest names a write's content.
func peerSum(sum [32]byte) string { return hex.EncodeToString(sum[:16]) }

// report is a worker's session write as a hub heard it, and when.
type report struct {
	peerSession
	at time.Time
}

// hub is what a worker in peer mode knows as a hub: the others' reports,
// its own session's ETag, the member list's, and whom its last tick
// counted live. It holds hints, not the protocol's state: nothing in it
// decides a claim. The heartbeat (own), the loop (expect, takeMembers)
// and PeerHandler's requests share it under mu.
type hub struct {
	p *Pool

	mu      sync.Mutex
	running bool
	reports map[string]report
	mine    peerSession     // this worker's last session write (ETag "" while it has no session)
	members string          // the member list's ETag as this worker last read it
	expect  []string        // the other workers its last tick counted live
	known   map[string]bool // those and the member list's workers: reports from others are strangers
	// otherMembers: a worker reported another member list than members
	// (one joined or left): the next tick reads it.
	otherMembers bool
	changed      chan struct{} // closed and replaced at every report
	stopped      chan struct{} // closed when Run ends
}

func newHub(p *Pool) *hub {
	return &hub{p: p, reports: map[string]report{}, known: map[string]bool{}, changed: make(chan struct{}), stopped: make(chan struct{})}
}

// open marks the pool running: PeerHandler answers.
func (h *hub) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running = true
}

// close marks the pool stopped: waiting requests get 503.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		h.running = false
		close(h.stopped)
	}
}

// own takes in this worker's session write (its ETag and bytes) after it
// landed (etag "" once it has no live session). Heartbeat only; nil-safe.
func (h *hub) own(etag string, data []byte) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mine = peerSession{}
	if etag != "" {
		h.mine = peerSession{ETag: etag, Sum: peerSum(sha256.Sum256(data))}
	}
	h.signal()
}

func (h *hub) ownSession() peerSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mine
}

// expectLive takes in, at every tick, the workers the tick counted live,
// the member list's and its ETag as this worker knows them. Reports older
// than two leases are dropped.
func (h *hub) expectLive(live, members []string, tag string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expect = h.expect[:0]
	clear(h.known)
	for _, id := range live {
		if id != h.p.cfg.ID {
			h.expect = append(h.expect, id)
		}
		h.known[id] = true
	}
	for _, id := range members {
		h.known[id] = true
	}
	h.members = tag
	for w, r := range h.reports {
		if now.Sub(r.at) > 2*h.p.lt {
			delete(h.reports, w)
		}
	}
	h.signal()
}

// takeMembers reports, once, that a worker reported another member list.
func (h *hub) takeMembers() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.otherMembers
	h.otherMembers = false
	return o
}

// signal wakes the requests waiting for reports. mu held.
func (h *hub) signal() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// fresh reports whether r was heard this round: within half an interval.
func (h *hub) fresh(r report, now time.Time) bool {
	return r.ETag != "" && now.Sub(r.at) < h.p.fi/2
}

// recent reports whether r was heard this round or the one before (within
// an interval and a quarter): a worker whose tick comes later than the
// others' (a slow store, a clock apart) is named by its last report rather
// than left out, which would send every other worker to the store. Its
// ETag then shows its renewal a round late: its death is found a round
// later, never sooner.
func (h *hub) recent(r report, now time.Time) bool {
	return r.ETag != "" && now.Sub(r.at) < h.p.fi+h.p.fi/4
}

// complete reports whether every worker the last tick counted live, and
// that reported the round before, has reported this round. mu held. (A
// worker that missed a round is not waited for: a dead one would hold
// every answer up for the whole wait, the look that takes its shards
// over included.)
func (h *hub) complete(now time.Time) bool {
	for _, id := range h.expect {
		if r := h.reports[id]; !h.fresh(r, now) && now.Sub(r.at) < 3*h.p.fi/2 {
			return false
		}
	}
	return true
}

// collect waits until every worker the hub counts live has reported this
// round, or wait has passed, or ctx or Run ends, and returns the digest.
func (h *hub) collect(ctx context.Context, wait time.Duration) (digest, error) {
	p := h.p
	deadline := p.now().Add(wait)
	h.mu.Lock()
	for !h.complete(p.now()) && p.now().Before(deadline) {
		ch, stopped := h.changed, h.stopped
		h.mu.Unlock()
		t := time.NewTimer(max(p.realUntil(deadline), 0))
		select {
		case <-ch:
		case <-t.C:
		case <-stopped:
		case <-ctx.Done():
		}
		t.Stop()
		h.mu.Lock()
		if !h.running || ctx.Err() != nil {
			h.mu.Unlock()
			return digest{}, errors.New("the pool stopped")
		}
	}
	defer h.mu.Unlock()
	now := p.now()
	d := digest{Pool: formatVersion, Prefix: p.cfg.Prefix, Worker: p.cfg.ID, Members: h.members, Sessions: make(map[string]peerSession, len(h.reports)+1)}
	for w, r := range h.reports {
		if h.recent(r, now) && !mutPeerThisRound || mutPeerThisRound && h.fresh(r, now) {
			d.Sessions[w] = r.peerSession
		}
	}
	if h.mine.ETag != "" {
		d.Sessions[p.cfg.ID] = h.mine
	}
	return d, nil
}

// PeerHandler serves the peer mode of the given pools (Config.PeerMode)
// at PeerPath, each under its Prefix: mount it on this worker's HTTPS
// server at Config.ServerAddr. A GET names the pool (prefix), the asking
// worker (worker), its session's last write (etag, and sum: the first 16
// bytes of its SHA-256 in hex), the member list's ETag as it knows it
// (members), and how long the answer may wait (wait, at most half the
// pool's FrequentInterval). The answer, JSON, is the session writes the
// workers reported this round (a late worker's of the round before), once
// every worker this one counts live has reported or the wait is over;
// 503 while the
// pool is not running. Pools without PeerMode are not served; two pools
// with one Prefix cannot be told apart, and PeerHandler panics. Any client
// that reaches it can report: serve it with client certificates
// (tls.RequireAndVerifyClientCert) where the network is not the pool's
// own.
func PeerHandler(pools ...*Pool) http.Handler {
	byPrefix := map[string]*Pool{}
	for _, p := range pools {
		if p != nil && p.hub != nil {
			if byPrefix[p.cfg.Prefix] != nil {
				panic(fmt.Sprintf("pool: PeerHandler given two pools with Prefix %q; serve them from two handlers (two servers)", p.cfg.Prefix))
			}
			byPrefix[p.cfg.Prefix] = p
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PeerPath {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "only GET is served here", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		p := byPrefix[q.Get("prefix")]
		if p == nil {
			http.Error(w, fmt.Sprintf("no pool in peer mode with prefix %q is served here", q.Get("prefix")), http.StatusNotFound)
			return
		}
		p.hub.serve(w, r, q)
	})
}

// serve answers one worker's request.
func (h *hub) serve(w http.ResponseWriter, r *http.Request, q url.Values) {
	p := h.p
	worker, etag, sum, members := q.Get("worker"), q.Get("etag"), q.Get("sum"), q.Get("members")
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		var err error
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 || wait > p.fi/2 {
			http.Error(w, fmt.Sprintf("wait %q must be a duration from 0 to %v (half the pool's FrequentInterval)", s, p.fi/2), http.StatusBadRequest)
			return
		}
	}
	switch {
	case worker == "" || len(worker) > maxKeyLen || !utf8.ValidString(worker) || strings.ContainsAny(worker, "/\x00"):
		http.Error(w, "worker must name the asking worker: its ID, UTF-8, without slashes", http.StatusBadRequest)
		return
	case worker == p.cfg.ID:
		http.Error(w, fmt.Sprintf("worker %q is this worker's own ID: two workers were given one ID, or a worker asks itself", worker), http.StatusConflict)
		return
	case len(etag) > maxKeyLen || len(members) > maxKeyLen:
		http.Error(w, "etag and members must be ETags, at most 1,024 bytes", http.StatusBadRequest)
		return
	case etag != "" && !validSum(sum):
		http.Error(w, "sum must name the reported write's content: 32 hex digits, the first 16 bytes of its SHA-256", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	switch {
	case !h.running:
		h.mu.Unlock()
		http.Error(w, "this worker's pool is not running", http.StatusServiceUnavailable)
		return
	case etag != "" && h.admits(worker):
		h.reports[worker] = report{peerSession{ETag: etag, Sum: sum}, p.now()}
		h.signal()
	}
	if members != "" && members != h.members {
		h.otherMembers = true
	}
	h.mu.Unlock()
	d, err := h.collect(r.Context(), wait)
	if err != nil {
		http.Error(w, "this worker's pool stopped", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(encode(d))
}

// admits reports whether the hub takes a report from worker: one it
// counts live or finds in the member list, one it has a report of, or a
// stranger while it keeps fewer than maxStrangers. mu held.
func (h *hub) admits(worker string) bool {
	if h.known[worker] || h.reports[worker].ETag != "" {
		return len(h.reports) < maxReports || h.reports[worker].ETag != ""
	}
	strangers := 0
	for w := range h.reports {
		if !h.known[w] {
			strangers++
		}
	}
	return strangers < maxStrangers
}

// validSum reports whether s is a peerSum.
func validSum(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// newPeerClient returns the client of a worker's requests to the hub.
func newPeerClient(cfg *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg != nil {
		tr.TLSClientConfig = cfg.Clone()
	}
	tr.MaxIdleConnsPerHost = 2
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// ask sends this worker's report to the hub at addr and returns its
// digest. The request may wait wait at the hub, and a FrequentInterval
// eighth more for the network; an answer that is not the hub's digest
// for this pool is an error.
func (p *Pool) ask(ctx context.Context, hubID, addr string, own peerSession, members string, wait time.Duration) (digest, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+p.fi/8)
	defer cancel()
	q := url.Values{"prefix": {p.cfg.Prefix}, "worker": {p.cfg.ID}, "etag": {own.ETag}, "sum": {own.Sum}, "members": {members}, "wait": {wait.String()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+PeerPath+"?"+q.Encode(), nil)
	if err != nil {
		return digest{}, fmt.Errorf("ask %s at %q: %w", hubID, addr, err)
	}
	resp, err := p.peerClient.Do(req)
	if err != nil {
		return digest{}, fmt.Errorf("ask %s: %w", hubID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDigest+1))
	switch {
	case err != nil:
		return digest{}, fmt.Errorf("ask %s: read the answer: %w", hubID, err)
	case resp.StatusCode != http.StatusOK:
		line, _, _ := strings.Cut(string(body), "\n")
		return digest{}, fmt.Errorf("ask %s: %s: %.200q", hubID, resp.Status, line)
	case len(body) > maxDigest:
		return digest{}, fmt.Errorf("ask %s: the answer is longer than %d bytes", hubID, maxDigest)
	}
	var d digest
	if err := json.Unmarshal(body, &d); err != nil {
		return digest{}, fmt.Errorf("ask %s: the answer is not a pool digest: %w", hubID, err)
	}
	if d.Pool != formatVersion || d.Prefix != p.cfg.Prefix || d.Worker != hubID {
		return digest{}, fmt.Errorf("ask %s at %q: the answer is another's (mark %d, prefix %q, worker %q): is another process at that address?", hubID, addr, d.Pool, d.Prefix, d.Worker)
	}
	return d, nil
}

// addr is what this worker writes as its session record's Addr.
func (p *Pool) addr() string {
	if p.hub == nil {
		return ""
	}
	return p.cfg.ServerAddr
}
