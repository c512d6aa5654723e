package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestUnseenTerms: watch names every term it did not see between two
// reads, in order, as a line of its own (JSON too), and prints nothing
// extra when terms follow one another or nothing was printed before.
func TestUnseenTerms(t *testing.T) {
	at := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		last, term uint64
		want       string // "" for no line
		wantJSON   string
	}{
		{"first line", 0, 7, "", ""},
		{"next term", 3, 4, "", ""},
		{"same term", 4, 4, "", ""},
		{"vacancy", 4, 0, "", ""},
		{"one skipped", 3, 5, "term 4 not seen", `{"time":"2026-11-26T16:00:00Z","leaderID":"","term":4,"unseen":true,"unseenTo":4}`},
		{"three skipped", 3, 7, "terms 4 to 6 not seen", `{"time":"2026-11-26T16:00:00Z","leaderID":"","term":4,"unseen":true,"unseenTo":6}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gap, text, ok := unseenTerms(tc.last, watchLine{Time: at, Leader: "b", Term: tc.term})
			if ok != (tc.want != "") || !strings.HasPrefix(text, tc.want) {
				t.Fatalf("unseenTerms(%d, term %d) = %q, %v; want %q", tc.last, tc.term, text, ok, tc.want)
			}
			if !ok {
				return
			}
			b, err := json.Marshal(gap)
			if err != nil || string(b) != tc.wantJSON {
				t.Errorf("JSON line = %s, %v; want %s", b, err, tc.wantJSON)
			}
		})
	}
}
