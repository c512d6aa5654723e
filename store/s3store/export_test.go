package s3store

import (
	"io"
	"time"
)

// ExpireDenial ends the backoff of a remembered denial at once, as if it
// had passed (tests only).
func ExpireDenial(s *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAt = time.Time{}
}

// SetSDKLog sends the SDK's log lines to w until the test ends (tests
// only).
func SetSDKLog(t interface{ Cleanup(func()) }, w io.Writer) {
	old := sdkLog
	sdkLog = w
	t.Cleanup(func() { sdkLog = old })
}

// SetListPage sets how many keys a ListObjectsV2 page holds, so that tests
// cross pages with few objects (tests only).
func SetListPage(s *Store, n int32) { s.listPage = n }
