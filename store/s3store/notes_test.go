package s3store_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// notesHandler keeps what a Store says it adapted to (the "adapted" and
// "settled" attributes of its log records), for the compatibility table
// that .ci/compat.sh prints.
type notesHandler struct {
	mu    sync.Mutex
	notes map[string]bool
}

func (h *notesHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *notesHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *notesHandler) WithGroup(string) slog.Handler            { return h }
func (h *notesHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "adapted" || a.Key == "settled" {
			h.mu.Lock()
			h.notes[a.Value.String()] = true
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// notesLogger returns a logger whose notes are appended, one a line, to
// the file S3LECT_TEST_NOTES names when the test ends.
func notesLogger(t *testing.T) *slog.Logger {
	h := &notesHandler{notes: map[string]bool{}}
	t.Cleanup(func() {
		path := os.Getenv("S3LECT_TEST_NOTES")
		if path == "" {
			return
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Errorf("notes: %v", err)
			return
		}
		defer f.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for n := range h.notes {
			f.WriteString(n + "\n")
		}
	})
	return slog.New(h)
}
