package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// runLog writes the lines of s3lect run to its stderr, one at a time:
// as text, each line stamped with the time in UTC to the millisecond
// ("2026-11-26T19:00:34.512Z s3lect: ..."), or with -log-format json as
// one JSON object per line (log/slog's JSON handler: time, level, msg,
// and the event's fields), which log collectors parse as they are. Every
// line run prints after its flags are parsed goes through it, its last
// fatal line included.
type runLog struct {
	mu   sync.Mutex
	w    io.Writer
	json *slog.Logger // nil: text
	now  func() time.Time
}

// Log formats of -log-format.
const (
	logText = "text"
	logJSON = "json"
)

func newRunLog(w io.Writer, format string) *runLog {
	l := &runLog{w: w, now: time.Now}
	if format == logJSON {
		l.json = slog.New(slog.NewJSONHandler(lockedWriter{l}, nil))
	}
	return l
}

// lockedWriter serialises the writes of the JSON handler, the elector's
// -v logger and the text lines to one stderr.
type lockedWriter struct{ l *runLog }

func (lw lockedWriter) Write(p []byte) (int, error) {
	lw.l.mu.Lock()
	defer lw.l.mu.Unlock()
	return lw.l.w.Write(p)
}

// log writes one line: msg at level, with attrs (slog's key, value
// pairs) as fields in JSON; the text form is msg alone, since the text
// lines say the same in words.
func (l *runLog) log(level slog.Level, msg string, attrs ...any) {
	msg = unprefixed(msg)
	if l.json != nil {
		l.json.Log(context.Background(), level, msg, attrs...)
		return
	}
	lockedWriter{l}.Write([]byte(stamp(l.now()) + " s3lect: " + msg + "\n"))
}

// handler is the handler for the elector's own events (-v): in the
// line's format.
func (l *runLog) handler() slog.Handler {
	if l.json != nil {
		return l.json.Handler()
	}
	return slog.NewTextHandler(lockedWriter{l}, nil)
}

// writer returns a writer whose every line is logged at level, for what
// prints lines of its own (reportErr, the store's retries while it is
// opened). A line's "s3lect run: " or "s3lect: " prefix is dropped: the
// log's own says it.
func (l *runLog) writer(level slog.Level) io.Writer { return &lineWriter{l: l, level: level} }

// lineWriter is safe for concurrent use: the store's retry hook may call
// it from the elector's goroutines.
type lineWriter struct {
	l     *runLog
	level slog.Level
	mu    sync.Mutex
	buf   bytes.Buffer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf.Next(i + 1))
		line = strings.TrimSuffix(line, "\n")
		line = strings.TrimPrefix(line, "s3lect run: ")
		w.l.log(w.level, line)
	}
}
