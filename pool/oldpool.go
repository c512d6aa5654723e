package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// refuseOldPool lists the Prefix and returns an error matching
// ErrOldPool if it holds an object of the pool before the coordinator:
// its member list, a session ("sessions/<ID>.json") or a shard record
// ("shards/<name>.json"). The two pools' keys do not collide, so an old
// worker would lead its shards beside the new pool's owners: the
// upgrade is a stop of every old worker first. A store that fails the
// check is tried again every FrequentInterval, with a warning each time,
// until ctx ends: a worker started while the store is slow or away
// joins once it answers.
func (p *Pool) refuseOldPool(ctx context.Context) error {
	for {
		err := p.checkOldPool(ctx)
		if err == nil || errors.Is(err, ErrOldPool) || errors.Is(err, errors.ErrUnsupported) {
			return err
		}
		p.log.Warn("cannot check the store for the old pool's objects; trying again", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool: Run's context ended before the store answered: %w", err)
		case <-time.After(p.cfg.FrequentInterval):
		}
	}
}

func (p *Pool) checkOldPool(ctx context.Context) error {
	entries, err := p.calls.List(ctx, p.cfg.Prefix)
	if err != nil {
		return fmt.Errorf("pool: list %q for the old pool's objects: %w", p.cfg.Prefix, err)
	}
	for _, e := range entries {
		if rel := strings.TrimPrefix(e.Key, p.cfg.Prefix); oldKey(rel) {
			return p.oldPoolError(e.Key)
		}
	}
	// A listing may miss a recent key; a read does not. Every old worker
	// writes the member list.
	key := p.cfg.Prefix + "members.json"
	if _, etag, err := p.calls.Get(ctx, key); err != nil {
		return fmt.Errorf("pool: read %q: %w", key, err)
	} else if etag != "" {
		return p.oldPoolError(key)
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
