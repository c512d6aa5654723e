//go:build !linux

package lease

import "time"

// hostSlept reports nothing: this system gives no clock that counts
// suspends beside the monotonic one that Go reads (Clock's doc).
func hostSlept() (time.Duration, bool) { return 0, false }
