package pool

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// keyFaults is one worker's view of the store, listing (store.Lister),
// with faults on one shard record's key: lose lands every write of it,
// loses the reply and sets blind; blind fails every read of it (the
// retry that would read the write back fails too); refuse fails every
// write of it before it reaches the store. writes notes the claims and
// releases of the key sent through it.
type keyFaults struct {
	store.Store
	key                 string
	lose, blind, refuse atomic.Bool

	mu     sync.Mutex
	writes []keyWrite
}

type keyWrite struct {
	owner  string // "" for a release
	term   uint64
	landed bool
}

func (k *keyFaults) Get(ctx context.Context, key string) ([]byte, string, error) {
	if key == k.key && k.blind.Load() {
		return nil, "", errFault
	}
	return k.Store.Get(ctx, key)
}

func (k *keyFaults) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if key != k.key {
		return k.Store.PutIfMatch(ctx, key, data, etag)
	}
	w := keyWrite{}
	if rec, err := parseShard(data); err == nil {
		w.owner, w.term = rec.Owner, rec.Term
	}
	tag, err := "", error(errFault)
	switch {
	case k.lose.Load():
		if _, perr := k.Store.PutIfMatch(ctx, key, data, etag); perr == nil {
			w.landed = true
		}
		k.blind.Store(true)
	case k.refuse.Load():
	default:
		tag, err = k.Store.PutIfMatch(ctx, key, data, etag)
		w.landed = err == nil
	}
	k.mu.Lock()
	k.writes = append(k.writes, w)
	k.mu.Unlock()
	return tag, err
}

func (k *keyFaults) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	return k.Store.(store.Lister).List(ctx, prefix)
}

// claims returns the terms of owner's claims of the key sent through k,
// landed and not.
func (k *keyFaults) claims(owner string) (landed, lost []uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.writes {
		switch {
		case w.owner != owner:
		case w.landed:
			landed = append(landed, w.term)
		default:
			lost = append(lost, w.term)
		}
	}
	return landed, lost
}

// strayPool runs workers over one memstore, each through a keyFaults of
// its own, and notes when each leadership of a shard began and ended.
type strayPool struct {
	t      *testing.T
	mem    *memstore.Store
	shards []string
	key    string // the faulted shard record's key

	mu     sync.Mutex
	led    map[string][]span // by shard
	stores map[string]*keyFaults
	stops  []func()
}

type span struct {
	worker     string
	from, till time.Time // till zero while it runs
}

func newStrayPool(t *testing.T, shards []string, faulted string) *strayPool {
	return &strayPool{t: t, mem: memstore.New(), shards: shards, key: "pool/shards/" + faulted + ".json",
		led: map[string][]span{}, stores: map[string]*keyFaults{}}
}

func (sp *strayPool) start(id string) *keyFaults {
	kf := &keyFaults{Store: &crashStore{Store: sp.mem}, key: sp.key}
	sp.mu.Lock()
	sp.stores[id] = kf
	sp.mu.Unlock()
	p, err := New(Config{Store: kf, Prefix: "pool/", ID: id, Shards: sp.shards, Logger: quiet,
		Work: func(ctx context.Context, shard string, _ *s3lect.Leadership) {
			sp.mu.Lock()
			sp.led[shard] = append(sp.led[shard], span{worker: id, from: time.Now()})
			k := len(sp.led[shard]) - 1
			sp.mu.Unlock()
			<-ctx.Done()
			sp.mu.Lock()
			sp.led[shard][k].till = time.Now()
			sp.mu.Unlock()
		}})
	if err != nil {
		sp.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	sp.stops = append(sp.stops, func() { cancel(); <-done })
	return kf
}

func (sp *strayPool) stop() {
	for _, kf := range sp.stores {
		kf.lose.Store(false)
		kf.blind.Store(false)
		kf.refuse.Store(false)
	}
	for _, s := range sp.stops {
		s()
	}
}

// leaders returns the workers leading shard now.
func (sp *strayPool) leaders(shard string) []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []string
	for _, s := range sp.led[shard] {
		if s.till.IsZero() {
			out = append(out, s.worker)
		}
	}
	return out
}

// ledFrom returns the first leadership of shard begun at or after at.
func (sp *strayPool) ledFrom(shard string, at time.Time) (span, bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, s := range sp.led[shard] {
		if !s.from.Before(at) {
			return s, true
		}
	}
	return span{}, false
}

// lastOrder returns the shard a worker leading all of shards hands over
// first: the last in the order every worker shares.
func lastOrder(shards []string) string {
	o := orderOf(shards)
	return o.names[o.order[len(o.order)-1]]
}

// TestSecondStrayClaimIsReleasedPromptly: a worker V claims a shard and
// its write lands, but every reply is lost and the reads that could
// adopt it fail (stray 1, at term t); then reads of the record come back
// but its writes are refused, so that V's release of stray 1 fails and
// V's new claim of the shard (its record names V's session: term t+1)
// fails too (stray 2, which never landed). When the faults stop, V
// releases the record at its next tick, and the worker whose share the
// shard is leads it: within 1.5 × FrequentInterval when V is the worker
// that ends at its share as the other joins (incumbent: the other takes
// the shard; V's next tick, and the other's look half an interval after
// it), within a FrequentInterval when V is the joiner, below its share
// (it releases and claims again at its next tick). The join and the end
// of the faults come at eight phases of the intervals. (Review rev28b's
// "SecondStrayOverwritesTheFirst": 17 s with only the last stray kept,
// 12 s with every stray kept. Here, before the fix, up to 18.4 s: the
// other worker, ticking at the same instant as V, read the record just
// before V's release and set the shard aside until V's session could be
// over, a LeaderTimeout; -sim.mutate=unlistedwaits.)
func TestSecondStrayClaimIsReleasedPromptly(t *testing.T) {
	defer setMutation(t)()
	shards := []string{"s0", "s1", "s2"}
	handed := lastOrder(shards)
	for _, victim := range []string{"incumbent", "joiner"} {
		for phase := range 8 {
			t.Run(fmt.Sprintf("%s/phase%d", victim, phase), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					sp := newStrayPool(t, shards, handed)
					defer sp.stop()
					other, v := "w2", "w1"
					if victim == "joiner" {
						other, v = "w1", "w2"
					}
					// The pool's first worker; with the joiner the victim,
					// it leads all three first and hands one over.
					first := sp.start("w1")
					if victim == "incumbent" {
						first.lose.Store(true)
					}
					time.Sleep(2 * testLT)
					var vs *keyFaults
					if victim == "joiner" {
						untilSlot(time.Duration(phase) * testFI / 8)
						vs = sp.start("w2")
						vs.lose.Store(true)
					} else {
						vs = first
					}
					// Stray 1: a claim of the shard landed unseen.
					deadline := time.Now().Add(4 * testLT)
					for {
						if landed, _ := vs.claims(v); len(landed) > 0 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s made no claim of %s that landed within 4 × LeaderTimeout", v, handed)
						}
						time.Sleep(testFI / 8)
					}
					time.Sleep(testFI / 4)
					// Stray 2: the record can be read, but no write of it lands.
					vs.lose.Store(false)
					vs.refuse.Store(true)
					vs.blind.Store(false)
					deadline = time.Now().Add(4 * testLT)
					for {
						landed, lost := vs.claims(v)
						if len(lost) > 0 && lost[len(lost)-1] > landed[len(landed)-1] {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s made no second claim of %s within 4 × LeaderTimeout (landed %v, lost %v)", v, handed, landed, lost)
						}
						time.Sleep(testFI / 8)
					}
					if victim == "incumbent" {
						untilSlot(time.Duration(phase) * testFI / 8)
						sp.start("w2")
						time.Sleep(testFI + time.Duration(phase)*testFI/4)
					} else {
						time.Sleep(time.Duration(phase) * testFI / 4)
					}
					if l := sp.leaders(handed); len(l) != 0 {
						t.Fatalf("%s led by %v while %s's strays stand", handed, l, v)
					}
					landed, lost := vs.claims(v)
					vs.refuse.Store(false)
					end := time.Now()
					time.Sleep(4 * testLT)
					s, ok := sp.ledFrom(handed, end)
					if !ok {
						t.Fatalf("%s not led 4 × LeaderTimeout after the faults stopped (%s's claims: landed %v, lost %v)", handed, v, landed, lost)
					}
					took := s.from.Sub(end)
					t.Logf("%s led by %s %v after the faults stopped (%.2f × FrequentInterval; %s's claims: landed %v, lost %v)",
						handed, s.worker, took, float64(took)/float64(testFI), v, landed, lost)
					want := other
					if victim == "joiner" {
						want = v
					}
					if s.worker != want {
						t.Errorf("%s led by %s; want %s, below its share", handed, s.worker, want)
					}
					// The incumbent releases at its next tick, within an
					// interval; the joiner's look at that instant may read
					// the record just before, and looks again half an
					// interval on. The joiner, victim, releases and claims
					// again in one tick.
					bound, says := 3*testFI/2, "1.5 × FrequentInterval"
					if victim == "joiner" {
						bound, says = testFI, "a FrequentInterval"
					}
					if took > bound {
						t.Errorf("%s led %v after the faults stopped; want within %s", handed, took, says)
					}
				})
			})
		}
	}
}
