package coord

// Two schedules of the fifth pool review (docs/findings-pool.md, "Fifth
// review"): a put-back under a write of unknown outcome, whose overlap
// section 7 bounds by two LeaderTimeouts of the put-back; and a listing
// in flight when a read would date a write from a report (4.8).

import (
	"crypto/md5"
	"fmt"
	"testing"
	"time"
)

// TestPutBackUnderAWriteOfUnknownOutcomeEndsWithinTwoLeases: w1's seq k
// (ETag E) succeeds at T; its seq k+1 at T+1 s lands (ETag E') but its
// reply is lost (an unknown outcome: w1 keeps E as its last write, and
// the lease of seq k); a listing shows E'; the object is put back to seq
// k's bytes; at T+2 s w1 writes seq k+1 again, If-Match E, which the
// put-back lets through: the same seq, Nonce, leads and applied page, so
// the same bytes and ETag E' as the write the listing showed. Then w1's
// writes stop landing (it loses the store). The coordinator sees E'
// unchanged since the listing before the put-back and ends the session a
// wait after that listing, while w1 leads under the lease of its write
// at T+2 s, sent after the put-back: the overlap (w2 from 16.65 s, w1 to
// 17.0 s) ends later than a LeaderTimeout after the put-back, but within
// two, which section 7 states. Nonces play no part (the same with and
// without).
func TestPutBackUnderAWriteOfUnknownOutcomeEndsWithinTwoLeases(t *testing.T) {
	for _, nonces := range []bool{false, true} {
		t.Run(fmt.Sprint("nonces=", nonces), func(t *testing.T) {
			putBackUnknownOutcome(t, 12300*time.Millisecond, 300*time.Millisecond, nonces)
		})
	}
}

func putBackUnknownOutcome(t *testing.T, T, delay time.Duration, nonces bool) {
	const fi, lt = time.Second, 3 * time.Second
	c := NewCoordinator(CoordConfig{Shards: []string{"a", "b", "c", "d"}, FrequentInterval: fi, LeaderTimeout: lt, Mark: "m", ListEvery: lt / 2}, 1)
	type wk struct {
		s       Session // the worker's last write that it knows succeeded
		etag    string
		page    Page
		renewAt time.Duration
		lease   time.Duration // its lease's end
	}
	md5tag := func(b []byte) string { return fmt.Sprintf("%x", md5.Sum(b)) }
	ws := map[string]*wk{}
	obj := map[string][]byte{} // the store's session objects
	for i, id := range []string{"w1", "w2"} {
		s := Session{V: wireVersion, ID: id, Session: "S" + id, Seq: 1, TTL: 3000, Leads: map[string]uint64{}}
		ws[id] = &wk{s: s, etag: md5tag(Marshal(s)), renewAt: time.Duration(300*(i+1)) * time.Millisecond}
		obj[id] = Marshal(s)
	}
	next := func(w *wk) Session { // the worker's next write (Worker.content)
		s := w.s
		s.Seq++
		if w.s.Applied.Less(w.page.Ver) && w.page.Session == s.Session {
			s.Applied, s.AppliedBy, s.Leads = w.page.Ver, w.page.By, w.page.Shards
		}
		if nonces {
			s.Nonce = fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("secret-%s/%d", s.Session, s.Seq))))[:16]
		}
		return s
	}
	pages := map[string][]byte{}
	pageTag := map[string]string{}
	var backup []byte
	var lost []byte // w1's write whose reply was lost
	retried := false
	leadsAtCut := map[string]uint64{}
	var queue []Effect
	queue = append(queue, c.Begin(at(0))...)
	for d := time.Duration(0); d < 20*time.Second; d += 10 * time.Millisecond {
		now := at(d)
		for _, id := range []string{"w1", "w2"} {
			w := ws[id]
			if d != w.renewAt || id == "w1" && d > T+2*fi {
				continue // w1 loses the store after T+2 s: its writes never land
			}
			w.renewAt += fi
			s := next(w)
			data := Marshal(s)
			if md5tag(obj[id]) != w.etag {
				t.Fatalf("t=%v: %s's write refused: the schedule does not hold", d, id)
			}
			obj[id] = data
			switch {
			case id == "w1" && d == T:
				backup = data
			case id == "w1" && d == T+fi:
				lost = data // landed; its reply is lost: w1 keeps seq k and its lease
				continue
			case id == "w1" && d == T+2*fi:
				retried = string(data) == string(lost)
				leadsAtCut = s.Leads
			}
			w.s, w.etag, w.lease = s, md5tag(data), d+lt-lt/10
			queue = append(queue, c.Reported(now, id, Entry{Session: w.etag, Nonce: s.Nonce})...)
		}
		if d == T+fi+delay {
			obj["w1"] = backup // the operator's restore
		}
		fx := append(queue, c.Tick(now)...)
		queue = nil
		for _, e := range fx {
			switch e.Op {
			case OpStepDown:
				t.Fatalf("t=%v: stepped down: %v", d, e.Err)
			case OpList:
				queue = append(queue, c.Listed(now, map[string]Entry{"w1": {Session: md5tag(obj["w1"])}, "w2": {Session: md5tag(obj["w2"])}}, nil)...)
			case OpGetSession:
				if e.Key == "w1" && d > T+fi && d < T+2*fi {
					t.Logf("t=%v: the coordinator reads w1 between its lost write and its retry", d)
				}
				queue = append(queue, c.SessionRead(now, e.Key, obj[e.Key], md5tag(obj[e.Key]), nil)...)
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
				if e.Key != "w2" || d <= T+2*fi {
					break
				}
				end, bound := ws["w1"].lease, T+fi+delay+2*lt
				for sh := range p.Shards {
					if _, ok := leadsAtCut[sh]; ok && d < end && end > bound {
						t.Fatalf("t=%v: the coordinator grants %s to w2 (which starts it at about %v) while w1 leads it to %v, under its write at %v (sent after the put-back at %v); section 7's bound: within two LeaderTimeouts of the put-back, %v",
							d, sh, ws["w2"].renewAt+50*time.Millisecond, end, T+2*fi, T+fi+delay, bound)
					}
				}
			}
		}
	}
	if !retried || len(leadsAtCut) == 0 {
		t.Fatalf("the retry did not repeat the lost write's bytes (%v) or w1 led nothing: the schedule does not test the rule", retried)
	}
}

// TestAListingInFlightHoldsAReportsDating: the schedule of
// TestAListingOfALaterWriteEndsAReportsDating (w1's seq k reported at
// 12.3 s, seq k+1 at 13.3 s with its report lost, then w1 loses the
// store; a listing sent at 13.5 s shows seq k+1; the object put back to
// seq k at 13.75 s), with that listing's answer taking 1.9 s (two LIST
// requests, one retried): the read after the put-back lands first, dates
// seq k from the report at 12.3 s, and the coordinator grants w1's shard
// at 15.31 s while w1 leads to 16.0 s (before the rule: no dating while
// a listing is out, 4.8). Without Nonces the same schedule is safe (seq
// k's bytes were never seen before the put-back).
func TestAListingInFlightHoldsAReportsDating(t *testing.T) {
	for _, nonces := range []bool{false, true} {
		t.Run(fmt.Sprint("nonces=", nonces), func(t *testing.T) {
			putBackReportedSlowList(t, 12300*time.Millisecond, 450*time.Millisecond, 1900*time.Millisecond, nonces)
		})
	}
}

func putBackReportedSlowList(t *testing.T, T, delay, lag time.Duration, nonces bool) {
	const fi, lt = time.Second, 3 * time.Second
	c := NewCoordinator(CoordConfig{Shards: []string{"a", "b", "c", "d"}, FrequentInterval: fi, LeaderTimeout: lt, Mark: "m", ListEvery: lt / 2}, 1)
	type wk struct {
		s       Session
		etag    string
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
	renew := func(w *wk) {
		s := w.s
		s.Seq++
		if w.s.Applied.Less(w.page.Ver) && w.page.Session == s.Session {
			s.Applied, s.AppliedBy, s.Leads = w.page.Ver, w.page.By, w.page.Shards
		}
		if nonces {
			s.Nonce = fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("secret-%s/%d", s.Session, s.Seq))))[:16]
		}
		w.s, w.etag = s, md5tag(Marshal(s))
	}
	var backup Session
	var backupTag string
	listedLater := time.Duration(-1) // the send of a listing that showed seq k+1 before the put-back
	leadsAtCut := map[string]uint64{}
	type pendingList struct {
		due     time.Duration
		entries map[string]Entry
	}
	var lists []pendingList
	var queue []Effect
	queue = append(queue, c.Begin(at(0))...)
	for d := time.Duration(0); d < 20*time.Second; d += 10 * time.Millisecond {
		now := at(d)
		for _, id := range []string{"w1", "w2"} {
			w := ws[id]
			if d == w.renewAt && !w.cut {
				renew(w)
				w.renewAt += fi
				switch {
				case id == "w1" && d == T:
					backup, backupTag = w.s, w.etag
					queue = append(queue, c.Reported(now, id, Entry{Session: w.etag, Nonce: w.s.Nonce})...)
				case id == "w1" && d == T+fi:
					w.cut = true
					leadsAtCut = w.s.Leads
				default:
					queue = append(queue, c.Reported(now, id, Entry{Session: w.etag, Nonce: w.s.Nonce})...)
				}
			}
		}
		if d == T+fi+delay {
			ws["w1"].s, ws["w1"].etag = backup, backupTag
		}
		if len(lists) > 0 && d >= lists[0].due {
			queue = append(queue, c.Listed(now, lists[0].entries, nil)...)
			lists = lists[1:]
		}
		fx := append(queue, c.Tick(now)...)
		queue = nil
		for _, e := range fx {
			switch e.Op {
			case OpStepDown:
				t.Fatalf("t=%v: stepped down: %v", d, e.Err)
			case OpList:
				entries := map[string]Entry{"w1": {Session: ws["w1"].etag}, "w2": {Session: ws["w2"].etag}}
				l := time.Duration(0)
				if d > T+fi && d < T+fi+delay {
					l, listedLater = lag, d
				}
				lists = append(lists, pendingList{due: d + l, entries: entries})
			case OpGetSession:
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
					if _, ok := leadsAtCut[sh]; ok && d < end {
						t.Fatalf("t=%v: the coordinator grants %s to w2 while w1 leads it to %v; a listing sent at %v (answered at %v) showed seq %d before the put-back at %v",
							d, sh, end, listedLater, listedLater+lag, backup.Seq+1, T+fi+delay)
					}
				}
			}
		}
	}
	if len(leadsAtCut) == 0 || listedLater < 0 {
		t.Fatalf("w1 led nothing at the cut, or no listing was sent between its last write and the put-back: the schedule does not test the rule")
	}
}
