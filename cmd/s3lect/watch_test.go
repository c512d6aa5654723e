package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store/memstore"
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

// TestWatchNamesTheNewLeaderAfterACrash: after a crash, the watcher's
// elector says nobody leads about when the next leader takes over, and
// watch reads the lockfile to say why. The record it finds may be the
// new leader's, of a higher term than any printed: that is a leader, never
// an expired lease (three runners at -infrequent 5s, kill -9 of the
// leader's: watch printed "leader: none (r2's lease (term 2) expired
// ...)" 0.7 s after r2 began to lead, and "leader: r2 term 2" 2 s later).
func TestWatchNamesTheNewLeaderAfterACrash(t *testing.T) {
	at := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)
	held := func(id string, term uint64) s3lect.Record {
		return s3lect.Record{LeaderID: id, Term: term, LastUpdated: at}
	}
	for _, tc := range []struct {
		name      string
		printed   []watchLine // what watch printed before
		rec       s3lect.Record
		found     bool
		err       error
		expiredOK bool   // the elector's change (true) or watch's own read while vacant
		want      string // "" for no line
	}{
		{"the next leader took over", []watchLine{{Leader: "r1", Term: 1}}, held("r2", 2), true, nil, true, "leader: r2 term 2"},
		{"the next leader, seen by watch's read", []watchLine{{Vacant: "released", Was: "r1", Term: 1}}, held("r2", 2), true, nil, false, "leader: r2 term 2"},
		{"the lease expired", []watchLine{{Leader: "r1", Term: 1}}, held("r1", 1), true, nil, true, "leader: none (r1's lease (term 1) expired: its record was not renewed in time)"},
		{"an expired lease at start", nil, held("r1", 4), true, nil, true, "leader: none (r1's lease (term 4) expired: its record was not renewed in time)"},
		{"watch's read of the same record", []watchLine{{Leader: "r1", Term: 1}}, held("r1", 1), true, nil, false, ""},
		{"released", []watchLine{{Leader: "r1", Term: 1}}, s3lect.Record{LeaderID: "r1", Term: 1}, true, nil, true, "leader: none (released by r1, term 1)"},
		{"absent", nil, s3lect.Record{}, false, nil, true, "leader: none (no lockfile)"},
		{"unreadable", nil, s3lect.Record{}, true, errors.New("bad json"), true, "leader: none (the lockfile is unreadable; it is taken over after LeaderTimeout)"},
		{"the read failed", nil, s3lect.Record{}, false, errors.New("timeout"), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w watcher
			for _, l := range tc.printed {
				w.see(l)
			}
			l, ok := w.vacancy(watchLine{Time: at}, tc.rec, tc.found, tc.err, tc.expiredOK)
			got := ""
			if ok {
				got = l.text()
			}
			if got != tc.want {
				t.Errorf("vacancy(%+v) = %q; want %q", tc.rec, got, tc.want)
			}
		})
	}
}

// TestWatchReadsEveryFrequentInterval: watch reads the lockfile every
// -frequent whatever -infrequent says, and says so when -infrequent asks
// for less: at a stable follower's pace, leaderships shorter than its
// read interval would be missed (watch -json -frequent 500ms -infrequent
// 10s printed terms 1 and 2 of five).
func TestWatchReadsEveryFrequentInterval(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     time.Duration
		wantNote bool
	}{
		{[]string{"-store", "s3://b/k"}, s3lect.DefaultFrequentInterval, false},
		{[]string{"-store", "s3://b/k", "-frequent", "500ms", "-infrequent", "10s", "-timeout", "1.5s"}, 500 * time.Millisecond, true},
		{[]string{"-store", "s3://b/k", "-infrequent", "30s"}, s3lect.DefaultFrequentInterval, true},
		{[]string{"-store", "s3://b/k", "-frequent", "1s", "-infrequent", "1s", "-timeout", "3s"}, time.Second, false},
	} {
		var stderr strings.Builder
		c, _, ok := parseWatch(tc.args, &stderr)
		if !ok {
			t.Fatalf("parseWatch(%q): %s", tc.args, stderr.String())
		}
		cfg := c.electorConfig(memstore.New(), "k")
		if cfg.InfrequentInterval != tc.want || (c.note != "") != tc.wantNote {
			t.Errorf("watch %q reads every %v when stable, note %q; want %v, a note: %v", tc.args, cfg.InfrequentInterval, c.note, tc.want, tc.wantNote)
		}
		if _, err := s3lect.New(cfg); err != nil {
			t.Errorf("watch %q: elector config refused: %v", tc.args, err)
		}
	}
}

// TestWatchLineStamps: watch stamps its lines as run does, in UTC to the
// millisecond (it printed nanoseconds), in text and JSON.
func TestWatchLineStamps(t *testing.T) {
	at := time.Date(2026, 11, 26, 16, 0, 0, 123456789, time.FixedZone("CET", 3600))
	var out strings.Builder
	wl := &watchLoop{stdout: &out}
	wl.print(watchLine{Time: at, Leader: "a", Term: 3})
	wl.c.asJSON = true
	wl.print(watchLine{Time: at.Truncate(time.Millisecond), Leader: "a", Term: 3})
	want := "2026-11-26T15:00:00.123Z leader: a term 3\n" + `{"time":"2026-11-26T16:00:00.123+01:00","leaderID":"a","term":3}` + "\n"
	if out.String() != want {
		t.Errorf("watch printed\n%s\nwant\n%s", out.String(), want)
	}
	if l := now(); l.Location() != time.UTC || l.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("now() = %v; want UTC to the millisecond", l)
	}
}

// TestWatchPrintsEveryLeadershipWhateverInfrequent: watch -json given a
// runner's -infrequent far above -frequent still prints every leadership
// and every release, in order. Three leaderships of 2 s each, longer than
// LeaderTimeout, so that a watcher at a stable follower's pace would have
// gone to its 5 s reads: by hand, five such leaderships with -infrequent
// 10s printed term 1 alone before this fix.
func TestWatchPrintsEveryLeadershipWhateverInfrequent(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key := freshKey("cli/watch-every-term.json")
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style"}
	w := start(t, append(append([]string{"watch", "-json"}, where...), "-frequent", "200ms", "-infrequent", "5s", "-timeout", "1500ms")...)
	for _, id := range []string{"w1", "w2", "w3"} {
		r := start(t, runArgs(endpoint, bucket, key, id, []string{"-infrequent", "5s"}, []string{"sleep", "2"})...)
		if code := r.status(t); code != 0 {
			t.Fatalf("run %s exited %d\n%s", id, code, r.stderr.String())
		}
		waitFor(t, eventually, "watch to see "+id+"'s release", func() bool {
			return strings.Contains(w.stderr.String(), `"vacant":"released","was":"`+id+`"`)
		}, w)
	}
	w.cmd.Process.Signal(syscallTERM)
	w.status(t)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(w.stderr.String()), "\n") {
		var l watchLine
		if json.Unmarshal([]byte(line), &l) != nil {
			continue // the note on stderr
		}
		switch {
		case l.Leader != "" && len(got) > 0 && got[len(got)-1] == l.Leader:
			// The same runner again after its own lease lapsed (an
			// "expired" line between): a loaded machine's doing (ci12),
			// not a leadership watch missed.
		case l.Leader != "":
			got = append(got, l.Leader)
		case l.Vacant == "released":
			got = append(got, "released by "+l.Was)
		}
	}
	want := "w1, released by w1, w2, released by w2, w3, released by w3"
	if strings.Join(got, ", ") != want {
		t.Errorf("watch printed %q; want %q\n%s", strings.Join(got, ", "), want, w.stderr.String())
	}
	if !strings.Contains(w.stderr.String(), "reading every -frequent 200ms, not -infrequent 5s") {
		t.Errorf("watch did not say it reads at the frequent pace:\n%s", w.stderr.String())
	}
}
