package pool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// SetShards changes the shards the pool runs while it runs, without a
// restart: new shards are granted and removed ones revoked (their Work's
// context ends, as on a move), the spread kept even. Call it on every
// worker with the same names (the coordinator decides by its own
// worker's list, the next coordinator by its own), and give a worker
// that starts later the same Config.Shards. The names follow
// Config.Shards' rules.
func (p *Pool) SetShards(shards []string) error {
	if err := checkShards(shards); err != nil {
		return fmt.Errorf("pool: SetShards: %w", err)
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

// checkShards returns why shards cannot be a pool's shard names, or nil.
func checkShards(shards []string) error {
	if len(shards) == 0 {
		return errors.New("no shard named; name at least one")
	}
	seen := map[string]bool{}
	for _, name := range shards {
		switch {
		case name == "":
			return errors.New("an empty shard name")
		case seen[name]:
			return fmt.Errorf("shard %q named twice", name)
		case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
			return fmt.Errorf("shard name %q must be UTF-8 without NUL bytes", name)
		}
		seen[name] = true
	}
	return nil
}

// shardList is the shards as last set.
func (p *Pool) shardList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shards
}
