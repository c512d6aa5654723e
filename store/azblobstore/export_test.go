package azblobstore

// URL returns the container URL of s's client, for tests.
func URL(s *Store) string { return s.client.URL() }

// Names returns the account and container that a container URL names.
func Names(containerURL string) (account, container string) { return names(containerURL) }
