package azblobstore

// URL returns the container URL of s's client, for tests.
func URL(s *Store) string { return s.client.URL() }
