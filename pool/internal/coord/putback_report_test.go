package coord

// Peer mode's Nonce dating (pool-protocol.md 4.8) against an object put
// back to exact bytes, on a store whose ETags hash them (found by the
// fourth pool review).

import (
	"crypto/md5"
	"fmt"
	"testing"
	"time"
)

// TestPutBackToAReportedWriteIsDatedNoEarlierThanTheReport: a write of
// the session that succeeded after a report, whose own report was lost,
// is undone by putting the object back to the reported write's exact
// bytes; the read after the put-back shows the reported Nonce, and the
// wait counts from the report, before the undone write was sent. That is
// section 7's put-back exception ("bytes it saw or a report named"): two
// owners until the undone write's lease ends, within the worker's
// LeaderTimeout of the put-back. What the rule must keep: the wait counts
// from the report's arrival, never earlier, so no grant comes before a
// LeaderTimeout after the report.
//
// Schedule (core level; era 1, shards a to d, workers w1 and w2 at
// FrequentInterval 1 s, LeaderTimeout 3 s, listing every 1.5 s; ETags
// are MD5s of the bodies, as on S3): at T w1 renews (seq k) and reports
// its Nonce, and that object is backed up; at T+1 s w1 renews (seq k+1,
// a lease to T+3.7 s), its report is lost, and w1 loses the store; at
// T+1.05 s the object is put back to seq k's bytes. Measured at T = 12.3
// s: the grant at 15.31 s, w2 starting at about 15.65 s, w1 leading to
// 16.0 s (0.35 s of two owners, 2.65 s after the put-back).
func TestPutBackToAReportedWriteIsDatedNoEarlierThanTheReport(t *testing.T) {
	for _, tt := range []time.Duration{10300, 11300, 12300} {
		t.Run(fmt.Sprint(tt*time.Millisecond), func(t *testing.T) { putBackReported(t, tt*time.Millisecond, 50*time.Millisecond, true, false) })
	}
}

// TestAListingOfALaterWriteEndsAReportsDating: the same schedule with
// the put-back 450 ms after w1's last write, so that a listing shows that
// write (seq k+1) before the object is put back to seq k: the reported
// write is superseded, and the read after the put-back must not date seq
// k from the report. Before the rule (a listing at another ETag drops the
// report's Nonce, 4.8), the coordinator granted b to w2 at 15.31 s while
// w1 led it to 16.0 s.
func TestAListingOfALaterWriteEndsAReportsDating(t *testing.T) {
	putBackReported(t, 12300*time.Millisecond, 450*time.Millisecond, true, true)
}

// TestPutBackUnseenWithoutNonceIsSafe is the control of the two above at
// T = 12.3 s (no listing or read showed seq k before the put-back):
// without Nonces the coordinator's first sight of the put-back bytes is
// after the put-back, and nothing is granted while w1 leads.
func TestPutBackUnseenWithoutNonceIsSafe(t *testing.T) {
	for _, delay := range []time.Duration{50 * time.Millisecond, 450 * time.Millisecond} {
		t.Run(fmt.Sprint(delay), func(t *testing.T) { putBackReported(t, 12300*time.Millisecond, delay, false, true) })
	}
}

// putBackReported runs the schedule. strict: no grant of w1's shards
// while w1 leads them; otherwise (the stated exception) none before a
// LeaderTimeout after the report at T.
func putBackReported(t *testing.T, T, delay time.Duration, nonces, strict bool) {
	const fi, lt = time.Second, 3 * time.Second
	c := NewCoordinator(CoordConfig{Shards: []string{"a", "b", "c", "d"}, FrequentInterval: fi, LeaderTimeout: lt, Mark: "m", ListEvery: lt / 2}, 1)
	type wk struct {
		s       Session
		etag    string
		sent    time.Duration
		page    Page
		cut     bool
		renewAt time.Duration
	}
	md5tag := func(b []byte) string { return fmt.Sprintf("%x", md5.Sum(b)) }
	ws := map[string]*wk{}
	for i, id := range []string{"w1", "w2"} {
		s := Session{V: wireVersion, ID: id, Session: "S" + id, Seq: 1, TTL: 3000, Leads: map[string]uint64{}}
		ws[id] = &wk{s: s, etag: md5tag(Marshal(s)), renewAt: time.Duration(300*(i+1)) * time.Millisecond}
	}
	pages := map[string][]byte{}
	pageTag := map[string]string{}
	renew := func(now time.Duration, w *wk) {
		s := w.s
		s.Seq++
		if w.s.Applied.Less(w.page.Ver) && w.page.Session == s.Session {
			s.Applied, s.AppliedBy, s.Leads = w.page.Ver, w.page.By, w.page.Shards
		}
		if nonces {
			s.Nonce = fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("secret-%s/%d", s.Session, s.Seq))))[:16]
		}
		w.s, w.etag, w.sent = s, md5tag(Marshal(s)), now
	}
	var backup Session
	var backupTag string
	seenBackup := false  // a listing or read of the coordinator showed the backup's bytes before the put-back
	listedLater := false // a listing showed w1's undone write before the put-back
	leadsAtCut := map[string]uint64{}
	var queue []Effect
	queue = append(queue, c.Begin(at(0))...)
	for d := time.Duration(0); d < 20*time.Second; d += 10 * time.Millisecond {
		now := at(d)
		for _, id := range []string{"w1", "w2"} {
			w := ws[id]
			if d == w.renewAt && !w.cut {
				renew(d, w)
				w.renewAt += fi
				switch {
				case id == "w1" && d == T:
					backup, backupTag = w.s, w.etag
					queue = append(queue, c.Reported(now, id, Entry{Session: w.etag, Nonce: w.s.Nonce})...)
				case id == "w1" && d == T+fi:
					w.cut = true // its report is lost; then it loses the store
					leadsAtCut = w.s.Leads
				default:
					queue = append(queue, c.Reported(now, id, Entry{Session: w.etag, Nonce: w.s.Nonce})...)
				}
			}
		}
		if d == T+fi+delay {
			ws["w1"].s, ws["w1"].etag = backup, backupTag // the operator's restore
			t.Logf("t=%v: w1's object put back to seq %d (w1's last write, seq %d, sent at %v, leads %v to %v); the coordinator saw those bytes before: %v",
				d, backup.Seq, backup.Seq+1, T+fi, leadsAtCut, T+fi+lt-lt/10, seenBackup)
		}
		fx := append(queue, c.Tick(now)...)
		queue = nil
		for _, e := range fx {
			switch e.Op {
			case OpStepDown:
				t.Fatalf("t=%v: stepped down: %v", d, e.Err)
			case OpList:
				if d > T && d < T+fi+delay && ws["w1"].etag == backupTag {
					seenBackup = true
				}
				if d >= T+fi && d < T+fi+delay {
					listedLater = true
				}
				queue = append(queue, c.Listed(now, map[string]Entry{"w1": {Session: ws["w1"].etag}, "w2": {Session: ws["w2"].etag}}, nil)...)
			case OpGetSession:
				if e.Key == "w1" && d > T && d < T+fi+delay && ws["w1"].etag == backupTag {
					seenBackup = true
				}
				queue = append(queue, c.SessionRead(now, e.Key, Marshal(ws[e.Key].s), ws[e.Key].etag, nil)...)
			case OpGetPage:
				queue = append(queue, c.PageRead(now, e.Key, pages[e.Key], pageTag[e.Key], nil)...)
			case OpGetRoster:
				queue = append(queue, c.RosterRead(now, nil, "", nil)...)
			case OpPutRoster:
				queue = append(queue, c.RosterPut(now, "r", nil)...)
			case OpPutPage:
				p, err := ParsePage(e.Data, e.Key)
				if err != nil {
					t.Fatal(err)
				}
				pages[e.Key], pageTag[e.Key] = e.Data, md5tag(e.Data)
				ws[e.Key].page = p
				queue = append(queue, c.PagePut(now, e.Key, pageTag[e.Key], nil)...)
				if e.Key != "w2" || d <= T+fi {
					break
				}
				end := T + fi + lt - lt/10
				for sh := range p.Shards {
					if _, ok := leadsAtCut[sh]; ok && !strict && d < end {
						if d < T+lt {
							t.Fatalf("t=%v: the coordinator grants %s to w2 less than a LeaderTimeout after the report at %v", d, sh, T)
						}
						t.Logf("t=%v: %s granted to w2 while w1 leads it to %v (the stated put-back exception: %v after the put-back)", d, sh, end, end-(T+fi+delay))
						continue
					}
					if _, ok := leadsAtCut[sh]; ok && d < end {
						start := ws["w2"].renewAt + 50*time.Millisecond
						t.Fatalf("t=%v: the coordinator grants %s to w2 (which starts it at about %v) while w1 leads it to %v (lease from seq %d, sent at %v, undone by the put-back); its wait counted from the report at %v; the coordinator saw seq %d's bytes before the put-back: %v; a listing showed seq %d before the put-back: %v",
							d, sh, start, end, backup.Seq+1, T+fi, T, backup.Seq, seenBackup, backup.Seq+1, listedLater)
					}
				}
			}
		}
	}
	if len(leadsAtCut) == 0 {
		t.Fatalf("w1 led nothing at the cut: the schedule does not test the rule")
	}
}
