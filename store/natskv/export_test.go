package natskv

import "time"

// SetListStall sets how long List waits for a watch's next key, until the
// test ends.
func SetListStall(cleanup func(func()), d time.Duration) {
	old := listStall
	listStall = d
	cleanup(func() { listStall = old })
}
