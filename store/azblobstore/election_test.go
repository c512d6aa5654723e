package azblobstore_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/azblobstore"
)

var quiet = slog.New(slog.DiscardHandler)

// Short timings for elections on a real server.
func shortConfig(st store.Store, key, id string) s3lect.ElectorConfig {
	return s3lect.ElectorConfig{
		Store: st, LockfilePath: key, ServerID: id, ServerAddr: id + ":1",
		FrequentInterval: 300 * time.Millisecond, InfrequentInterval: 900 * time.Millisecond, LeaderTimeout: 1500 * time.Millisecond,
		Logger: quiet,
	}
}

// etagLog wraps a store and keeps every ETag its successful writes
// returned.
type etagLog struct {
	store.Store
	mu    *sync.Mutex
	etags *[]string
}

func (l etagLog) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	tag, err := l.Store.PutIfMatch(ctx, key, data, etag)
	if err == nil {
		l.mu.Lock()
		*l.etags = append(*l.etags, tag)
		l.mu.Unlock()
	}
	return tag, err
}

type candidate struct {
	id   string
	conn *cutTransport
	e    *s3lect.Elector
}

type outcome struct {
	c    *candidate
	lead *s3lect.Leadership
	err  error
	at   time.Time
}

func waitWin(t *testing.T, out <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-out:
		if o.err != nil {
			t.Fatalf("Campaign(%s) = %v", o.c.id, o.err)
		}
		return o
	case <-time.After(30 * time.Second): // a liveness bound, not a speed limit
		t.Fatal("no leader within 30s")
		return outcome{}
	}
}

func TestElectionOnAzurite(t *testing.T) {
	conn := azurite(t)
	key := "e2e/" + t.Name() + ".json"
	var (
		mu    sync.Mutex
		etags []string
	)
	out := make(chan outcome, 3)
	for _, id := range []string{"a", "b", "c"} {
		c := &candidate{id: id}
		client := newClient(t, conn, testContainer, func(rt http.RoundTripper) http.RoundTripper {
			c.conn = &cutTransport{rt: rt}
			return c.conn
		})
		st := etagLog{Store: azblobstore.New(client), mu: &mu, etags: &etags}
		e, err := s3lect.New(shortConfig(st, key, id))
		if err != nil {
			t.Fatal(err)
		}
		c.e = e
		t.Cleanup(func() { e.Close() })
		go func() {
			lead, err := e.Campaign(t.Context())
			out <- outcome{c, lead, err, time.Now()}
		}()
	}

	first := waitWin(t, out)
	if first.lead.Term() != 1 {
		t.Errorf("first term = %d; want 1", first.lead.Term())
	}
	var firstEnded atomic.Pointer[time.Time]
	context.AfterFunc(first.lead.Context(), func() { now := time.Now(); firstEnded.Store(&now) })

	time.Sleep(3 * time.Second) // renewals
	if err := first.lead.Context().Err(); err != nil {
		t.Fatalf("leader lost its lease while renewing on Azurite: %v", context.Cause(first.lead.Context()))
	}
	rec, found, err := first.c.e.Lockfile(t.Context())
	if err != nil || !found || rec.LeaderID != first.c.id || rec.Term != 1 {
		t.Fatalf("Lockfile() = %+v, %v, %v; want %s term 1", rec, found, err, first.c.id)
	}

	// Crash: the leader's connection is cut and it never resigns.
	first.c.conn.cut.Store(true)
	second := waitWin(t, out)
	if second.lead.Term() != 2 {
		t.Errorf("term after crash = %d; want 2", second.lead.Term())
	}
	if ended := firstEnded.Load(); ended == nil || !ended.Before(second.at) {
		t.Errorf("crashed leader's context ended at %v; want before the takeover at %v", ended, second.at)
	}
	if cause := context.Cause(first.lead.Context()); !errors.Is(cause, s3lect.ErrLeaseExpired) {
		t.Errorf("crashed leader's cause = %v; want ErrLeaseExpired", cause)
	}

	// Resign: the last candidate takes over with the next term.
	if err := second.lead.Resign(t.Context()); err != nil {
		t.Fatalf("Resign() = %v", err)
	}
	third := waitWin(t, out)
	if third.lead.Term() != 3 {
		t.Errorf("term after resign = %d; want 3", third.lead.Term())
	}

	// Close releases: the record keeps its term and reads as vacant.
	if err := third.c.e.Close(); err != nil {
		t.Fatal(err)
	}
	rec, found, err = second.c.e.Lockfile(t.Context())
	if err != nil || !found || !rec.LastUpdated.IsZero() || rec.Term != 3 || rec.LeaderID != third.c.id {
		t.Errorf("lockfile after Close = %+v, %v, %v; want %s's released record with term 3", rec, found, err, third.c.id)
	}

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, tag := range etags {
		if seen[tag] {
			t.Errorf("ETag %s was returned by two writes; every write must have a new one", tag)
		}
		seen[tag] = true
	}
	if len(etags) < 10 {
		t.Errorf("only %d successful writes; want the renewals of three terms", len(etags))
	}
}

func TestCampaignReportsPermanentErrors(t *testing.T) {
	conn := azurite(t)
	const key = "leader/perm.json"
	cases := []struct {
		name, conn, container string
		want                  []string // what the error must name
	}{
		{"MissingContainer", conn, "s3lect-missing", []string{"s3lect-missing", key, "ContainerNotFound", "az storage container create"}},
		// Real Azure answers a bad shared-key signature with
		// AuthenticationFailed; Azurite with AuthorizationFailure.
		{"WrongAccountKey", wrongKey(conn), testContainer, []string{testContainer, key, "account key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := azblobstore.New(newClient(t, tc.conn, tc.container, nil))
			e, err := s3lect.New(shortConfig(st, key, "a"))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a liveness bound, not a speed limit
			defer cancel()
			_, err = e.Campaign(ctx)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !store.IsPermanent(err) {
				t.Fatalf("Campaign() = %v; want a permanent error, not a retry loop", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Campaign() error %q does not name %q", err, s)
				}
			}
		})
	}
}
