package pool

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool/internal/coord"
)

// PeerPath was the path of the old pool's peer endpoint.
//
// Deprecated: the coordinator-decided pool serves the workers' reports
// and its coordinator election's peer endpoint at paths of its own;
// PeerHandler routes both.
const PeerPath = "/s3lect/pool"

// PeerHandler serves the peer mode of the given pools (Config.PeerMode):
// the workers' reports to their coordinator and the coordinator
// election's peer endpoint, each pool by its Prefix. Mount it on this
// worker's HTTPS server at Config.ServerAddr (s3lect.ServePeers; with
// Config.PeerPinned, serve it with the pool's PeerServerTLS). Pools
// without PeerMode are not served (a request for one is answered 404);
// two pools with one Prefix cannot be told apart, and PeerHandler panics.
// Serve one pool in peer mode per address: the election's requests name
// no pool, so beside a second one they are answered 404 and those
// workers read the store instead (storage mode's cost).
func PeerHandler(pools ...*Pool) http.Handler {
	byPrefix := map[string]*Pool{}
	for _, p := range pools {
		if p == nil || !p.cfg.PeerMode {
			continue
		}
		if byPrefix[p.cfg.Prefix] != nil {
			panic(fmt.Sprintf("pool: PeerHandler given two pools with Prefix %q; serve them from two handlers (two servers)", p.cfg.Prefix))
		}
		byPrefix[p.cfg.Prefix] = p
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, why := route(byPrefix, r)
		if p == nil {
			http.Error(w, why, http.StatusNotFound)
			return
		}
		p.servePeer(w, r)
	})
}

// route finds the pool a peer request is for: a report names its pool's
// Prefix (?prefix=), the election's requests its lockfile (?lockfile=,
// the Prefix followed by coordinator.json); a request that names neither
// goes to the only pool served, if there is one.
func route(byPrefix map[string]*Pool, r *http.Request) (*Pool, string) {
	q := r.URL.Query()
	switch {
	case q.Has("prefix"):
		if p := byPrefix[q.Get("prefix")]; p != nil {
			return p, ""
		}
		return nil, fmt.Sprintf("no pool in peer mode with prefix %q is served here", q.Get("prefix"))
	case q.Has("lockfile"):
		prefix, ok := strings.CutSuffix(q.Get("lockfile"), coordinatorKey)
		if p := byPrefix[prefix]; ok && p != nil {
			return p, ""
		}
		return nil, fmt.Sprintf("no pool in peer mode coordinates with lockfile %q here", q.Get("lockfile"))
	case len(byPrefix) == 1:
		for _, p := range byPrefix {
			return p, ""
		}
	}
	return nil, "no pool in peer mode is served here, or the request names none (?prefix= or ?lockfile=)"
}

// coordinatorKey is the coordinator election's lockfile, under the Prefix.
const coordinatorKey = "coordinator.json"

// Peer mode (docs/pool-protocol.md, 4.8): after each renewal a worker
// reports its objects' ETags to the coordinator over HTTPS, and reads its
// page only when the answer names another; anything that goes wrong with
// a report falls back to the page read.

// reportPath is where PeerHandler takes the workers' reports.
const reportPath = "/pool/report"

type report struct {
	ID      string `json:"id"`
	Session string `json:"session"`         // the ETag of its session object's last write
	News    string `json:"news"`            // the ETag of its news object ("" if none)
	Nonce   string `json:"nonce,omitempty"` // its session's last write's Nonce
	// Page is the ETag of the worker's page as it last read it; Wait, in
	// ms, how long the coordinator may hold its answer until the page is
	// another (a long poll: a grant reaches its taker at once, 4.8).
	Page string `json:"page,omitempty"`
	Wait int64  `json:"wait,omitempty"`
}

type reportAnswer struct {
	Term uint64 `json:"term"` // the coordinator's era
	Page string `json:"page"` // the ETag of the worker's page as the coordinator last wrote or read it
}

// reportReq is a report handed to the coordinator's loop.
type reportReq struct {
	r     report
	reply chan reportAnswer // buffered: the loop never waits on it
	until time.Time         // parked: answered once the page changed, or then
}

// errPageUnchanged is the page read a report made unnecessary.
var errPageUnchanged = errors.New("page unchanged, by the coordinator's answer")

// servePeer serves a worker's report, or a request of the coordinator's
// election (s3lect.PeerHandler). Until Run has started, and on a worker
// that does not coordinate, reports are answered 503.
func (p *Pool) servePeer(w http.ResponseWriter, r *http.Request) {
	h := p.electorHandler.Load()
	switch {
	case r.URL.Path == reportPath:
		p.serveReport(w, r)
	case h == nil:
		http.Error(w, "this worker's pool is not running", http.StatusServiceUnavailable)
	default:
		(*h).ServeHTTP(w, r)
	}
}

func (p *Pool) serveReport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Query().Get("prefix") != p.cfg.Prefix {
		http.Error(w, "POST a report with ?prefix= naming this pool's Prefix", http.StatusBadRequest)
		return
	}
	var rep report
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&rep); err != nil || checkID(p.cfg.Prefix, rep.ID) != nil {
		http.Error(w, "a report is JSON {id, session, news} with a valid worker ID", http.StatusBadRequest)
		return
	}
	ans, ok := p.toCoordinator(r.Context(), rep)
	if !ok {
		http.Error(w, "this worker does not coordinate the pool", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ans)
}

// toCoordinator hands rep to this process's coordinator, if it runs.
func (p *Pool) toCoordinator(ctx context.Context, rep report) (reportAnswer, bool) {
	if !p.coordinating.Load() {
		return reportAnswer{}, false
	}
	rq := reportReq{r: rep, reply: make(chan reportAnswer, 1)}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.FrequentInterval)
	defer cancel()
	select {
	case p.reports <- rq:
	case <-ctx.Done():
		return reportAnswer{}, false
	}
	select {
	case a := <-rq.reply:
		return a, a.Term != 0
	case <-ctx.Done():
		return reportAnswer{}, false
	}
}

// maxReportWait caps how long a report waits for its answer: below the
// write timeout of s3lect.ServePeers (a minute and ten seconds), which
// would otherwise cut every answer off at FrequentInterval above 93 s and
// leave peer mode reading every page.
const maxReportWait = 50 * time.Second

// reportWait is how long a worker's report waits for its answer while its
// page is unchanged: 3/4 FrequentInterval, at most maxReportWait.
func reportWait(fi time.Duration) time.Duration { return min(fi*3/4, maxReportWait) }

// answer is the era's side of a report. A report that may wait, whose
// page is as the worker last read it (or being written), is parked:
// answered once the page is another, or when its wait is over.
func (e *era) answer(rq reportReq) []coord.Effect {
	now, id := e.p.clock.Now(), rq.r.ID
	fx := e.c.Reported(now, id, coord.Entry{Session: rq.r.Session, News: rq.r.News, Nonce: rq.r.Nonce})
	ans := reportAnswer{Term: e.c.Term(), Page: e.c.PageTag(id)}
	if old, ok := e.parked[id]; ok {
		old.reply <- ans
		delete(e.parked, id)
	}
	if rq.r.Wait > 0 && (ans.Page == "" || ans.Page == rq.r.Page) {
		// A wait above the worker's own asks is a peer's lie: capped.
		rq.until = now.Add(min(time.Duration(rq.r.Wait)*time.Millisecond, reportWait(e.p.cfg.FrequentInterval)))
		e.parked[id] = rq
	} else {
		rq.reply <- ans
	}
	return fx
}

// flush answers the parked reports whose page changed or whose wait is
// over, and returns a channel that fires when the next wait is over (nil
// if none).
func (e *era) flush() <-chan time.Time {
	now := e.p.clock.Now()
	var next time.Time
	for id, rq := range e.parked {
		tag := e.c.PageTag(id)
		if tag != "" && tag != rq.r.Page || !now.Before(rq.until) {
			rq.reply <- reportAnswer{Term: e.c.Term(), Page: tag}
			delete(e.parked, id)
			continue
		}
		if next.IsZero() || rq.until.Before(next) {
			next = rq.until
		}
	}
	if next.IsZero() {
		return nil
	}
	if e.wake == nil {
		e.wake = time.NewTimer(0)
	}
	e.wake.Reset(max(e.p.clock.RealUntil(next), 0))
	return e.wake.C
}

// unpark ends the era's long polls unanswered: their workers read their
// pages.
func (e *era) unpark() {
	if e.wake != nil {
		e.wake.Stop()
	}
	for _, rq := range e.parked {
		rq.reply <- reportAnswer{}
	}
}

// sendReport reports this worker's objects to the coordinator that the
// election names, and returns the ETag its answer gives for this worker's
// page. ok is false when there is no answer to trust.
func (p *Pool) sendReport(ctx context.Context, rep report) (page string, ok bool) {
	rec, known := p.el.Leader()
	if !known {
		return "", false
	}
	if rec.LeaderID == p.cfg.ID && p.coordinating.Load() {
		a, ok := p.toCoordinator(ctx, rep)
		return a.Page, ok
	}
	if rec.LeaderAddr == "" {
		return "", false
	}
	body, _ := json.Marshal(rep)
	ctx, cancel := context.WithTimeout(ctx, p.cfg.FrequentInterval)
	defer cancel()
	u := fmt.Sprintf("https://%s%s?prefix=%s", rec.LeaderAddr, reportPath, url.QueryEscape(p.cfg.Prefix))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", false
	}
	req.Header.Set("Content-Type", "application/json")
	client := p.peerClient
	if p.cfg.PeerPinned {
		if rec.PeerPin == "" {
			return "", false // a coordinator that pins nothing: not one of a pinned pool
		}
		client = p.pinned.get(rec.PeerPin)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var a reportAnswer
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&a) != nil || a.Term != rec.Term {
		return "", false // not the coordinator the election names: read the page
	}
	return a.Page, true
}

// PeerServerTLS is the TLS configuration to serve PeerHandler with when
// Config.PeerPinned is set: the certificate the coordinator's election
// record pins. Nil without PeerPinned.
func (p *Pool) PeerServerTLS() *tls.Config {
	if !p.cfg.PeerPinned {
		return nil
	}
	return p.el.PeerServerTLS()
}

// pinnedClient is the client of the last pin a coordinator's record
// carried: it accepts only a server whose key has that pin.
type pinnedClient struct {
	mu     sync.Mutex
	pin    string
	client *http.Client
}

func (c *pinnedClient) get(pin string) *http.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pin != pin {
		if c.client != nil {
			c.client.CloseIdleConnections()
		}
		c.pin, c.client = pin, peerHTTPClient(s3lect.PinnedTLS(pin))
	}
	return c.client
}

func (c *pinnedClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
}

// peerHTTPClient is a client for the reports, with tc (nil: the system's
// roots), that does not follow redirects.
func peerHTTPClient(tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil {
		tr.TLSClientConfig = tc
	}
	tr.MaxIdleConnsPerHost = 2
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
