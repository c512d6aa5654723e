package next

// SetShards changes the shards the pool runs, while it runs (package
// pool's SetShards has checked the names): the coordinator, if this
// worker is it, grants the new shards and revokes those no longer named,
// each page as it would after a join or a leave.
func (p *Pool) SetShards(shards []string) {
	p.mu.Lock()
	p.shards = shards
	p.mu.Unlock()
	select {
	case p.reshard <- struct{}{}:
	default: // one is pending: it reads the list when it runs
	}
}

// shardList is the shards as last set.
func (p *Pool) shardList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shards
}
