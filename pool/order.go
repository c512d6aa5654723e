package pool

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"
)

// shardOrder is what a worker derives from Config.Shards alone: the names
// (a copy: a caller that changes its slice after New changes nothing), the
// order every worker of the pool shares (shardHash), and an index by
// name, 4 bytes a shard each. It never changes once made, so the Pools of
// one process that name the same shards share one (orderOf): a test, or
// a process that runs several workers of a pool, keeps it once instead of
// once per worker.
type shardOrder struct {
	names  []string
	order  []uint32 // indexes into names, in the shared order (shardHash)
	byName []uint32 // indexes into names, sorted by name (core.index)
}

func newShardOrder(shards []string) *shardOrder {
	o := &shardOrder{names: slices.Clone(shards), order: make([]uint32, len(shards))}
	hashes := make([]uint64, len(shards))
	for i, name := range o.names {
		o.order[i], hashes[i] = uint32(i), shardHash(name)
	}
	slices.SortFunc(o.order, func(a, b uint32) int { return cmp.Compare(hashes[a], hashes[b]) })
	o.byName = slices.Clone(o.order)
	slices.SortFunc(o.byName, func(a, b uint32) int { return strings.Compare(o.names[a], o.names[b]) })
	return o
}

// orders holds the shard orders in use in this process, by the SHA-256 of
// their names, weakly: an order no Pool holds any more is collected, and
// its entry removed.
var orders struct {
	mu sync.Mutex
	m  map[[32]byte]weak.Pointer[shardOrder]
}

// orderOf returns the shard order of shards, shared with the other Pools
// of this process that name the same shards in the same order.
func orderOf(shards []string) *shardOrder {
	h := sha256.New()
	var n [8]byte
	for _, s := range shards {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var key [32]byte
	h.Sum(key[:0])
	orders.mu.Lock()
	defer orders.mu.Unlock()
	if o := orders.m[key].Value(); o != nil && slices.Equal(o.names, shards) {
		return o
	}
	o := newShardOrder(shards)
	if orders.m == nil {
		orders.m = map[[32]byte]weak.Pointer[shardOrder]{}
	}
	orders.m[key] = weak.Make(o)
	runtime.AddCleanup(o, func(key [32]byte) {
		orders.mu.Lock()
		defer orders.mu.Unlock()
		if orders.m[key].Value() == nil {
			delete(orders.m, key)
		}
	}, key)
	return o
}
