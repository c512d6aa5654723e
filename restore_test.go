package s3lect

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/simworld"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestExLeaderWaitsOutARestoreOfItsOwnWrite: issue 43's ex-leader case. A
// leader is cut off the store right after a renewal lands, its lease
// runs out, and another member leads for ten minutes. Then an operator
// restores a backup taken while the first one led: exactly its last
// acknowledged write, so the same ETag on S3 (a hash of the bytes) and on
// memstore. The ex-leader, back on the store and campaigning, must not
// take it over while the live leader's lease runs, even when the live
// leader is cut off the store at that moment (so that no refused renewal
// ends its leadership early). With the ex-leader
// shortcut (version 3's T8/E5, the mutation exleader) it took over at its
// first read, during the live lease.
func TestExLeaderWaitsOutARestoreOfItsOwnWrite(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		w := simworld.NewWorld(simworld.Faults{})
		cfg := func(id string, st *simworld.Store) ElectorConfig {
			return ElectorConfig{Store: st, LockfilePath: testKey, ServerID: id, Logger: quietLogger}
		}
		var (
			mu     sync.Mutex
			backup []byte // the ex-leader's last acknowledged write
		)
		sa := w.NewStore(rand.New(rand.NewPCG(1, 1)), false)
		sa.OnLand = func(key string) {
			if key != testKey {
				return
			}
			data, _, _ := w.Mem.Get(context.Background(), testKey)
			mu.Lock()
			backup = data
			mu.Unlock()
		}
		ca := cfg("a", sa)
		if testing.Verbose() {
			ca.Logger = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		a, err := New(ca)
		if err != nil {
			t.Fatal(err)
		}
		sb := w.NewStore(rand.New(rand.NewPCG(2, 2)), false)
		b, err := New(cfg("b", sb))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		first, err := a.Campaign(t.Context())
		if err != nil {
			t.Fatalf("Campaign() = %v", err)
		}
		var bLead atomic.Pointer[Leadership]
		bDone := make(chan struct{})
		go func() {
			defer close(bDone)
			if l, err := b.Campaign(t.Context()); err == nil {
				bLead.Store(l)
			}
		}()
		time.Sleep(20*time.Second + 500*time.Millisecond)
		sa.Partition(true) // cut off right after the renewal at 25 s lands
		<-first.Context().Done()
		<-bDone
		if bLead.Load() == nil {
			t.Fatal("the other member never led")
		}
		time.Sleep(time.Until(start.Add(11 * time.Minute)))

		// The operator restores the backup, and the ex-leader is back.
		_, etag, _ := w.Mem.Get(context.Background(), testKey)
		mu.Lock()
		data := backup
		mu.Unlock()
		if _, err := w.Mem.PutIfMatch(context.Background(), testKey, data, etag); err != nil {
			t.Fatalf("restore: %v", err)
		}
		sa.Heal()
		sb.Partition(false) // and the live leader is cut off at that moment: its lease runs out by itself
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		again, err := a.Campaign(ctx)
		if err != nil {
			t.Fatalf("ex-leader's Campaign() = %v", err)
		}
		if bl := bLead.Load(); bl.Context().Err() == nil {
			t.Errorf("the ex-leader took over %v after the restore while the other member's leadership was live",
				time.Since(start.Add(11*time.Minute)))
		}
		again.Resign(context.Background())
		a.Close()
		b.Close()
	})
}

// restoringStore is a store whose every read of the lockfile, once armed,
// is preceded by a restore of the bytes the previous read returned: an
// operator putting back, right before a follower's next read, the
// version that follower last saw.
type restoringStore struct {
	*memstore.Store
	mu       sync.Mutex
	armed    bool
	last     []byte
	restores int
}

func (s *restoringStore) before(ctx context.Context, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed || key != testKey || s.last == nil {
		return
	}
	if _, etag, err := s.Store.Get(ctx, key); err == nil {
		if _, err := s.Store.PutIfMatch(ctx, key, s.last, etag); err == nil {
			s.restores++
			s.armed = false // once
		}
	}
}

func (s *restoringStore) after(key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key == testKey {
		s.last = data
	}
}

func (s *restoringStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	s.before(ctx, key)
	data, etag, err := s.Store.Get(ctx, key)
	s.after(key, data)
	return data, etag, err
}

func (s *restoringStore) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	s.before(ctx, key)
	data, etag, token, err := s.Store.GetSighting(ctx, key)
	s.after(key, data)
	return data, etag, token, err
}

// TestStableFollowerSeesARestoreOfWhatItRead: issue 43's first case. A
// stable follower (reading every InfrequentInterval) last read version X
// of the lockfile; right before its next read, the lockfile is put back
// to X (the same bytes, so the same ETag). The follower must not take it
// for "unchanged since its first sight" and take over at once while the
// leader is live; the store's sighting token (store.Sighter) tells the
// restore from X. With sightings by ETag and bytes alone (mutation
// notoken), the follower took over during the live lease.
func TestStableFollowerSeesARestoreOfWhatItRead(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		a, err := New(ElectorConfig{Store: mem, LockfilePath: testKey, ServerID: "a", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		fs := &restoringStore{Store: mem}
		b, err := New(ElectorConfig{Store: fs, LockfilePath: testKey, ServerID: "b", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		lead, err := a.Campaign(t.Context())
		if err != nil {
			t.Fatalf("Campaign() = %v", err)
		}
		won := make(chan bool, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			l, err := b.Campaign(ctx)
			if err != nil {
				won <- false
				return
			}
			won <- lead.Context().Err() == nil // was the leader live when the follower won?
			l.Resign(context.Background())
		}()
		time.Sleep(2 * time.Minute) // the follower is stable
		if b.Stats().Mode != "infrequent" {
			t.Fatalf("follower's mode after two minutes = %q; want infrequent", b.Stats().Mode)
		}
		fs.mu.Lock()
		fs.armed = true
		fs.mu.Unlock()
		if overlap := <-won; overlap {
			t.Errorf("the follower took over while the leader's leadership was live, after the lockfile was restored to what it last read")
		}
		fs.mu.Lock()
		if fs.restores != 1 {
			t.Errorf("%d restores; want 1", fs.restores)
		}
		fs.mu.Unlock()
		a.Close()
		b.Close()
	})
}
