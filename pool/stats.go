package pool

// Stats is a worker's view of its pool, and its counters since New.
type Stats struct {
	// Pool is the pool's Prefix, and Worker this worker's ID.
	Pool, Worker string

	// Owned is the number of shards this worker leads now.
	Owned int

	// Claims counts the leaderships this worker started: shards the
	// coordinator assigned it.
	Claims uint64
	// Releases counts the leaderships this worker ended because its page
	// no longer named them (a move to balance the pool) or Run ended.
	Releases uint64
	// Sessions counts the sessions this worker opened (more than one: a
	// session was lost, and every leadership with it).
	Sessions uint64

	// Coordinating reports that this worker coordinates the pool now, and
	// Coordinator is the term of the coordinator election in which it last
	// did (0: never).
	Coordinating bool
	Coordinator  uint64

	// Gets, Puts and Lists count the store call attempts this worker made
	// on the pool's objects (not those of the coordinator election): in
	// steady state one PUT and one GET per FrequentInterval, and on the
	// coordinator two LIST requests more (its listings of workers/ and
	// news/).
	Gets, Puts, Lists uint64
}

// Stats returns the worker's figures. It waits for nothing.
func (p *Pool) Stats() Stats {
	return Stats{Pool: p.cfg.Prefix, Worker: p.cfg.ID, Owned: int(p.owned.Load()), Claims: p.starts.Load(), Releases: p.stops.Load(),
		Sessions: p.sessions.Load(), Coordinating: p.coordinating.Load(), Coordinator: p.coordEra.Load(),
		Gets: p.gets.Load(), Puts: p.puts.Load(), Lists: p.lists.Load()}
}
