package coord

// Two schedules of the fifth pool review (docs/findings-pool.md, "Fifth
// review"): a put-back under a write of unknown outcome, whose overlap
// section 7 bounds by two LeaderTimeouts of the put-back; and a listing
// in flight when a read would date a write from a report (4.8).

import (
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
	const fi, lt = pairFI, pairLT
	p := newPair(t, nonces, true)
	var backup []byte
	var lost []byte // w1's write whose reply was lost
	retried := false
	leadsAtCut := map[string]uint64{}
	p.watch = func(d time.Duration, e Effect) {
		switch {
		case e.Op == OpGetSession && e.Key == "w1" && d > T+fi && d < T+2*fi:
			t.Logf("t=%v: the coordinator reads w1 between its lost write and its retry", d)
		case e.Op == OpPutPage && e.Key == "w2" && d > T+2*fi:
			pg, _ := ParsePage(e.Data, e.Key)
			end, bound := p.leaseEnd("w1"), T+fi+delay+2*lt
			for sh := range pg.Shards {
				if _, ok := leadsAtCut[sh]; ok && d < end && end > bound {
					t.Fatalf("t=%v: the coordinator grants %s to w2 (which starts it at about %v) while w1 leads it to %v, under its write at %v (sent after the put-back at %v); section 7's bound: within two LeaderTimeouts of the put-back, %v",
						d, sh, p.ws["w2"].renewAt+50*time.Millisecond, end, T+2*fi, T+fi+delay, bound)
				}
			}
		}
	}
	p.run(20*time.Second, func(d time.Duration) {
		for _, id := range []string{"w1", "w2"} {
			if id == "w1" && d > T+2*fi || !p.due(d, id) {
				continue // w1 loses the store after T+2 s: its writes never land
			}
			s := p.next(id)
			data := p.write(d, id, s)
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
			p.landed(d, id, s)
			p.report(d, id, Entry{})
		}
		if d == T+fi+delay {
			p.obj["w1"] = backup // the operator's restore
		}
	})
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
	const fi, lt = pairFI, pairLT
	p := newPair(t, nonces, true)
	l := &lostReport{T: T}
	listedLater := time.Duration(-1) // the send of a listing that showed seq k+1 before the put-back
	p.store = func(d time.Duration, e Effect) (time.Duration, error) {
		switch {
		case e.Op == OpList && d > T+fi && d < T+fi+delay:
			listedLater = d
			return lag, nil
		case e.Op == OpList:
			return 10 * time.Millisecond, nil
		}
		return 0, nil
	}
	p.watch = func(d time.Duration, e Effect) {
		if e.Op != OpPutPage || e.Key != "w2" || d <= T+fi {
			return
		}
		pg, _ := ParsePage(e.Data, e.Key)
		end := T + fi + lt - lt/10
		for sh := range pg.Shards {
			if _, ok := l.leadsAtCut[sh]; ok && d < end {
				t.Fatalf("t=%v: the coordinator grants %s to w2 while w1 leads it to %v; a listing sent at %v (answered at %v) showed seq %d before the put-back at %v",
					d, sh, end, listedLater, listedLater+lag, p.ws["w1"].s.Seq, T+fi+delay)
			}
		}
	}
	p.run(20*time.Second, func(d time.Duration) {
		l.events(p, d)
		if d == T+fi+delay {
			p.obj["w1"] = l.backup
		}
	})
	if len(l.leadsAtCut) == 0 || listedLater < 0 {
		t.Fatalf("w1 led nothing at the cut, or no listing was sent between its last write and the put-back: the schedule does not test the rule")
	}
}
