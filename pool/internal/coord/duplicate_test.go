package coord

// W1's duplicate check: a displacement counts only when the foreign
// session is seen to renew.

import (
	"fmt"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// TestRestoredSessionOfAnEarlierProcessIsNotADuplicate: W1 ends Run with
// ErrDuplicateID once "another process's write has displaced" the worker
// twice: a refused write, then a read of its key that names a session
// this process never opened and that is not closed. An operator's put-back
// of the key to an earlier version (a backup synced back, a restore of
// the prefix) shows exactly that: an earlier process of the same ID
// (before a restart or a deploy) wrote every renewal but its last
// without `closed`. Two such restores, hours apart, end Run on every
// worker whose key they touch, and nothing restarts it: after the faults
// stop, the shards of the pool stay unled (all of them, if the restore
// took the whole prefix). The simulation does not see it: its calm phase
// starts again every worker whose Run ended. A duplicate process renews
// (its seq rises between two reads); a restored object stands still.
//
// Schedule (core level; FrequentInterval 1 s, LeaderTimeout 3 s): the
// worker renews every second; at 10 s and again at 3,600 s the operator
// puts its key back to the same earlier version, a renewal (seq 57) of
// session "yesterday" of the process that ran before this one. Each time
// the worker's next renewal is refused, it reads its key, and opens a new
// session over it. Run must not end.
func TestRestoredSessionOfAnEarlierProcessIsNotADuplicate(t *testing.T) {
	w, opened, failed, failedAt := restoredKey(t, map[time.Duration]uint64{10 * time.Second: 57, 3600 * time.Second: 57}, 3700*time.Second)
	if failed != nil {
		t.Fatalf("t=%v: Run ends: %v, after the operator put the key back to an earlier process's write", failedAt, failed)
	}
	if sess, _ := w.Session(); sess == "" || opened < 3 {
		t.Fatalf("after 2 restores: session %q, %d sessions opened: the schedule did not run", sess, opened)
	}
}

// TestReplayedVersionsOfAnEarlierProcessAreNotADuplicate: W1 counts a
// displacement only when the foreign session on the worker's key is seen
// to go on renewing: its seq risen twice, the second rise within its ttl
// of the first (dup.go). An operator who puts the key back to two
// consecutive versions of an earlier process (a restore tool replaying a
// version history, replication catching up, two put-backs by hand) shows
// one rise and then stands still: not a duplicate, however often.
//
// Schedule (core level; FrequentInterval 1 s, LeaderTimeout 3 s; store
// calls take 10 ms): at 10 s the operator puts the key back to renewal
// seq 57 of session "yesterday" of the process that ran before this one,
// and at 10.5 s to its next renewal, seq 58; the same at 3,600 s and
// 3,600.5 s. Run must not end. (With one rise counted, it ended with
// ErrDuplicateID at 3,601.09 s.)
func TestReplayedVersionsOfAnEarlierProcessAreNotADuplicate(t *testing.T) {
	restores := map[time.Duration]uint64{10 * time.Second: 57, 10500 * time.Millisecond: 58,
		3600 * time.Second: 57, 3600500 * time.Millisecond: 58}
	w, opened, failed, failedAt := restoredKey(t, restores, 3610*time.Second)
	if failed != nil {
		t.Fatalf("t=%v: Run ends: %v, after the operator replayed two versions of an earlier process's session, twice", failedAt, failed)
	}
	if sess, _ := w.Session(); sess == "" || opened < 3 {
		t.Fatalf("session %q, %d sessions opened: the schedule did not run", sess, opened)
	}
}

// restoredKey runs worker w1 (FrequentInterval 1 s, LeaderTimeout 3 s;
// store calls take 10 ms) until until, or until it fails (OpFail: failed,
// at failedAt). At each time restores names, the operator puts its key
// back to renewal seq of session "yesterday" of the process that ran
// before this one, at that write's ETag (S3: the same bytes, the same
// ETag). opened counts the sessions w opened.
func restoredKey(t *testing.T, restores map[time.Duration]uint64, until time.Duration) (w *Worker, opened int, failed error, failedAt time.Duration) {
	w = NewWorker(WorkerConfig{ID: "w1", FrequentInterval: time.Second, LeaderTimeout: 3 * time.Second,
		NewSession: func() string { opened++; return fmt.Sprintf("today%d", opened) }})
	obj, tag := []byte(nil), ""
	writes := 0
	var q []pendingCall
	var timer time.Time
	handle := func(d time.Duration, fx []Effect) {
		for _, e := range fx {
			switch e.Op {
			case OpFail:
				if failed == nil {
					failed, failedAt = e.Err, d
				}
			case OpTimer:
				timer = e.At
			case OpGetSession:
				data, etag := obj, tag
				q = append(q, pendingCall{d + 10*time.Millisecond, func(now time.Time) []Effect { return w.SessionRead(now, data, etag, nil) }})
			case OpPutSession:
				sent, etag, err := d, "", error(nil)
				if e.IfMatch != tag {
					err = store.ErrPreconditionFailed
				} else {
					writes++
					obj, tag = e.Data, fmt.Sprintf("w%d", writes)
					etag = tag
				}
				q = append(q, pendingCall{d + 10*time.Millisecond, func(now time.Time) []Effect { return w.SessionPut(now, at(sent), etag, err) }})
			case OpGetPage:
				q = append(q, pendingCall{d + 10*time.Millisecond, func(now time.Time) []Effect { return w.PageRead(now, nil, "", nil) }})
			}
		}
	}
	handle(0, w.Start(at(0)))
	for d := time.Duration(0); d < until && failed == nil; d += 10 * time.Millisecond {
		if seq, ok := restores[d]; ok {
			obj = Marshal(Session{V: wireVersion, ID: "w1", Session: "yesterday", Seq: seq, TTL: 3000,
				Applied: Ver{3, 12}, Leads: map[string]uint64{"a": 3<<32 | 4}})
			tag = md5tag(obj)
		}
		var due []pendingCall
		rest := q[:0]
		for _, p := range q {
			if p.due <= d {
				due = append(due, p)
			} else {
				rest = append(rest, p)
			}
		}
		q = rest
		for _, p := range due {
			handle(d, p.fn(at(d)))
		}
		if !timer.IsZero() && !at(d).Before(timer) {
			timer = time.Time{}
			handle(d, w.Tick(at(d)))
		}
	}
	return w, opened, failed, failedAt
}
