package next

// Coordinating reports whether this worker coordinates the pool now (an
// era of its own is running). Package pool's Stats reads it.
func (p *Pool) Coordinating() bool { return p.coordinating.Load() }
