package next

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// SetShards changes the shards the pool runs, while it runs: the
// coordinator, if this worker is it, grants the new shards and revokes
// those no longer named (their Work's context ends, as on a move), each
// page as it would after a join or a leave. Call it on every worker with
// the same names: the coordinator decides by its own worker's list, and
// the next coordinator by its own.
func (p *Pool) SetShards(shards []string) error {
	if len(shards) == 0 {
		return errors.New("pool: SetShards: no shard named; name at least one")
	}
	seen := map[string]bool{}
	for _, s := range shards {
		if s == "" || seen[s] || !utf8.ValidString(s) {
			return fmt.Errorf("pool: SetShards: shard name %q is empty, repeated or not UTF-8", s)
		}
		seen[s] = true
	}
	p.mu.Lock()
	p.shards = slices.Clone(shards)
	p.mu.Unlock()
	select {
	case p.reshard <- struct{}{}:
	default: // one is pending: it reads the list when it runs
	}
	return nil
}

// shardList is the shards as last set.
func (p *Pool) shardList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shards
}
