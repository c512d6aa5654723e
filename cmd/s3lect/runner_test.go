package main

import (
	"testing"
	"time"

	"github.com/s3lect/s3lect"
)

// TestWaitingSinceIsWhenTheLeadershipBegan: a waiting runner says since
// when the leader leads from the record (its last write, less how long
// the leadership had lasted then), not from when this runner first read
// it, which was up to a read interval later (3 to 5 s late at the
// defaults).
func TestWaitingSinceIsWhenTheLeadershipBegan(t *testing.T) {
	began := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		held, age time.Duration // the leadership's age at its last write, and the write's age now
		want      string
	}{
		{"a fresh write", 10 * time.Second, 0, "a leads (term 3) since about 16:00:00 (for 10s)"},
		{"a write 4s old", 10 * time.Second, 4 * time.Second, "a leads (term 3) since about 16:00:00 (for 14s)"},
		{"a long leadership", 2 * time.Hour, 29 * time.Second, "a leads (term 3) since about 16:00:00 (for 2h0m29s)"},
	} {
		rec := s3lect.Record{LeaderID: "a", Term: 3, Held: tc.held.Milliseconds(), LastUpdated: began.Add(tc.held)}
		if got := describe(rec, began.Add(tc.held+tc.age)); got != tc.want {
			t.Errorf("%s: describe() = %q; want %q", tc.name, got, tc.want)
		}
	}
}
