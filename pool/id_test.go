package pool

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestPeerHandlerRefusesAReportOfAnIDNewRefuses: the peer handler checks
// a reported ID as New checks a worker's own (checkID),
// so a report never names a key the store may refuse to read (MinIO
// refuses NUL bytes in keys). A valid ID gets past the check: this
// worker does not coordinate, so it answers 503.
func TestPeerHandlerRefusesAReportOfAnIDNewRefuses(t *testing.T) {
	cfg := Config{Store: memstore.New(), Prefix: "pools/t/", ID: "w0", Shards: []string{"a"},
		FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PeerMode: true, ServerAddr: "127.0.0.1:1",
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {}}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := PeerHandler(p)
	for _, c := range []struct {
		id   string
		want int
	}{
		{`w1`, http.StatusServiceUnavailable},
		{`a\u0000b`, http.StatusBadRequest},
		{`a/b`, http.StatusBadRequest},
		{``, http.StatusBadRequest},
		{strings.Repeat("x", 1100), http.StatusBadRequest},
	} {
		body := `{"id":"` + c.id + `","session":"e1"}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, reportPath+"?prefix=pools/t/", strings.NewReader(body)))
		if rec.Code != c.want {
			t.Errorf("a report of ID %q: status %d; want %d", c.id, rec.Code, c.want)
		}
	}
}
