package k8slock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

const key = "leader/controller.json"

func newLock(t *testing.T, st store.Store, id string) *Lock {
	t.Helper()
	l, err := New(Config{Store: st, Key: key, Identity: id})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return l
}

func record(holder string, transitions int) resourcelock.LeaderElectionRecord {
	now := metav1.NewTime(time.Now())
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now, LeaderTransitions: transitions}
}

func TestNewNamesTheBadField(t *testing.T) {
	st := memstore.New()
	pod := &corev1.Pod{}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no store", Config{Key: key, Identity: "a"}, "Store is nil"},
		{"no key", Config{Store: st, Identity: "a"}, "Key is empty"},
		{"no identity", Config{Store: st, Key: key}, "Identity is empty"},
		{"recorder without object", Config{Store: st, Key: key, Identity: "a", EventRecorder: &recorder{}}, "EventObject is nil"},
		{"negative timeout", Config{Store: st, Key: key, Identity: "a", CallTimeout: -time.Second}, "CallTimeout -1s is negative"},
		{"good", Config{Store: st, Key: key, Identity: "a", EventRecorder: &recorder{}, EventObject: pod}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New() = %v; want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestGetOfAMissingObjectIsNotFound(t *testing.T) {
	l := newLock(t, memstore.New(), "a")
	_, _, err := l.Get(t.Context())
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get() = %v; want a NotFound API error (client-go creates the record only on that)", err)
	}
}

func TestCreateOverAnExistingObjectIsAlreadyExists(t *testing.T) {
	st := memstore.New()
	a, b := newLock(t, st, "a"), newLock(t, st, "b")
	if err := a.Create(t.Context(), record("a", 0)); err != nil {
		t.Fatalf("a.Create() = %v", err)
	}
	if err := b.Create(t.Context(), record("b", 0)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("b.Create() = %v; want AlreadyExists", err)
	}
	rec, _, err := b.Get(t.Context())
	if err != nil || rec.HolderIdentity != "a" {
		t.Fatalf("Get() = %+v, %v; want a's record", rec, err)
	}
}

func TestUpdateOnAStaleVersionIsAConflict(t *testing.T) {
	st := memstore.New()
	a, b := newLock(t, st, "a"), newLock(t, st, "b")
	ctx := t.Context()
	if err := a.Create(ctx, record("a", 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, record("a", 0)); err != nil { // a renews after b read
		t.Fatalf("a.Update() = %v", err)
	}
	if err := b.Update(ctx, record("b", 1)); !apierrors.IsConflict(err) {
		t.Fatalf("b.Update() on the version it read before a renewed = %v; want Conflict", err)
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, record("b", 1)); err != nil {
		t.Fatalf("b.Update() after reading the renewal = %v", err)
	}
	if err := a.Update(ctx, record("a", 0)); !apierrors.IsConflict(err) {
		t.Fatalf("a.Update() after b took over = %v; want Conflict", err)
	}
}

func TestUpdateBeforeAnyReadIsRefused(t *testing.T) {
	l := newLock(t, memstore.New(), "a")
	err := l.Update(t.Context(), record("a", 0))
	if err == nil || !strings.Contains(err.Error(), "call Get or Create first") {
		t.Fatalf("Update() = %v; want an error saying to call Get or Create first", err)
	}
}

func TestEveryWriteHasNewBytesAndTheRecordRoundTrips(t *testing.T) {
	st := memstore.New()
	l := newLock(t, st, "a")
	ctx := t.Context()
	want := record("a", 7)
	want.PreferredHolder = "b"
	want.Strategy = "OldestEmulationVersion"
	if err := l.Create(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, raw1, err := l.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got.RenewTime.Equal(&want.RenewTime) || got.HolderIdentity != "a" || got.LeaderTransitions != 7 ||
		got.LeaseDurationSeconds != 15 || got.PreferredHolder != "b" || got.Strategy != want.Strategy {
		t.Errorf("Get() = %+v; want %+v", got, want)
	}
	if err := l.Update(ctx, want); err != nil { // the very same record again
		t.Fatal(err)
	}
	_, raw2, err := l.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(raw1, raw2) {
		t.Errorf("two writes of the same record gave the same bytes %s: client-go would not see the second as a renewal", raw1)
	}
}

func TestGetRefusesWhatIsNotALockRecord(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"not JSON", "hello", "not a k8slock record"},
		{"an s3lect lockfile", `{"leader":"a","term":3,"ttl":15000}`, `its lock field is ""`},
		{"another format", `{"lock":"k8slock/v9"}`, `its lock field is "k8slock/v9"`},
		{"negative lease", `{"lock":"k8slock/v1","leaseDurationSeconds":-1}`, "may not be negative"},
		{"too large", `{"lock":"k8slock/v1","x":"` + strings.Repeat("x", store.MaxObjectSize) + `"}`, "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			st.Set(key, []byte(tc.data))
			l := newLock(t, st, "a")
			_, _, err := l.Get(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), key) || apierrors.IsNotFound(err) {
				t.Fatalf("Get() = %v; want an error naming %q and containing %q, not NotFound", err, key, tc.want)
			}
		})
	}
}

func TestStoreErrorsAreNotAPIErrors(t *testing.T) {
	fs := faultstore.New(memstore.New())
	l := newLock(t, fs, "a")
	fs.FailNext(1)
	_, _, err := l.Get(t.Context())
	if err == nil || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), key) {
		t.Fatalf("Get() on a failing store = %v; want an error naming the key that is not NotFound", err)
	}
}

func TestAHungStoreCallEndsAtCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New())
		l, err := New(Config{Store: fs, Key: key, Identity: "a", CallTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		fs.Stall()
		start := time.Now()
		_, _, err = l.Get(context.Background()) // client-go's acquire loop passes no deadline
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Fatalf("Get() on a hung store = %v after %v; want a deadline error after 3s", err, time.Since(start))
		}
		fs.Unstall()
	})
}

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(obj runtime.Object, eventType, reason, message string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := obj.(*corev1.Pod)
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", pod.Name, eventType, reason, fmt.Sprintf(message, args...)))
}

func TestRecordEventGoesToTheRecorderAboutTheObject(t *testing.T) {
	rec := &recorder{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ctl-0", Namespace: "ops"}}
	l, err := New(Config{Store: memstore.New(), Key: key, Identity: "ctl-0", EventRecorder: rec, EventObject: pod})
	if err != nil {
		t.Fatal(err)
	}
	l.RecordEvent("became leader")
	want := "ctl-0 Normal LeaderElection: ctl-0 became leader"
	if len(rec.events) != 1 || rec.events[0] != want {
		t.Fatalf("events = %q; want [%q]", rec.events, want)
	}
	newLock(t, memstore.New(), "b").RecordEvent("stopped leading") // no recorder: nothing, no panic
}

func TestLeaseContextEndsANinthBeforeTheLeaseFromTheWritesStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a, b := newLock(t, st, "a"), newLock(t, st, "b")
		ctx := context.Background()
		if c := a.LeaseContext(ctx); c.Err() == nil {
			t.Fatal("LeaseContext before any write is live; want it ended")
		}
		start := time.Now()
		if err := a.Create(ctx, record("a", 0)); err != nil {
			t.Fatal(err)
		}
		lc := a.LeaseContext(ctx)
		time.Sleep(5 * time.Second)
		if err := a.Update(ctx, record("a", 0)); err != nil { // renewal at 5s: the bound moves to 5 + 13.5
			t.Fatal(err)
		}
		<-lc.Done()
		if got, want := time.Since(start), 5*time.Second+13500*time.Millisecond; got != want {
			t.Errorf("LeaseContext ended %v after the first write; want %v (renewal at 5s + 15s - 1.5s)", got, want)
		}
		if !errors.Is(context.Cause(lc), ErrLeaseEnded) {
			t.Errorf("Cause = %v; want ErrLeaseEnded", context.Cause(lc))
		}
		if a.Term() != 1 {
			t.Errorf("Term() = %d; want 1 (LeaderTransitions 0 + 1)", a.Term())
		}

		// A renewal brings a new context; a takeover seen by Get ends it at once.
		if err := a.Update(ctx, record("a", 0)); err != nil {
			t.Fatal(err)
		}
		lc = a.LeaseContext(ctx)
		if _, _, err := b.Get(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Update(ctx, record("b", 1)); err != nil {
			t.Fatal(err)
		}
		if lc.Err() != nil {
			t.Fatal("a's LeaseContext ended before a saw the takeover: nothing told it")
		}
		if _, _, err := a.Get(ctx); err != nil {
			t.Fatal(err)
		}
		if lc.Err() == nil {
			t.Fatal("a's LeaseContext is live after a read b's record")
		}
		if b.Term() != 2 {
			t.Errorf("b.Term() = %d; want 2", b.Term())
		}

		// A release (client-go writes an empty holder) ends it at once.
		lb := b.LeaseContext(ctx)
		release := record("", 1)
		release.LeaseDurationSeconds = 1
		if err := b.Update(ctx, release); err != nil {
			t.Fatal(err)
		}
		if lb.Err() == nil {
			t.Fatal("b's LeaseContext is live after b released")
		}
	})
}

// elector runs client-go's LeaderElector on a Lock and records when it
// led, in virtual time.
type elector struct {
	lock           *Lock
	store          *faultstore.Store
	cancel         context.CancelFunc
	done           chan struct{}
	mu             sync.Mutex
	started, ended time.Time
	term           uint64
}

// get returns when e started and stopped leading, and its term.
func (e *elector) get() (started, ended time.Time, term uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.started, e.ended, e.term
}

func runElector(t *testing.T, st store.Store, id string, release bool) *elector {
	t.Helper()
	fs := faultstore.New(st)
	e := &elector{lock: newLock(t, fs, id), store: fs, done: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: e.lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: release,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				e.mu.Lock()
				e.started, e.term = time.Now(), e.lock.Term()
				e.mu.Unlock()
				<-ctx.Done()
			},
			OnStoppedLeading: func() {
				e.mu.Lock()
				e.ended = time.Now()
				e.mu.Unlock()
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		le.Run(ctx)
	}()
	return e
}

func TestClientGoTakesOverALeaderCutFromTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := runElector(t, st, "a", false)
		time.Sleep(time.Second)
		b := runElector(t, st, "b", false)
		time.Sleep(30 * time.Second)
		aStarted, _, aTerm := a.get()
		if bStarted, _, _ := b.get(); aStarted.IsZero() || !bStarted.IsZero() {
			t.Fatalf("a started %v, b started %v; want only a leading", aStarted, bStarted)
		}
		cut := time.Now()
		a.store.Cut()
		time.Sleep(40 * time.Second)
		_, aEnded, _ := a.get()
		bStarted, _, bTerm := b.get()
		switch {
		case aEnded.IsZero():
			t.Fatal("a never stopped leading after its store was cut")
		case bStarted.IsZero():
			t.Fatal("b never took over")
		case !aEnded.Before(bStarted):
			t.Errorf("a stopped leading at %v, after b started at %v", aEnded.Sub(cut), bStarted.Sub(cut))
		case bTerm <= aTerm:
			t.Errorf("b's term %d is not above a's %d", bTerm, aTerm)
		}
		// a's renewals fail for RenewDeadline, from RetryPeriod after its
		// last success. b reads every RetryPeriod plus a random jitter of
		// up to 1.2 of it (client-go's JitterFactor): it sees a's last
		// renewal (at most RetryPeriod before the cut) within 4.4s, and
		// takes over at its first attempt LeaseDuration after that.
		if d := aEnded.Sub(cut); d > 12*time.Second {
			t.Errorf("a stopped leading %v after the cut; want at most RetryPeriod + RenewDeadline (12s)", d)
		}
		if d := bStarted.Sub(cut); d < 13*time.Second || d > 15*time.Second+2*4400*time.Millisecond {
			t.Errorf("b took over %v after the cut; want between LeaseDuration - RetryPeriod (13s) and LeaseDuration + 2 × 2.2 RetryPeriod (23.8s)", d)
		}
		a.cancel()
		b.cancel()
		<-a.done
		<-b.done
	})
}

func TestReleaseOnCancelHandsOverWithinAJitteredRetryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := runElector(t, st, "a", true)
		time.Sleep(time.Second)
		b := runElector(t, st, "b", false)
		time.Sleep(30 * time.Second)
		stop := time.Now()
		a.cancel()
		<-a.done
		time.Sleep(10 * time.Second)
		_, _, aTerm := a.get()
		bStarted, _, bTerm := b.get()
		if bStarted.IsZero() {
			t.Fatal("b never took over after a released")
		}
		if d := bStarted.Sub(stop); d > 4400*time.Millisecond {
			t.Errorf("b took over %v after a released; want at most a jittered RetryPeriod (2.2 × 2s)", d)
		}
		if bTerm != aTerm+1 {
			t.Errorf("b's term %d; want a's %d + 1", bTerm, aTerm)
		}
		b.cancel()
		<-b.done
	})
}

// counting counts a store's calls.
type counting struct {
	store.Store
	mu         sync.Mutex
	gets, puts int
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, key)
}

func (c *counting) counts() (gets, puts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets, c.puts
}

func (c *counting) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Store.PutIfMatch(ctx, key, data, etag)
}

// TestStoreCallsPerHourAtClientGoDefaults counts the store calls of a
// leader and a candidate over a virtual hour at client-go's defaults
// (15s, 10s, 2s), and prints them: docs/kubernetes.md prices them.
func TestStoreCallsPerHourAtClientGoDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		a, b := &counting{Store: mem}, &counting{Store: mem}
		ea := runElector(t, a, "a", false)
		time.Sleep(time.Second)
		eb := runElector(t, b, "b", false)
		time.Sleep(time.Hour)
		aGets, aPuts := a.counts()
		bGets, bPuts := b.counts()
		t.Logf("leader:    GET %4d/h  PUT %4d/h", aGets, aPuts)
		t.Logf("candidate: GET %4d/h  PUT %4d/h", bGets, bPuts)
		// The leader renews every RetryPeriod with a write alone (its
		// fast path); a candidate reads every RetryPeriod plus a jitter
		// of up to 1.2 of it: 1.6 on average, 1,125 reads an hour.
		if aGets > 2 || aPuts < 1795 || aPuts > 1805 {
			t.Errorf("leader: %d GET and %d PUT an hour; want none and one PUT per 2s (1,800)", aGets, aPuts)
		}
		if bPuts != 0 || bGets < 1000 || bGets > 1250 {
			t.Errorf("candidate: %d GET and %d PUT an hour; want no PUT and about 1,125 GET", bGets, bPuts)
		}
		ea.cancel()
		eb.cancel()
		<-ea.done
		<-eb.done
	})
}
