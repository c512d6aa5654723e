package gcsstore

// SetListPage sets how many objects a page of a listing holds, so that
// tests cross pages with few objects (tests only).
func SetListPage(s *Store, n int) { s.listPage = n }
