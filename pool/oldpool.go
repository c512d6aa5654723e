package pool

import (
	"context"
	"fmt"
	"strings"

	"github.com/s3lect/s3lect/internal/lease"
)

// refuseOldPool lists the Prefix once and returns an error matching
// ErrOldPool if it holds an object of the pool before the coordinator:
// its member list, a session ("sessions/<ID>.json") or a shard record
// ("shards/<name>.json"). The two pools' keys do not collide, so an old
// worker would lead its shards beside the new pool's owners: the
// upgrade is a stop of every old worker first.
func (p *Pool) refuseOldPool(ctx context.Context) error {
	calls := lease.Calls{Store: p.cfg.Store, Timeout: p.cfg.FrequentInterval, Log: p.log,
		Count: func(string, error) { p.lists.Add(1) }}
	entries, err := calls.List(ctx, p.cfg.Prefix)
	if err != nil {
		return fmt.Errorf("pool: list %q for the old pool's objects: %w", p.cfg.Prefix, err)
	}
	for _, e := range entries {
		if rel := strings.TrimPrefix(e.Key, p.cfg.Prefix); oldKey(rel) {
			return p.oldPoolError(e.Key)
		}
	}
	return nil
}

// oldPoolError is Run's error when it finds key, an old pool's object.
func (p *Pool) oldPoolError(key string) error {
	return fmt.Errorf("%w: found %q; to upgrade, stop every worker of the old version, then delete %s, %s and %s, or give the new pool another Prefix",
		ErrOldPool, key, p.cfg.Prefix+"members.json", p.cfg.Prefix+"sessions/", p.cfg.Prefix+"shards/")
}

// oldKey reports whether rel, a key under the Prefix, is one the old
// pool wrote.
func oldKey(rel string) bool {
	if rel == "members.json" {
		return true
	}
	if id, ok := strings.CutPrefix(rel, "sessions/"); ok {
		return strings.HasSuffix(id, ".json") && !strings.Contains(id, "/")
	}
	name, ok := strings.CutPrefix(rel, "shards/")
	return ok && strings.HasSuffix(name, ".json")
}
