package s3lect

import (
	"errors"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// TestStepDownSecondOperatorsRequestIsReleasedOver: two operators run
// s3lect release at about the same time. The first request
// q1 makes the leader's renewal fail; the leader's step read finds q1 and
// it waits for its holder (s3lect run: until its command's process group
// is gone, often most of a second). Meanwhile the second operator's
// requestStepDown reads q1 (a live record: lastUpdated is k's) and writes
// q2 over it (If-Match q1): a request over the same leadership. The
// holder resigns; the release over q1 is refused. The leader then
// forgets everything (releaseDone: "another holder wrote since") and
// follows: nothing releases q2, so followers wait the whole lease out
// (a 15 s gap at the defaults), both release commands say the leader
// "did not answer within its lease", -to is lost, and the ex-leader has
// no hold-off on its own record. Not a safety problem: a liveness one.
//
// Wanted: a release refused over a request is read again; a record of the
// same leadership carrying another step-down request is released over in
// the same way (the holder is already done).
func TestStepDownSecondOperatorsRequestIsReleasedOver(t *testing.T) {
	defer setMutation(t)()
	p := coreParams
	m := refusedRenewal(t, p)
	deadline := m.c.lead().deadline
	q1 := m.c.lead().rec
	q1.StepDown, q1.To = "op1", "b"
	m.on(evStore{gen: m.c.sh.gen, data: q1.encode(), etag: `"q1"`}, at(p.fi+20*time.Millisecond))
	if e := mustEffect[doEnd](t, m, "refused renewal, then the request"); !errors.Is(e.cause, ErrLeadershipLost) {
		t.Fatalf("cause %v; want ErrLeadershipLost", e.cause)
	}
	q2 := q1
	q2.StepDown, q2.To = "op2", "b" // the second operator's request, written over q1
	m.on(evResign{}, at(p.fi+300*time.Millisecond))
	if w := mustEffect[doRelease](t, m, "holder done"); w.ifMatch != `"q1"` {
		t.Fatalf("release over %s; want over q1", w.ifMatch)
	}
	m.wrote("", store.ErrPreconditionFailed, at(p.fi+310*time.Millisecond)) // q2 landed first
	w, ok := releaseOverRequest(m, q2.encode(), `"q2"`, at(p.fi+310*time.Millisecond), deadline)
	if !ok {
		t.Fatalf("no release over the second operator's request q2 before the lease deadline %v: "+
			"the step-down falls back to a whole lease", deadline.Sub(t0))
	}
	if w.ifMatch != `"q2"` {
		t.Fatalf("release over %s; want over the second request q2", w.ifMatch)
	}
}

// TestResignerHoldsOffAfterALostReleaseReply: the resigner's release lands but its reply is lost and the retries fail (a
// store that errs for a second): releaseDone takes the "release failed"
// branch, which sets no hold-off. The README's loop campaigns again at
// once; its first read finds its own released record (vacant, T2) and it
// takes it back at once: the handover lands on itself although other
// members are live, where it must land on another member. The
// same holds for the PreconditionFailed branch. Suggested fix: holdOff(l)
// in every branch of releaseDone (the hold only delays a takeover of a
// record with this leadership's key, so it is harmless when nothing
// landed).
func TestResignerHoldsOffAfterALostReleaseReply(t *testing.T) {
	defer setMutation(t)()
	p := coreParams
	m := leading(t, p)
	m.on(evResign{}, at(500*time.Millisecond))
	w := mustEffect[doRelease](t, m, "release")
	m.on(evStore{gen: m.c.sh.gen, err: errors.New("503 SlowDown"), unsure: true}, at(1600*time.Millisecond))
	mustEffect[doExited](t, m, "release failed")
	m.on(evCampaign{id: 2, lease: "l2"}, at(1700*time.Millisecond))
	if calling[doRead](m) || calling[doStepRead](m) {
		m.read(w.data, `"r"`, at(1700*time.Millisecond))
	}
	if _, ok := effectOf[doClaim](m); ok {
		t.Fatalf("the resigner took its own release (which had landed, its reply lost) back at once, at its first read; " +
			"want it to hold off as after an acknowledged release")
	}
}

// TestResignRacingAStepDownRequestReleasesOverIt: the holder resigns (s3lect run on SIGTERM, a maintenance script) just as an
// operator's step-down request q lands over the leader's record k. The
// release is written If-Match k's ETag and refused; releaseDone takes it
// as "another holder wrote since" and follows, writing nothing. q is a
// live-looking record of the ended leadership: every member waits its
// whole lease out, although both the holder and the operator asked for a
// handover. Suggested fix: a release refused by the store reads the
// lockfile, as a refused renewal does (finishLost), and a step-down
// request over the same leadership is released over.
func TestResignRacingAStepDownRequestReleasesOverIt(t *testing.T) {
	defer setMutation(t)()
	p := coreParams
	m := leading(t, p)
	deadline := m.c.lead().deadline
	q := m.c.lead().rec
	q.StepDown = "op1"
	m.on(evResign{}, at(500*time.Millisecond))
	if w := mustEffect[doRelease](t, m, "release"); w.ifMatch != `"c"` {
		t.Fatalf("release over %s; want over the leader's record", w.ifMatch)
	}
	m.wrote("", store.ErrPreconditionFailed, at(510*time.Millisecond)) // q landed just before
	w, ok := releaseOverRequest(m, q.encode(), `"q"`, at(510*time.Millisecond), deadline)
	if !ok {
		t.Fatalf("no release over the operator's request before the lease deadline %v: the group waits the whole lease out", deadline.Sub(t0))
	}
	if w.ifMatch != `"q"` {
		t.Fatalf("release over %s; want over the request q", w.ifMatch)
	}
}

// releaseOverRequest runs m from now until deadline, answering every read
// (the ex-leader's read for a step-down request included) with the
// request's bytes and ETag, and returns the first release m writes; false
// if none comes before deadline.
func releaseOverRequest(m *machine, data []byte, etag string, now, deadline time.Time) (doRelease, bool) {
	for now.Before(deadline) {
		if w, ok := effectOf[doRelease](m); ok {
			return w, true
		}
		switch {
		case calling[doStepRead](m):
			m.on(evStore{gen: m.c.sh.gen, data: data, etag: etag}, now)
			continue
		case calling[doRead](m):
			m.read(data, etag, now)
			continue
		}
		if m.wake.IsZero() || !m.wake.After(now) {
			break
		}
		now = m.wake
		m.on(evTimer{}, now)
	}
	return doRelease{}, false
}
