package s3lect

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store/memstore"
)

// The snapshot is true at every return: once Resign, Close or a loss has
// returned or been observed, the peer endpoint, Leader(), Stats and the
// health check say that this elector no longer leads.

// peerGet asks the peer endpoint at addr over HTTPS, as an original-s3lect
// follower would (a plain GET), and returns the status and the record.
func peerGet(t *testing.T, c *http.Client, addr string) (int, Record) {
	t.Helper()
	resp, err := c.Get("https://" + addr + defaultPeerHealthPath)
	if err != nil {
		t.Fatalf("GET peer endpoint: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rec Record
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &rec); err != nil {
			t.Fatalf("peer answer %q: %v", body, err)
		}
	}
	return resp.StatusCode, rec
}

// notLeading fails unless e's Leader(), Stats and health show it not
// leading; over also wants the leadership over (its release written), as
// it is when Resign or Close has returned.
func notLeading(t *testing.T, e *Elector, when string, over bool) {
	t.Helper()
	if rec, ok := e.Leader(); ok && rec.LeaderID == e.cfg.ServerID {
		t.Errorf("%s: Leader() = %+v, true; want not this elector", when, rec)
	}
	if s := e.Stats(); s.Mode == "leader" {
		t.Errorf("%s: Stats Mode %q; want not leading", when, s.Mode)
	}
	if s := e.snap.Load(); over && s.holding {
		t.Errorf("%s: the health check sees a leadership held", when)
	}
	if err := e.health(context.Background()); err != nil {
		t.Errorf("%s: health = %v; want healthy", when, err)
	}
}

func TestResignReturnsOnlyOnceThePeerEndpointSaysSo(t *testing.T) {
	// Beside the package's other tests: its 50 campaigns wait on real
	// timers (about 30 s in all), with an elector and a server of its own.
	t.Parallel()
	pki := newTestPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(ElectorConfig{Store: memstore.New(), LockfilePath: testKey, ServerID: "w", ServerAddr: ln.Addr().String(),
		FrequentInterval: peerFI, InfrequentInterval: peerII, LeaderTimeout: peerLT, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServePeers(ctx, ln, PeerHandler(e), pki.ServerTLS()) }()
	defer func() {
		e.Close()
		stop()
		if err := <-served; err != nil {
			t.Errorf("ServePeers = %v", err)
		}
	}()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientTLS()}}
	defer client.CloseIdleConnections()

	for i := range 50 {
		lead, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if code, rec := peerGet(t, client, ln.Addr().String()); code != 200 || rec.Term != lead.Term() {
			t.Fatalf("trial %d: peer endpoint while leading = %d %+v; want 200 at term %d", i, code, rec, lead.Term())
		}
		if err := lead.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		if code, rec := peerGet(t, client, ln.Addr().String()); code == 200 {
			t.Fatalf("trial %d: peer endpoint right after Resign returned = 200 %+v; want 503", i, rec)
		}
		notLeading(t, e, "after Resign", true)
	}
}

func TestCloseReturnsOnlyOnceItSaysSo(t *testing.T) {
	for i := range 50 {
		e, err := New(ElectorConfig{Store: memstore.New(), LockfilePath: testKey, ServerID: "w", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Campaign(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatalf("trial %d: Close = %v", i, err)
		}
		notLeading(t, e, "after Close", true)
		if t.Failed() {
			t.Fatalf("trial %d", i)
		}
	}
}

func TestLossIsShownWhenObserved(t *testing.T) {
	for i := range 20 {
		mem := memstore.New()
		e, err := New(ElectorConfig{Store: mem, LockfilePath: testKey, ServerID: "w",
			FrequentInterval: 20 * time.Millisecond, InfrequentInterval: 40 * time.Millisecond, LeaderTimeout: 100 * time.Millisecond,
			Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		lead, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mem.Set(testKey, Record{LeaderID: "intruder", LastUpdated: time.Now(), Term: 99}.encode())
		<-lead.Context().Done()
		if code := serveOnce(e, "/health/leadership"); code == 200 {
			t.Fatalf("trial %d: peer handler right after the loss was observed = 200; want 503", i)
		}
		notLeading(t, e, "after the loss", false)
		e.Close()
		if t.Failed() {
			t.Fatalf("trial %d", i)
		}
	}
}

// serveOnce asks e's peer handler in-process and returns the status.
func serveOnce(e *Elector, target string) int {
	rec := httptest.NewRecorder()
	PeerHandler(e).ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec.Code
}

func TestCloseResignsLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, _, out := stableGroup(t)
		if err := old.n.e.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		cause := context.Cause(old.l.Context())
		if !errors.Is(cause, ErrResigned) || !errors.Is(cause, ErrClosed) {
			t.Errorf("cause after Close = %v; want ErrResigned and ErrClosed", cause)
		}
		data, _, err := old.n.fs.inner.Get(t.Context(), testKey)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := ParseRecord(data)
		if err != nil || !rec.LastUpdated.IsZero() || rec.Term != old.l.Term() {
			t.Errorf("lockfile after Close = %+v (%v); want released with term %d", rec, err, old.l.Term())
		}
		mustWin(t, out)
	})
}

// TestCloseReturnsAFailedRelease: a release Close had to write that could
// not be written reaches Close's return.
func TestCloseReturnsAFailedRelease(t *testing.T) {
	synctest.Test(t, closeReturnsAFailedRelease)
}

func closeReturnsAFailedRelease(t *testing.T) {
	fs := newFaultStore(memstore.New())
	e, err := New(ElectorConfig{Store: fs, LockfilePath: testKey, ServerID: "w",
		FrequentInterval: 20 * time.Millisecond, InfrequentInterval: 40 * time.Millisecond, LeaderTimeout: 100 * time.Millisecond,
		Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(t.Context()); err != nil {
		t.Fatal(err)
	}
	fs.set(func(f *faultStore) { f.failAll = true })
	err = e.Close()
	if !errors.Is(err, errInjected) {
		t.Fatalf("Close() = %v; want the release's failure (%v)", err, errInjected)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}
