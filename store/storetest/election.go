package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// Election runs a real election on a backend with short timings: three
// candidates on one lockfile; the first leader renews for a while and then
// crashes (its store calls all fail, and it never resigns); the next takes
// over at a higher term, only after the crashed leader's context ended; it
// resigns, and the last takes over at a higher term still; Close releases
// the lockfile. Terms rise but may skip: a takeover that lost the race for
// the lockfile may already have raised the term object (docs/protocol.md,
// 1.1). newStore returns a store for one candidate (a client of its
// own); every ETag a write returns must be new. The crash is a
// faultstore.Store's Cut: every call fails, calls in flight included, and
// their results never reach the elector.
func Election(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	key := "e2e/" + t.Name() + ".json"
	etags := &etagLog{seen: map[string]bool{}, terms: map[uint64]time.Time{}}
	type candidate struct {
		id   string
		conn *faultstore.Store
		st   store.Store
		e    *s3lect.Elector
	}
	type outcome struct {
		c    *candidate
		lead *s3lect.Leadership
		err  error
		at   time.Time
	}
	out := make(chan outcome, 3)
	for _, id := range []string{"a", "b", "c"} {
		c := &candidate{id: id, conn: faultstore.New(newStore(t))}
		c.st = etags.wrap(c.conn)
		e, err := s3lect.New(s3lect.ElectorConfig{
			Store: c.st, LockfilePath: key, ServerID: id, ServerAddr: id + ":1",
			FrequentInterval: 300 * time.Millisecond, InfrequentInterval: 900 * time.Millisecond, LeaderTimeout: 1500 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler),
		})
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
	win := func() outcome {
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

	first := win()
	if first.lead.Term() < 1 {
		t.Errorf("first term = %d; want at least 1", first.lead.Term())
	}
	var firstEnded atomic.Pointer[time.Time]
	context.AfterFunc(first.lead.Context(), func() { now := time.Now(); firstEnded.Store(&now) })
	time.Sleep(2 * time.Second) // renewals
	if err := first.lead.Context().Err(); err != nil {
		t.Fatalf("the leader lost its lease while renewing: %v", context.Cause(first.lead.Context()))
	}
	rec, found, err := readLockfile(t.Context(), first.c.st, key)
	if err != nil || !found || rec.LeaderID != first.c.id || rec.Term != first.lead.Term() {
		t.Fatalf("Lockfile() = %+v, %v, %v; want %s at term %d", rec, found, err, first.c.id, first.lead.Term())
	}

	first.c.conn.Cut() // the crash
	second := win()
	if second.lead.Term() <= first.lead.Term() {
		t.Errorf("term after the crash = %d; want more than %d", second.lead.Term(), first.lead.Term())
	}
	// The crashed leader must have stopped acting before the takeover
	// write was even sent, not only before Campaign returned.
	if ended, sent := firstEnded.Load(), etags.firstSent(second.lead.Term()); ended == nil || sent.IsZero() || !ended.Before(sent) {
		t.Errorf("the crashed leader's context ended at %v; want before the takeover write was sent, at %v", ended, sent)
	}
	if cause := context.Cause(first.lead.Context()); !errors.Is(cause, s3lect.ErrLeaseExpired) {
		t.Errorf("the crashed leader's cause = %v; want ErrLeaseExpired", cause)
	}

	if err := second.lead.Resign(t.Context()); err != nil {
		t.Fatalf("Resign() = %v", err)
	}
	third := win()
	if third.lead.Term() <= second.lead.Term() {
		t.Errorf("term after the resignation = %d; want more than %d", third.lead.Term(), second.lead.Term())
	}
	if err := third.c.e.Close(); err != nil {
		t.Fatal(err)
	}
	rec, found, err = readLockfile(t.Context(), second.c.st, key)
	if err != nil || !found || !rec.LastUpdated.IsZero() || rec.Term != third.lead.Term() || rec.LeaderID != third.c.id {
		t.Errorf("lockfile after Close = %+v, %v, %v; want %s's released record at term %d", rec, found, err, third.c.id, third.lead.Term())
	}
	if n, dup := etags.result(); dup != "" {
		t.Errorf("ETag %s was returned by two writes of one key; every write must get a new one", dup)
	} else if n < 10 {
		t.Errorf("only %d successful writes; want the renewals of three terms", n)
	}
}

// etagLog keeps the ETags that successful writes returned, per key, and
// when the first successful write of each term was sent.
type etagLog struct {
	mu    sync.Mutex
	seen  map[string]bool
	n     int
	dup   string
	terms map[uint64]time.Time
}

func (l *etagLog) firstSent(term uint64) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.terms[term]
}

func (l *etagLog) wrap(st store.Store) store.Store { return loggedStore{st, l} }

func (l *etagLog) result() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.dup
}

type loggedStore struct {
	store.Store
	log *etagLog
}

func (s loggedStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	sent := time.Now()
	tag, err := s.Store.PutIfMatch(ctx, key, data, etag)
	if err == nil {
		var rec struct {
			Term uint64 `json:"term"`
		}
		json.Unmarshal(data, &rec)
		s.log.mu.Lock()
		if _, ok := s.log.terms[rec.Term]; !ok {
			s.log.terms[rec.Term] = sent
		}
		// Per key: a term claim and the term object raised to it may hold
		// the same bytes, and on S3 the same bytes have the same ETag.
		if s.log.seen[key+"\x00"+tag] && s.log.dup == "" {
			s.log.dup = tag + " (" + key + ")"
		}
		s.log.seen[key+"\x00"+tag] = true
		s.log.n++
		s.log.mu.Unlock()
	}
	return tag, err
}

// readLockfile reads the lockfile once through st and decodes it; found
// is false when there is none.
func readLockfile(ctx context.Context, st store.Store, key string) (rec s3lect.Record, found bool, err error) {
	data, _, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return s3lect.Record{}, false, nil
	}
	if err != nil {
		return s3lect.Record{}, false, err
	}
	rec, err = s3lect.ParseRecord(data)
	return rec, true, err
}
