package s3lect

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/s3lect/s3lect/store/memstore"
)

// lockedBuffer is a log destination the elector's goroutines write while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestNeverAnsweredSaysSo: a store that has not answered once since the
// elector started is reported at once, at WARN (once), in Change.Err
// (wrapping ErrNeverAnswered) and in Stats; after its first answer, a
// failure is an ordinary outage again.
func TestNeverAnsweredSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
		st := &brokenStore{Store: memstore.New(), err: refused, fixed: make(chan struct{})}
		var logs lockedBuffer
		cfg := testConfig(st, "w")
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		e := newTestElector(t, cfg)
		ch := e.Observe(t.Context())
		c := <-ch
		if !errors.Is(c.Err, ErrNeverAnswered) || !errors.Is(c.Err, refused) {
			t.Fatalf("Change.Err = %v; want ErrNeverAnswered wrapping the store's error", c.Err)
		}
		if !e.Stats().NeverAnswered {
			t.Error("Stats().NeverAnswered = false before any answer; want true")
		}
		synctest.Wait()
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "has not answered since this elector started") {
			t.Errorf("log after the first failure:\n%s\nwant one WARN line saying the store has not answered", logs.String())
		}
		close(st.fixed)
		if c = <-ch; c.Err != nil {
			t.Errorf("Change.Err after the store answered = %v; want nil", c.Err)
		}
		if e.Stats().NeverAnswered {
			t.Error("Stats().NeverAnswered = true after an answer; want false")
		}
	})
}
