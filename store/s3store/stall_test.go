package s3store_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/s3store"
)

// TestStalledUploadIsAbandonedAndFreesTheObject: a conditional PUT whose
// headers reach the server but whose body stalls (a half-open connection,
// a client stopped mid-upload) holds MinIO's lock on the object while the
// server waits for the body (issue 43). docs/stores.md says what s3lect
// bounds: the call ends with its context, and its connection is closed,
// so the server sees it go. A proxy on loopback forwards the PUT's headers
// to the server and holds its body back; the call must return with an
// error within its timeout (and some slack for a loaded machine), the
// proxy must see the client close the connection, and a conditional
// write of the same key by another client must then succeed.
func TestStalledUploadIsAbandonedAndFreesTheObject(t *testing.T) {
	ep := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	const key = "stall/leader.json"
	p := newStallProxy(t, strings.TrimPrefix(ep, "http://"), "PUT /"+bucket+"/"+key)

	// One request per connection, so that the proxy sees each request's
	// headers at the start of a connection of its own.
	oneShot := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Close = true
			return rt.RoundTrip(r)
		})
	}
	stalled := s3store.New(s3test.ClientFor(t, "http://"+p.addr(), oneShot, "", ""), bucket)

	const timeout = 750 * time.Millisecond
	const slack = 2 * time.Second // a loaded machine; the server's own timeouts are minutes
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	start := time.Now()
	_, err := stalled.PutIfMatch(ctx, key, []byte(`{"leaderID":"stalled"}`), "")
	took := time.Since(start)
	if err == nil {
		t.Fatal("the stalled write succeeded; want an error once its timeout passed")
	}
	if took > timeout+slack {
		t.Errorf("the stalled write returned after %v; want within its timeout %v (+ %v)", took, timeout, slack)
	}
	select {
	case <-p.stalled:
	default:
		t.Fatalf("the proxy held back no body of a PUT to %s; the write failed otherwise: %v", key, err)
	}
	select {
	case <-p.clientGone:
	case <-time.After(slack):
		t.Fatalf("the client did not close its connection within %v after its write returned (%v)", slack, err)
	}
	t.Logf("stalled write returned after %v: %v", took, err)

	// Another member's conditional write of the same key: the stalled
	// upload no longer holds the object.
	other := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
	octx, ocancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer ocancel()
	want := []byte(`{"leaderID":"other"}`)
	start = time.Now()
	if _, err := other.PutIfMatch(octx, key, want, ""); err != nil {
		t.Fatalf("a conditional create by another client after the stalled write was abandoned: %v (after %v)", err, time.Since(start))
	}
	t.Logf("the other client's create took %v", time.Since(start))
	got, _, err := other.Get(octx, key)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("Get = %q, %v; want the other client's %q (the stalled write must not land)", got, err, want)
	}
}

// stallProxy forwards loopback connections to upstream. A request whose
// request line starts with stallLine has its headers forwarded and its
// body held back: read from the client and dropped, until the client
// closes; then the proxy closes the upstream connection too, as a TCP
// path does when its client goes.
type stallProxy struct {
	ln         net.Listener
	upstream   string
	stallLine  string
	stalled    chan struct{} // a stalled request's headers were forwarded
	clientGone chan struct{} // the client of a stalled request closed its connection
	wg         sync.WaitGroup
}

func newStallProxy(t *testing.T, upstream, stallLine string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, upstream: upstream, stallLine: stallLine,
		stalled: make(chan struct{}, 16), clientGone: make(chan struct{}, 16)}
	var mu sync.Mutex
	var conns []net.Conn
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	p.wg.Add(1)
	go func() { defer p.wg.Done(); io.Copy(c, up); c.Close() }() // the answers; ends when either side closes
	br := bufio.NewReader(c)
	var head []byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if err != nil {
			return
		}
	}
	if _, err := up.Write(head); err != nil {
		return
	}
	if rest, ok := strings.CutPrefix(string(head), p.stallLine); !ok || (rest[0] != '?' && rest[0] != ' ') {
		io.Copy(up, br)
		return
	}
	p.stalled <- struct{}{}
	io.Copy(io.Discard, br) // the body, never forwarded, until the client closes
	p.clientGone <- struct{}{}
}
