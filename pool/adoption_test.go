package pool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

var errFault = errors.New("injected store error")

// faultStore is one worker's view of the shared store, with faults the
// test switches on: holdSession captures the worker's next session write,
// which lands only when land is closed, and kills the worker at once;
// failShards makes every write of a shard record fail; blind makes every
// read of blindKey fail; lose lands every write of blindKey, loses its
// reply and sets blind.
type faultStore struct {
	store.Store
	holdSession atomic.Bool
	failShards  atomic.Bool
	dead        atomic.Bool
	blind       atomic.Bool // reads of blindKey fail
	lose        atomic.Bool // writes of blindKey land, and their replies are lost
	blindKey    string
	held        chan struct{} // closed when the session write was captured
	land        chan struct{}
	wg          sync.WaitGroup
}

func (f *faultStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if f.dead.Load() {
		return nil, "", errCrashed
	}
	if f.blind.Load() && key == f.blindKey {
		return nil, "", errFault
	}
	return f.Store.Get(ctx, key)
}

func (f *faultStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if f.dead.Load() {
		return "", errCrashed
	}
	if strings.Contains(key, "/sessions/") && f.holdSession.Load() {
		f.dead.Store(true)
		close(f.held)
		f.wg.Go(func() {
			<-f.land
			f.Store.PutIfMatch(context.Background(), key, data, etag)
		})
		return "", errCrashed
	}
	if f.lose.Load() && key == f.blindKey {
		f.Store.PutIfMatch(ctx, key, data, etag)
		f.blind.Store(true) // and the reads that could find it landed fail
		return "", errFault
	}
	if strings.Contains(key, "/shards/") && f.failShards.Load() {
		return "", errFault
	}
	return f.Store.PutIfMatch(ctx, key, data, etag)
}

type started struct {
	id   string
	term uint64
	l    *s3lect.Leadership
}

// faultPools runs workers over one shared store, each on a faultStore of
// its own, and sends every leadership that starts to leads, named by
// name(worker, shard).
type faultPools struct {
	t        *testing.T
	mem      *memstore.Store
	shards   []string
	blindKey string
	name     func(worker, shard string) string
	leads    chan started
	stores   map[string]*faultStore
	cancels  []context.CancelFunc
	dones    []chan struct{}
}

func newFaultPools(t *testing.T, shards []string, name func(worker, shard string) string) *faultPools {
	return &faultPools{t: t, mem: memstore.New(), shards: shards, name: name,
		leads: make(chan started, 16), stores: map[string]*faultStore{}}
}

// start runs worker id's pool until stop.
func (fp *faultPools) start(id string) {
	fs := &faultStore{Store: fp.mem, held: make(chan struct{}), land: make(chan struct{}), blindKey: fp.blindKey}
	fp.stores[id] = fs
	p, err := New(Config{Store: fs, Prefix: "pool/", ID: id, Shards: fp.shards, Logger: quiet,
		Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
			fp.leads <- started{fp.name(id, shard), l.Term(), l}
			<-ctx.Done()
		}})
	if err != nil {
		fp.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	fp.cancels, fp.dones = append(fp.cancels, cancel), append(fp.dones, done)
}

// stop lands every write still held, then ends every pool and waits.
func (fp *faultPools) stop() {
	for _, fs := range fp.stores {
		select {
		case <-fs.land:
		default:
			close(fs.land)
		}
		fs.wg.Wait()
	}
	for _, c := range fp.cancels {
		c()
	}
	for _, d := range fp.dones {
		<-d
	}
}

// TestAdoptionNeverRepeatsATerm: a worker whose release failed, and that
// then forgot the shard because a dead worker's late-landing session
// write still listed it, must not adopt its own old claim as a new
// leadership with the same term (docs/protocol.md 10, "Terms never
// repeat").
func TestAdoptionNeverRepeatsATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := newFaultPools(t, []string{"s"}, func(worker, _ string) string { return worker })
		defer fp.stop()
		leads, stores, start := fp.leads, fp.stores, fp.start
		next := func(within time.Duration) started {
			t.Helper()
			select {
			case s := <-leads:
				return s
			case <-time.After(within):
				t.Fatalf("no leadership within %v", within)
				return started{}
			}
		}

		start("w2")
		first := next(4 * testLT)
		stores["w2"].holdSession.Store(true) // w2's next renewal is held in flight, and w2 dies
		<-stores["w2"].held

		start("w1")
		second := next(6 * testLT)
		if second.id != "w1" || second.term <= first.term {
			t.Fatalf("after w2's death: %s took term %d; want w1 above %d", second.id, second.term, first.term)
		}
		close(stores["w2"].land) // w2's last renewal, listing the shard, lands late
		time.Sleep(2 * testFI)   // w1 has seen it

		stores["w1"].failShards.Store(true)
		if err := second.l.Resign(context.Background()); err == nil {
			t.Fatalf("Resign() = nil; want the failed release's error")
		}
		time.Sleep(2 * testFI)
		stores["w1"].failShards.Store(false)

		third := next(4 * testLT)
		if third.term <= second.term {
			t.Errorf("%s led term %d after %s led term %d; a term must never be led twice", third.id, third.term, second.id, second.term)
		}
	})
}
