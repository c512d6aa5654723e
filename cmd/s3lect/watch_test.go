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
			gap, ok := unseenTerms(tc.last, watchLine{Time: at, Leader: "b", Term: tc.term})
			text := gap.text()
			if ok != (tc.want != "") || ok && !strings.HasPrefix(text, tc.want) {
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

// TestWatcherPrintsEveryTerm feeds the watcher states as watch reads them
// and checks every term appears, in order: a leadership that began and
// ended between two reads shows as a vacancy of a higher term (the same
// "none" to the elector, which announces changes of leader only), and
// the terms never seen at all are named.
func TestWatcherPrintsEveryTerm(t *testing.T) {
	lead := func(id string, term uint64) watchLine { return watchLine{Leader: id, Term: term} }
	released := func(id string, term uint64) watchLine {
		return watchLine{Vacant: "released", Was: id, Term: term}
	}
	fail := func(msg, cause string) watchLine { return watchLine{Err: msg, cause: cause} }
	cases := []struct {
		name   string
		states []watchLine
		want   []string
	}{
		{"leader, then its release", []watchLine{lead("a", 1), lead("a", 1), released("a", 1), released("a", 1)},
			[]string{"leader: a term 1", "leader: none (released by a, term 1)"}},
		{"a leadership between two reads of the vacancy",
			[]watchLine{released("a", 2), released("b3", 4), released("b3", 4), lead("c", 5)},
			[]string{"leader: none (released by a, term 2)", "term 3 not seen", "leader: none (released by b3, term 4)", "leader: c term 5"}},
		{"terms skipped between leaders", []watchLine{lead("a", 1), lead("d", 4)},
			[]string{"leader: a term 1", "terms 2 to 3 not seen", "leader: d term 4"}},
		{"one failure repeated, then another", []watchLine{lead("a", 1), fail("x req-1", "x"), fail("x req-2", "x"), fail("y", "y"), lead("a", 1)},
			[]string{"leader: a term 1", "store error: x req-1", "store error: y", "leader: a term 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w watcher
			var got []string
			for _, l := range tc.states {
				for _, line := range w.see(l) {
					text := line.text()
					if line.Unseen {
						text = text[:strings.Index(text, " (")]
					}
					got = append(got, text)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("watch printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
