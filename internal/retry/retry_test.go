package retry

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

func TestScheduleIsFixed(t *testing.T) {
	b := Schedule()
	want := []time.Duration{100 * time.Millisecond, time.Second, backoff.Stop}
	for i, w := range want {
		if got := b.NextBackOff(); got != w {
			t.Fatalf("NextBackOff() #%d = %v; want %v", i+1, got, w)
		}
	}
}
