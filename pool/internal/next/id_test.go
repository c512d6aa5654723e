package next

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestPeerHandlerRefusesAReportOfAnIDNewRefuses: the peer handler checks
// a reported ID as New checks a worker's own (CheckID), so a report never
// names a key the store may refuse to read (MinIO refuses NUL bytes in
// keys). A valid ID gets past the check: this worker does not coordinate,
// so it answers 503.
func TestPeerHandlerRefusesAReportOfAnIDNewRefuses(t *testing.T) {
	cfg := Config{Store: memstore.New(), Prefix: "pools/t/", ID: "w0", Shards: []string{"a"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PeerMode: true, ServerAddr: "127.0.0.1:1",
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) {}}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := p.PeerHandler()
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
		if cfg.ID = strings.ReplaceAll(c.id, `\u0000`, "\x00"); CheckID(cfg.Prefix, cfg.ID) == nil {
			if _, err := New(cfg); err != nil {
				t.Errorf("New refuses ID %q (%v), which CheckID takes", cfg.ID, err)
			}
		} else if _, err := New(cfg); err == nil {
			t.Errorf("New takes ID %q, which CheckID refuses", cfg.ID)
		}
		body := `{"id":"` + c.id + `","session":"e1"}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, reportPath+"?prefix=pools/t/", strings.NewReader(body)))
		if rec.Code != c.want {
			t.Errorf("a report of ID %q: status %d; want %d", c.id, rec.Code, c.want)
		}
	}
}
