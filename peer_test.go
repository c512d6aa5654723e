package s3lect

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lect/s3lect/devtls"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// Real-time timings for peer tests over loopback HTTPS.
const (
	peerFI = 200 * time.Millisecond
	peerII = 600 * time.Millisecond
	peerLT = time.Second
)

// peerNode is an elector in peer mode serving its endpoint on loopback.
type peerNode struct {
	id      string
	fs      *faultStore // its store, which logs every call
	e       *Elector
	stop    context.CancelFunc
	stopped chan struct{}
}

// startPeerNode starts an elector in peer mode serving its endpoint on
// loopback: with a certificate authority, pki, or pinned (only an
// address, its own self-signed certificate) when pki is nil.
func startPeerNode(t *testing.T, mem store.Store, pki *devtls.PKI, id string) *peerNode {
	t.Helper()
	return startPeerNodeLeasing(t, mem, pki, id, peerLT)
}

// startPeerNodeLeasing is startPeerNode with a LeaderTimeout of lt.
func startPeerNodeLeasing(t *testing.T, mem store.Store, pki *devtls.PKI, id string, lt time.Duration) *peerNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := newFaultStore(mem)
	n := &peerNode{id: id, fs: fs, stopped: make(chan struct{})}
	cfg := ElectorConfig{
		Store: fs, LockfilePath: testKey, ServerID: id, ServerAddr: ln.Addr().String(),
		FrequentInterval: peerFI, InfrequentInterval: peerII, LeaderTimeout: lt,
		PeerMode: true, PeerTimeout: 500 * time.Millisecond, Logger: quietLogger,
	}
	if pki != nil {
		cfg.PeerTLS = pki.ClientTLS()
	} else {
		cfg.PeerPinned = true
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := e.PeerServerTLS()
	if pki != nil {
		serverTLS = pki.ServerTLS()
	}
	n.e = e
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go func() {
		defer close(n.stopped)
		if err := ServePeers(ctx, ln, PeerHandler(e), serverTLS); err != nil {
			t.Errorf("ServePeers(%s) = %v", id, err)
		}
	}()
	t.Cleanup(func() {
		e.Close()
		cancel()
		<-n.stopped
	})
	return n
}

type peerWin struct {
	n    *peerNode
	lead *Leadership
	at   time.Time
}

func waitPeerWin(t *testing.T, wins <-chan peerWin) peerWin {
	t.Helper()
	select {
	case w := <-wins:
		return w
	case <-time.After(30 * time.Second): // a liveness bound, not a speed limit
		t.Fatal("no leader within 30s")
		return peerWin{}
	}
}

func TestPeerModeOverHTTPS(t *testing.T) {
	t.Parallel() // real timers and servers of its own: beside the other peer tests
	pki := newTestPKI(t)
	mem := memstore.New()
	wins := make(chan peerWin, 16)
	var nodes []*peerNode
	for _, id := range []string{"a", "b", "c"} {
		n := startPeerNode(t, mem, pki, id)
		nodes = append(nodes, n)
		go func() { // campaigns again whenever its leadership ends
			for {
				l, err := n.e.Campaign(t.Context())
				if err != nil {
					return
				}
				wins <- peerWin{n, l, time.Now()}
				<-l.Context().Done()
			}
		}()
	}
	first := waitPeerWin(t, wins)

	// Stable: followers ask the leader, never the store. A window counts
	// only if it was a steady state: the leadership lasted through it (a
	// machine too loaded to renew within peerLT lets it lapse; the loaded
	// CI run ci10 saw one), and no follower's question to the leader
	// failed from a lease before it to its end (under load one times out,
	// and the follower reads the store, as it must: a loaded run saw 4
	// GETs). Up to five windows are tried.
	type calls struct{ gets, puts int }
	const window = 2 * time.Second
	failed := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, n := range nodes {
			for result, k := range n.e.Stats().PeerRequests {
				if result != "ok" {
					m[n.id] += k
				}
			}
		}
		return m
	}
	for try := 1; ; try++ {
		time.Sleep(3 * peerLT)
		failedBefore := failed()
		time.Sleep(peerLT)
		before := map[string]calls{}
		for _, n := range nodes {
			before[n.id] = calls{n.fs.count("get"), n.fs.count("put")}
		}
		begun := time.Now()
		time.Sleep(window)
		after := map[string]calls{}
		for _, n := range nodes {
			after[n.id] = calls{n.fs.count("get"), n.fs.count("put")}
		}
		took := time.Since(begun) // the window as it passed: on a loaded machine the sleep overruns
		if first.lead.Context().Err() != nil {
			if try == 5 {
				t.Fatalf("the leadership lapsed in each of %d windows: never a steady state", try)
			}
			t.Logf("window %d: %s's leadership lapsed (a loaded machine?); measuring the next leader", try, first.n.id)
			first = waitPeerWin(t, wins)
			continue
		}
		if f := failed(); !maps.Equal(f, failedBefore) {
			if try == 5 {
				t.Fatalf("a follower's peer request failed in each of %d windows: never a steady state", try)
			}
			t.Logf("window %d: peer requests failed (%v before, %v after; a loaded machine?); measuring another window", try, failedBefore, f)
			continue
		}
		for _, n := range nodes {
			gets, puts := after[n.id].gets-before[n.id].gets, after[n.id].puts-before[n.id].puts
			t.Logf("%s in %v of stable state: %d GET, %d PUT", n.id, window, gets, puts)
			if n == first.n {
				// At most one PUT per FrequentInterval, and at least one:
				// fewer than the pace is a loaded machine's doing (a
				// renewal waits for a CPU; a loaded run at load average 19
				// made 7 of 10), and the leadership lasting the window
				// says they came within the lease.
				if max := int(took/peerFI) + 2; gets != 0 || puts == 0 || puts > max {
					t.Errorf("leader made %d GET and %d PUT; want 0 GET and 1 to %d PUT (one per FrequentInterval)", gets, puts, max)
				}
			} else if gets != 0 || puts != 0 {
				t.Errorf("stable follower %s made %d GET and %d PUT; want none", n.id, gets, puts)
			}
		}
		break
	}

	// Resign: the long-poll answers once the release is written; a
	// follower reads the vacant lease and takes it.
	if err := first.lead.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := waitPeerWin(t, wins)
	// Terms rise; two followers racing may each raise the term object, so
	// the winner's may be more than one higher (docs/protocol.md, 1.1).
	if second.lead.Term() <= first.lead.Term() {
		t.Errorf("term after resign = %d; want more than %d", second.lead.Term(), first.lead.Term())
	}

	// Crash: the leader's endpoint goes away and its store calls hang.
	time.Sleep(4 * peerLT)
	var secondEnded atomic.Pointer[time.Time]
	context.AfterFunc(second.lead.Context(), func() { now := time.Now(); secondEnded.Store(&now) })
	second.n.fs.set(func(f *faultStore) { f.blackhole = true })
	second.n.stop()
	third := waitPeerWin(t, wins)
	if third.lead.Term() <= second.lead.Term() {
		t.Errorf("term after crash = %d; want more than %d", third.lead.Term(), second.lead.Term())
	}
	if ended := secondEnded.Load(); ended == nil || !ended.Before(third.at) {
		t.Errorf("crashed leader's context ended at %v; want before the takeover at %v", ended, third.at)
	}
}

// fakeLeader keeps a lockfile renewed in the store, naming a peer address
// that some test server answers at.
func fakeLeader(t *testing.T, mem store.Store, id string, term uint64, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	first := make(chan struct{}) // the lockfile is written: a peer can answer from it
	go func() {
		defer close(done)
		etag := ""
		for ctx.Err() == nil {
			rec := Record{LeaderID: id, LeaderAddr: addr, LastUpdated: time.Now().UTC(), Term: term}
			tag, err := mem.PutIfMatch(ctx, testKey, rec.encode(), etag)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("fake leader: %v", err)
				}
				return
			}
			if etag == "" {
				close(first)
			}
			etag = tag
			select {
			case <-time.After(peerFI):
			case <-ctx.Done():
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-first:
	case <-done: // the first write failed, and said so
	}
}

func TestPeerFailuresFallBackToStorage(t *testing.T) {
	t.Parallel() // real timers and servers of its own: beside the other peer tests
	pki := newTestPKI(t)
	good := func(id string, term uint64) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(peerRecord{Record: Record{LeaderID: id, LastUpdated: time.Now(), Term: term}, ETag: `"e"`})
		}
	}
	cases := []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request)
		tls     *tls.Config // server TLS; nil: the test CA's
		refused bool        // nothing listens
		honest  bool        // answers with the lockfile's current record and ETag, as a live leader does
		wantOK  bool
	}{
		{name: "Honest", honest: true, wantOK: true},
		{name: "WrongLeader", handler: good("someone-else", 5)},
		{name: "OlderTerm", handler: good("L", 4)},
		{name: "BadJSON", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"leaderID":`) }},
		{name: "HugeBody", handler: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"leaderID":"L","term":5,"pad":"%s"}`, strings.Repeat("x", 1<<20))
		}},
		{name: "EndlessBody", handler: func(w http.ResponseWriter, r *http.Request) {
			for r.Context().Err() == nil {
				if _, err := io.WriteString(w, strings.Repeat(" ", 1024)); err != nil {
					return
				}
			}
		}},
		{name: "Slow", handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{name: "ServerError", handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }},
		{name: "NotLeader", handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 503) }},
		{name: "Released", handler: func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(peerRecord{Record: Record{LeaderID: "L", Term: 5}})
		}},
		{name: "Redirect", handler: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "https://example.invalid/", 302) }},
		{name: "UntrustedCertificate", handler: good("L", 5), tls: newTestPKI(t).ServerTLS()},
		{name: "ConnectionRefused", refused: true},
	}
	// All followers run at once and are observed over one window, so that
	// the cases cost one wait between them.
	type running struct {
		fs       *faultStore
		f        *Elector
		askErr   error
		baseline int
		failed   uint64 // its failed peer requests at the baseline
	}
	failedAsks := func(e *Elector) uint64 {
		var n uint64
		for result, k := range e.Stats().PeerRequests {
			if result != "ok" {
				n += k
			}
		}
		return n
	}
	runs := make([]*running, len(cases))
	for i, tc := range cases {
		var addr string
		mem := memstore.New()
		if tc.honest {
			tc.handler = func(w http.ResponseWriter, r *http.Request) {
				data, etag, err := mem.Get(r.Context(), testKey)
				if err != nil {
					http.Error(w, err.Error(), 503)
					return
				}
				rec, _ := ParseRecord(data)
				json.NewEncoder(w).Encode(peerRecord{Record: rec, ETag: etag})
			}
		}
		if tc.refused {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = ln.Addr().String()
			ln.Close()
		} else {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(tc.handler))
			srv.TLS = tc.tls
			if srv.TLS == nil {
				srv.TLS = pki.ServerTLS()
			}
			srv.StartTLS()
			t.Cleanup(srv.Close)
			addr = srv.Listener.Addr().String()
		}
		fakeLeader(t, mem, "L", 5, addr)
		r := &running{fs: newFaultStore(mem)}
		f, err := New(ElectorConfig{Store: r.fs, LockfilePath: testKey, ServerID: "f", ServerAddr: "127.0.0.1:1",
			FrequentInterval: peerFI, InfrequentInterval: peerII, LeaderTimeout: peerLT,
			PeerMode: true, PeerTLS: pki.ClientTLS(), PeerTimeout: 300 * time.Millisecond, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		r.f = f
		// The client alone must accept or refuse the answer.
		_, _, r.askErr = f.askPeer(t.Context(), peerTarget{id: "L", term: 5, addr: addr}, 0)
		f.Changes() // start following
		runs[i] = r
	}
	time.Sleep(2 * peerLT) // long enough for an honest peer to take over from the store
	for _, r := range runs {
		r.baseline, r.failed = r.fs.count("get"), failedAsks(r.f)
	}
	time.Sleep(2 * peerLT)
	for i, tc := range cases {
		r := runs[i]
		t.Run(tc.name, func(t *testing.T) {
			if (r.askErr == nil) != tc.wantOK {
				t.Errorf("askPeer() = %v; want ok %v", r.askErr, tc.wantOK)
			}
			// A refused peer sends the follower back to the store, again
			// and again; an honest one keeps it off the store.
			// (Unless a question to the honest peer failed: under load
			// one can time out, and the follower then reads the store,
			// as it must.)
			reads := r.fs.count("get") - r.baseline
			if failed := failedAsks(r.f) - r.failed; tc.wantOK && reads != 0 && failed == 0 {
				t.Errorf("follower of an honest peer read the store %d times; want 0", reads)
			} else if tc.wantOK && failed != 0 {
				t.Logf("%d questions to the honest peer failed (a loaded machine?): %d store reads not checked", failed, reads)
			}
			if !tc.wantOK && reads == 0 {
				t.Errorf("follower of a bad peer never went back to the store")
			}
			if rec, ok := r.f.Leader(); ok && (rec.LeaderID != "L" || rec.Term != 5) {
				t.Errorf("follower believes %+v; want the lockfile's leader L term 5", rec)
			}
		})
	}
}

func TestPeerWireCompatibility(t *testing.T) {
	t.Parallel() // real timers and servers of its own: beside the other peer tests
	pki := newTestPKI(t)
	t.Run("OriginalClientReadsOurEndpoint", func(t *testing.T) {
		e := newTestElector(t, ElectorConfig{Store: memstore.New(), LockfilePath: testKey, ServerID: "ours", ServerAddr: "10.0.0.1:8443", Logger: quietLogger})
		srv := httptest.NewServer(PeerHandler(e))
		defer srv.Close()
		get := func() (int, map[string]any) {
			resp, err := http.Get(srv.URL + defaultPeerHealthPath) // a plain GET, as the original does
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			json.NewDecoder(resp.Body).Decode(&m)
			return resp.StatusCode, m
		}
		if code, _ := get(); code != http.StatusServiceUnavailable {
			t.Errorf("before leading: status %d; want 503", code)
		}
		lead, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		code, m := get()
		if code != 200 || m["leaderID"] != "ours" || m["leaderAddr"] != "10.0.0.1:8443" || m["lastUpdated"] == nil {
			t.Errorf("while leading: %d %v; want 200 with leaderID, leaderAddr, lastUpdated", code, m)
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["lastUpdated"])); err != nil {
			t.Errorf("lastUpdated %v is not RFC 3339: %v", m["lastUpdated"], err)
		}
		lead.Resign(t.Context())
		if code, _ := get(); code != http.StatusServiceUnavailable {
			t.Errorf("after resigning: status %d; want 503", code)
		}
		srv.CloseClientConnections()
		http.DefaultClient.CloseIdleConnections()
	})
	t.Run("OurClientReadsOriginalEndpoint", func(t *testing.T) {
		var requests atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1) // the original ignores query parameters and answers at once, without term or etag
			fmt.Fprintf(w, `{"leaderID":"old","leaderAddr":"%s","lastUpdated":"%s"}`, r.Host, time.Now().UTC().Format(time.RFC3339))
		}))
		srv.TLS = pki.ServerTLS()
		srv.StartTLS()
		defer srv.Close()
		addr := srv.Listener.Addr().String()
		mem := memstore.New()
		// The original's lockfile: no term.
		etag := mem.Set(testKey, fmt.Appendf(nil, `{"leaderID":"old","leaderAddr":"%s","lastUpdated":"%s"}`, addr, time.Now().UTC().Format(time.RFC3339Nano)))
		stop := make(chan struct{})
		renewed := make(chan struct{})
		go func() { // the original leader renews its lockfile
			defer close(renewed)
			for {
				select {
				case <-stop:
					return
				case <-time.After(peerFI):
				}
				tag, err := mem.PutIfMatch(context.Background(), testKey, fmt.Appendf(nil, `{"leaderID":"old","leaderAddr":"%s","lastUpdated":"%s"}`, addr, time.Now().UTC().Format(time.RFC3339Nano)), etag)
				if err != nil {
					return
				}
				etag = tag
			}
		}()
		defer func() { close(stop); <-renewed }()
		e, err := New(ElectorConfig{Store: mem, LockfilePath: testKey, ServerID: "f", ServerAddr: "127.0.0.1:1",
			FrequentInterval: peerFI, InfrequentInterval: peerII, LeaderTimeout: peerLT,
			PeerMode: true, PeerTLS: pki.ClientTLS(), Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rec, tag, err := e.askPeer(t.Context(), peerTarget{id: "old", term: 0, addr: addr}, 0)
		if err != nil || rec.LeaderID != "old" || rec.Term != 0 || tag != "" {
			t.Fatalf("askPeer(original) = %+v, %q, %v; want old, term 0, no etag", rec, tag, err)
		}
		e.Changes()
		time.Sleep(3 * peerLT)
		// The pace is reckoned over the window as it passed: on a loaded
		// machine the sleep overruns (a loaded run counted 8 requests
		// against a bound of 7 reckoned from the 3s asked).
		n0, begun := requests.Load(), time.Now()
		time.Sleep(3 * time.Second)
		n, window := requests.Load()-n0, time.Since(begun)
		if max := int64(window/peerII) + 2; n == 0 || n > max {
			t.Errorf("%d peer requests in %v to a server that does not long-poll; want 1 to %d (one per InfrequentInterval)", n, window.Round(time.Millisecond), max)
		}
		if got, ok := e.Leader(); !ok || got.LeaderID != "old" {
			t.Errorf("Leader() = %+v, %v; want old", got, ok)
		}
	})
}

func TestPeerHandlerRoutesByLockfile(t *testing.T) {
	mem := memstore.New()
	mk := func(key string) *Elector {
		e := newTestElector(t, ElectorConfig{Store: mem, LockfilePath: key, ServerID: "w", Logger: quietLogger})
		if _, err := e.Campaign(t.Context()); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e1, e2 := mk("shards/1.json"), mk("shards/2.json")
	one, two := PeerHandler(e1), PeerHandler(e1, e2)
	cases := []struct {
		name     string
		h        http.Handler
		target   string
		wantCode int
		wantIn   string
	}{
		// The original s3lect's followers send no lockfile parameter.
		{"OneElectorPlainPath", one, "/health/leadership", 200, `"term":1`},
		{"OneElectorNamed", one, "/health/leadership?lockfile=shards/1.json", 200, `"term":1`},
		{"OneElectorOtherLockfile", one, "/health/leadership?lockfile=shards/2.json", 404, "lockfile"},
		{"WrongPath", one, "/other", 404, ""},
		{"BadWait", one, "/health/leadership?wait=soon", 400, "wait"},
		{"Routed", two, "/health/leadership?lockfile=shards/2.json", 200, `"term":1`},
		{"AmbiguousPlainPath", two, "/health/leadership", 400, "lockfile"},
		{"UnknownLockfile", two, "/health/leadership?lockfile=shards/9.json", 404, "lockfile"},
		{"NoElectors", PeerHandler(), "/health/leadership", 404, ""},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, httptest.NewRequest("GET", tc.target, nil))
		if code, body := rec.Code, rec.Body.String(); code != tc.wantCode || !strings.Contains(body, tc.wantIn) {
			t.Errorf("%s: GET %s = %d %q; want %d containing %q", tc.name, tc.target, code, body, tc.wantCode, tc.wantIn)
		}
	}
}

// leadAlone makes an elector on st with the peer tests' timings and
// elects it; it closes when the test ends.
func leadAlone(t *testing.T, st store.Store) (*Elector, *Leadership) {
	t.Helper()
	return electAlone(t, ElectorConfig{Store: st, LockfilePath: testKey, ServerID: "w",
		FrequentInterval: peerFI, InfrequentInterval: peerII, LeaderTimeout: peerLT, Logger: quietLogger})
}

// electAlone makes an elector of cfg, closed when the test ends, and
// elects it.
func electAlone(t *testing.T, cfg ElectorConfig) (*Elector, *Leadership) {
	t.Helper()
	e := newTestElector(t, cfg)
	lead, err := e.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return e, lead
}

func TestPeerLongPoll(t *testing.T) {
	e, lead := leadAlone(t, memstore.New())
	srv := httptest.NewServer(PeerHandler(e))
	defer srv.Close()
	defer srv.CloseClientConnections()
	_, etag := lastWrite(lead)
	get := func(query string) (int, peerRecord, time.Duration) {
		start := time.Now()
		resp, err := srv.Client().Get(srv.URL + defaultPeerHealthPath + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p peerRecord
		json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p, time.Since(start)
	}
	code, p, _ := get("?etag=" + etag + "&wait=10s")
	if code != 200 || p.ETag == etag || p.ETag == "" {
		t.Errorf("long-poll on the current etag = %d %+v; want 200 with the next renewal's etag", code, p)
	}
	// The end of the leadership answers a waiting long-poll with 503, after
	// the release is written.
	var wg sync.WaitGroup
	wg.Add(1)
	var endCode int
	go func() {
		defer wg.Done()
		_, cur := lastWrite(lead)
		endCode, _, _ = get("?etag=" + cur + "&wait=10s")
	}()
	time.Sleep(peerFI / 4)
	lead.Resign(t.Context())
	wg.Wait()
	if endCode != http.StatusServiceUnavailable {
		t.Errorf("long-poll across a resignation = %d; want 503", endCode)
	}
	data, _, _ := e.cfg.Store.Get(t.Context(), testKey)
	if rec, _ := ParseRecord(data); !rec.LastUpdated.IsZero() {
		t.Errorf("lockfile when the long-poll answered: %+v; want released", rec)
	}
}

func TestServePeers(t *testing.T) {
	pki := newTestPKI(t)
	t.Run("NoCertificate", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		if err := ServePeers(t.Context(), ln, http.NotFoundHandler(), &tls.Config{}); err == nil {
			t.Error("ServePeers without a certificate = nil; want an error")
		}
	})
	t.Run("MutualTLSAndShutdown", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := pki.ServerTLS()
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pki.Pool
		entered := make(chan struct{}, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-r.Context().Done() // a long-poll that only shutdown ends
		})
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- ServePeers(ctx, ln, h, cfg) }()
		url := "https://" + ln.Addr().String() + "/"

		anon := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientTLS()}}
		if _, err := anon.Get(url); err == nil {
			t.Error("a client without a certificate was served; want the handshake refused")
		}
		anon.CloseIdleConnections()
		old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{pki.Client}, MaxVersion: tls.VersionTLS11}}}
		if _, err := old.Get(url); err == nil {
			t.Error("a TLS 1.1 client was served; want it refused")
		}
		old.CloseIdleConnections()

		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{pki.Client}}}
		defer tr.CloseIdleConnections()
		got := make(chan error, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Get(url)
			if err == nil {
				resp.Body.Close()
			}
			got <- err
		}()
		<-entered
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServePeers() after shutdown = %v; want nil", err)
		}
		<-got // the waiting request ended with the server
	})
	// A long-poll waiting at a leader whose server shuts down is answered
	// 503, never an empty 200.
	t.Run("ShutdownAnswers503", func(t *testing.T) {
		e, _ := slowLeader(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		entered := make(chan struct{}, 1)
		h := PeerHandler(e)
		go func() {
			served <- ServePeers(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				h.ServeHTTP(w, r)
			}), pki.ServerTLS())
		}()
		tr := &http.Transport{TLSClientConfig: pki.ClientTLS()}
		defer tr.CloseIdleConnections()
		_, etag := lastWrite(e.snap.Load().lead)
		got := make(chan int, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + defaultPeerHealthPath + "?etag=" + url.QueryEscape(etag) + "&wait=50s")
			if err != nil {
				got <- 0
				return
			}
			resp.Body.Close()
			got <- resp.StatusCode
		}()
		// The request waits at the leader: its handler has been entered
		// (a sleep of 200ms was not always enough on a loaded machine:
		// the request had not arrived, and the shutdown refused it).
		<-entered
		cancel()
		if code := <-got; code != http.StatusServiceUnavailable {
			t.Errorf("long-poll across ServePeers' shutdown = %d; want 503", code)
		}
		if err := <-served; err != nil {
			t.Errorf("ServePeers() = %v; want nil", err)
		}
	})
	// When the listener fails, ServePeers closes the connections it had
	// accepted before it returns: nothing is served after.
	t.Run("ListenerFailureClosesEverything", func(t *testing.T) {
		e, _ := slowLeader(t)
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := &failingListener{Listener: inner, fail: make(chan struct{})}
		served := make(chan error, 1)
		go func() { served <- ServePeers(t.Context(), ln, PeerHandler(e), pki.ServerTLS()) }()
		tr := &http.Transport{TLSClientConfig: pki.ClientTLS()}
		defer tr.CloseIdleConnections()
		_, etag := lastWrite(e.snap.Load().lead)
		got := make(chan error, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Get("https://" + inner.Addr().String() + defaultPeerHealthPath + "?etag=" + url.QueryEscape(etag) + "&wait=50s")
			if err == nil {
				resp.Body.Close()
			}
			got <- err
		}()
		time.Sleep(200 * time.Millisecond)
		close(ln.fail)
		if err := <-served; err == nil {
			t.Error("ServePeers() after its listener failed = nil; want the error")
		}
		if err := <-got; err == nil {
			t.Error("a long-poll accepted before the listener failed was still answered; want its connection closed")
		}
	})
}

// slowLeader leads alone with intervals long enough that no renewal
// answers a long-poll during a test.
func slowLeader(t *testing.T) (*Elector, *Leadership) {
	t.Helper()
	return electAlone(t, ElectorConfig{Store: memstore.New(), LockfilePath: testKey, ServerID: "w",
		FrequentInterval: 20 * time.Second, LeaderTimeout: time.Minute, Logger: quietLogger})
}

// failingListener accepts one connection, then fails once fail is closed.
type failingListener struct {
	net.Listener
	n    int
	fail chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n++; l.n == 1 {
		return l.Listener.Accept()
	}
	<-l.fail
	l.Listener.Close()
	return nil, errors.New("accept: too many open files")
}

func TestStaleLeaderAnswers503(t *testing.T) {
	fs := newFaultStore(memstore.New())
	e, lead := leadAlone(t, fs)
	fs.set(func(f *faultStore) { f.blackhole = true })
	<-lead.Context().Done()
	rec := httptest.NewRecorder()
	PeerHandler(e).ServeHTTP(rec, httptest.NewRequest("GET", defaultPeerHealthPath, nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("after its lease expired the ex-leader answered %d; want 503", rec.Code)
	}
	if !errors.Is(context.Cause(lead.Context()), ErrLeaseExpired) {
		t.Errorf("cause = %v", context.Cause(lead.Context()))
	}
}

// newTestPKI makes a CA and a certificate for 127.0.0.1, for HTTPS between
// electors on loopback.
func newTestPKI(t testing.TB) *devtls.PKI {
	t.Helper()
	p, err := devtls.New()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
