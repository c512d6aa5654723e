package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
)

var errLost = errors.New("connection reset (injected)")

// scripted is a store whose every request first asks fault: err fails
// the request; with land, a write is applied all the same (its reply was
// lost). ETags count up ("e1", "e2"...), and set plants an object under
// any ETag, reused ones included (a store that rewound).
type scripted struct {
	mu    sync.Mutex
	objs  map[string][2]string // key -> data, etag
	n     int
	calls []string // "get", "put", in order
	fault func(op string, n int) (err error, land bool)
}

func newScripted() *scripted { return &scripted{objs: map[string][2]string{}} }

func (s *scripted) set(key, data, etag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[key] = [2]string{data, etag}
}

func (s *scripted) ask(op string) (error, bool) {
	s.calls = append(s.calls, op)
	if s.fault == nil {
		return nil, false
	}
	return s.fault(op, len(s.calls))
}

func (s *scripted) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.ask("get"); err != nil {
		return nil, "", err
	}
	o, ok := s.objs[key]
	if !ok {
		return nil, "", store.ErrNotFound
	}
	return []byte(o[0]), o[1], nil
}

func (s *scripted) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err, land := s.ask("put")
	if err != nil && !land {
		return "", err
	}
	o, ok := s.objs[key]
	if etag == "" && ok || etag != "" && (!ok || o[1] != etag) {
		return "", store.ErrPreconditionFailed
	}
	s.n++
	tag := fmt.Sprintf("e%d", s.n)
	s.objs[key] = [2]string{string(data), tag}
	return tag, err
}

func (s *scripted) get(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objs[key][0]
}

func (s *scripted) trace() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.calls, " ")
}

// failing returns a fault that fails the requests numbered in lost (from
// 1), the writes among them landing when land says so.
func failing(land bool, lost ...int) func(string, int) (error, bool) {
	return func(op string, n int) (error, bool) {
		for _, l := range lost {
			if n == l {
				return errLost, land && op == "put"
			}
		}
		return nil, false
	}
}

func newCalls(s store.Store) (*Calls, *[]string) {
	var counted []string
	clock := NewClock()
	return &Calls{Store: s, Timeout: time.Second, Clock: &clock,
		Count: func(op string, _ error) { counted = append(counted, op) }}, &counted
}

// TestPut: the write rules of docs/protocol.md, section 2, one row per
// case: what the store does, and what Put returns and sends.
func TestPut(t *testing.T) {
	const key = "k"
	for _, tc := range []struct {
		name   string
		before string // the object's content before the write ("": absent), under ETag "e0"
		create bool   // the write creates, rather than going over "e0" as before
		fault  func(op string, n int) (error, bool)
		// during runs before the nth request
		during     func(s *scripted)
		duringAt   int
		wantErr    error // nil: success
		wantUnsure bool
		wantData   string // the object's content after
		wantCalls  string
	}{
		{name: "healthy write is one PUT", before: "old",
			wantData: "new", wantCalls: "put"},
		{name: "healthy create is one PUT", create: true,
			wantData: "new", wantCalls: "put"},
		{name: "a failed attempt is retried after a read", before: "old", fault: failing(false, 1),
			wantData: "new", wantCalls: "put get put"},
		{name: "a write that landed after a lost reply is adopted by the retry's read", before: "old", fault: failing(true, 1),
			wantData: "new", wantCalls: "put get"},
		{name: "a create that landed after a lost reply is adopted", create: true, fault: failing(true, 1),
			wantData: "new", wantCalls: "put get"},
		// A refusal after an attempt whose outcome is unknown reads once
		// more: that attempt may have landed after all.
		{name: "a retry over a reused ETag with other bytes is refused (rewound store)", before: "old", fault: failing(false, 1),
			during: func(s *scripted) { s.set(key, "someone else's", "e0") }, duringAt: 2,
			wantErr: store.ErrPreconditionFailed, wantUnsure: true, wantData: "someone else's", wantCalls: "put get get"},
		{name: "a retry over a changed object is refused", before: "old", fault: failing(false, 1),
			during: func(s *scripted) { s.set(key, "someone else's", "e9") }, duringAt: 2,
			wantErr: store.ErrPreconditionFailed, wantUnsure: true, wantData: "someone else's", wantCalls: "put get get"},
		{name: "a retry over a deleted object is refused", before: "old", fault: failing(false, 1),
			during: func(s *scripted) { s.mu.Lock(); delete(s.objs, key); s.mu.Unlock() }, duringAt: 2,
			wantErr: store.ErrPreconditionFailed, wantUnsure: true, wantData: "", wantCalls: "put get get"},
		{name: "a create retried over someone else's object is refused", create: true, fault: failing(false, 1),
			during: func(s *scripted) { s.set(key, "someone else's", "e9") }, duringAt: 2,
			wantErr: store.ErrPreconditionFailed, wantUnsure: true, wantData: "someone else's", wantCalls: "put get get"},
		{name: "a delayed attempt that lands before the retry's PUT is adopted after the refusal", before: "old", fault: failing(false, 1),
			during: func(s *scripted) { s.set(key, "new", "e5") }, duringAt: 3, // the retry's read saw "old"
			wantData: "new", wantCalls: "put get put get"},
		{name: "a refusal is an answer: no retry", before: "old",
			during: func(s *scripted) { s.set(key, "someone else's", "e9") }, duringAt: 1,
			wantErr: store.ErrPreconditionFailed, wantData: "someone else's", wantCalls: "put"},
		{name: "three failed attempts: a failure, maybe landed", before: "old", fault: failing(false, 1, 3, 5),
			wantErr: errLost, wantUnsure: true, wantData: "old", wantCalls: "put get put get put"},
		{name: "a failed read before a retry is a failed attempt", before: "old", fault: failing(false, 1, 2),
			wantData: "new", wantCalls: "put get get put"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScripted()
				var over Sighting
				if tc.before != "" {
					s.set(key, tc.before, "e0")
					if !tc.create {
						over = Sight([]byte(tc.before), "e0")
					}
				}
				s.fault = func(op string, n int) (error, bool) {
					if tc.during != nil && n == tc.duringAt {
						s.mu.Unlock()
						tc.during(s)
						s.mu.Lock()
					}
					if tc.fault == nil {
						return nil, false
					}
					return tc.fault(op, n)
				}
				c, counted := newCalls(s)
				tag, unsure, err := c.Put(t.Context(), key, []byte("new"), over, time.Time{})
				switch {
				case tc.wantErr == nil && (err != nil || tag == ""):
					t.Errorf("Put() = %q, %v; want a new ETag", tag, err)
				case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
					t.Errorf("Put() error = %v; want %v", err, tc.wantErr)
				}
				if unsure != tc.wantUnsure {
					t.Errorf("Put() unsure = %v; want %v", unsure, tc.wantUnsure)
				}
				if got := s.get(key); got != tc.wantData {
					t.Errorf("object after Put() = %q; want %q", got, tc.wantData)
				}
				if got := s.trace(); got != tc.wantCalls {
					t.Errorf("requests sent: %q; want %q", got, tc.wantCalls)
				}
				if got := strings.Join(*counted, " "); got != tc.wantCalls {
					t.Errorf("requests counted: %q; want %q", got, tc.wantCalls)
				}
			})
		})
	}
}

// TestPutRetrySchedule: attempts at 0, 100 ms and 1.1 s, each cut at
// Timeout.
func TestPutRetrySchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		var sent []time.Duration
		start := time.Now()
		s.fault = func(op string, _ int) (error, bool) {
			if op != "put" {
				return nil, false
			}
			sent = append(sent, time.Since(start))
			return errLost, false
		}
		c, _ := newCalls(s)
		if _, _, err := c.Put(t.Context(), "k", []byte("x"), Sighting{}, time.Time{}); !errors.Is(err, errLost) {
			t.Fatalf("Put() = %v; want the last attempt's %v", err, errLost)
		}
		if want := []time.Duration{0, 100 * time.Millisecond, 1100 * time.Millisecond}; fmt.Sprint(sent) != fmt.Sprint(want) {
			t.Errorf("PUTs sent at %v; want %v", sent, want)
		}
	})
}

// TestPutNotAfter: no attempt is sent once the local clock reaches
// notAfter, a retry included.
func TestPutNotAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		c, _ := newCalls(s)
		_, _, err := c.Put(t.Context(), "k", []byte("x"), Sighting{}, time.Now())
		if !errors.Is(err, ErrLate) || s.trace() != "" {
			t.Fatalf("Put() at notAfter = %v, sent %q; want ErrLate and nothing sent", err, s.trace())
		}
		s.fault = failing(false, 1)
		_, _, err = c.Put(t.Context(), "k", []byte("x"), Sighting{}, time.Now().Add(50*time.Millisecond))
		if !errors.Is(err, ErrLate) || s.trace() != "put" {
			t.Fatalf("Put() whose retry comes after notAfter = %v, sent %q; want ErrLate after one PUT", err, s.trace())
		}
	})
}

func TestGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		c, _ := newCalls(s)
		if data, etag, err := c.Get(t.Context(), "k"); data != nil || etag != "" || err != nil {
			t.Errorf("Get() of an absent object = %q, %q, %v; want nothing and no error", data, etag, err)
		}
		s.set("k", "v", "e7")
		s.fault = failing(false, 2)
		if data, etag, err := c.Get(t.Context(), "k"); string(data) != "v" || etag != "e7" || err != nil {
			t.Errorf("Get() after a failed attempt = %q, %q, %v; want v, e7", data, etag, err)
		}
		s.set("k", "v", "")
		if _, _, err := c.Get(t.Context(), "k"); !errors.Is(err, ErrNoETag) {
			t.Errorf("Get() of an object without ETag = %v; want ErrNoETag", err)
		}
	})
}

// listing is a scripted store that lists what it holds.
type listing struct{ *scripted }

func (l listing) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err, _ := l.ask("list"); err != nil {
		return nil, err
	}
	var es []store.Entry
	for k, o := range l.objs {
		if strings.HasPrefix(k, prefix) {
			es = append(es, store.Entry{Key: k, ETag: o[1]})
		}
	}
	return es, nil
}

func TestList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		s.set("p/a", "x", "e1")
		s.set("q/b", "y", "e2")
		c, counted := newCalls(listing{s})
		s.fault = failing(false, 1)
		es, err := c.List(t.Context(), "p/")
		if err != nil || len(es) != 1 || es[0] != (store.Entry{Key: "p/a", ETag: "e1"}) {
			t.Errorf("List(p/) after a failed attempt = %v, %v; want [p/a e1]", es, err)
		}
		if got := strings.Join(*counted, " "); got != "list list" {
			t.Errorf("requests counted: %q; want %q", got, "list list")
		}
		c, _ = newCalls(s)
		if _, err := c.List(t.Context(), "p/"); !errors.Is(err, ErrNoList) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List() on a store without List = %v; want ErrNoList", err)
		}
	})
}
