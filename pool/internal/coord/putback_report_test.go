package coord

// Peer mode's Nonce dating (pool-protocol.md 4.8) against an object put
// back to exact bytes, on a store whose ETags hash them (found by the
// fourth pool review).

import (
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
	const fi, lt = pairFI, pairLT
	p := newPair(t, nonces, true)
	l := &lostReport{T: T}
	seenBackup := false  // a listing or read of the coordinator showed the backup's bytes before the put-back
	listedLater := false // a listing showed w1's undone write before the put-back
	p.watch = func(d time.Duration, e Effect) {
		before := d > T && d < T+fi+delay && p.tag("w1") == md5tag(l.backup)
		switch {
		case e.Op == OpList:
			seenBackup = seenBackup || before
			listedLater = listedLater || d >= T+fi && d < T+fi+delay
		case e.Op == OpGetSession && e.Key == "w1":
			seenBackup = seenBackup || before
		case e.Op == OpPutPage && e.Key == "w2" && d > T+fi:
			pg, _ := ParsePage(e.Data, e.Key)
			end := T + fi + lt - lt/10
			for sh := range pg.Shards {
				if _, ok := l.leadsAtCut[sh]; !ok || d >= end {
					continue
				}
				if !strict {
					if d < T+lt {
						t.Fatalf("t=%v: the coordinator grants %s to w2 less than a LeaderTimeout after the report at %v", d, sh, T)
					}
					t.Logf("t=%v: %s granted to w2 while w1 leads it to %v (the stated put-back exception: %v after the put-back)", d, sh, end, end-(T+fi+delay))
					continue
				}
				start := p.ws["w2"].renewAt + 50*time.Millisecond
				t.Fatalf("t=%v: the coordinator grants %s to w2 (which starts it at about %v) while w1 leads it to %v (lease from seq %d, sent at %v, undone by the put-back); its wait counted from the report at %v; the coordinator saw seq %d's bytes before the put-back: %v; a listing showed seq %d before the put-back: %v",
					d, sh, start, end, p.ws["w1"].s.Seq, T+fi, T, p.ws["w1"].s.Seq-1, seenBackup, p.ws["w1"].s.Seq, listedLater)
			}
		}
	}
	p.run(20*time.Second, func(d time.Duration) {
		l.events(p, d)
		if d == T+fi+delay {
			p.obj["w1"] = l.backup // the operator's restore
			t.Logf("t=%v: w1's object put back to seq %d (w1's last write, seq %d, sent at %v, leads %v to %v); the coordinator saw those bytes before: %v",
				d, p.ws["w1"].s.Seq-1, p.ws["w1"].s.Seq, T+fi, l.leadsAtCut, T+fi+lt-lt/10, seenBackup)
		}
	})
	if len(l.leadsAtCut) == 0 {
		t.Fatalf("w1 led nothing at the cut: the schedule does not test the rule")
	}
}
