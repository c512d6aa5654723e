package s3store

import "time"

// ExpireDenial ends the backoff of a remembered denial at once, as if it
// had passed (tests only).
func ExpireDenial(s *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAt = time.Time{}
}
