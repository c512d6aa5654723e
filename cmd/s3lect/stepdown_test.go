package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// job is one leadership of a virtual-time member as s3lect run holds it:
// from Campaign's return to the end of its work, which stops stopTime
// after the leadership's context ends, before the member resigns.
type job struct {
	id         string
	term       uint64
	start, end time.Time
}

// jobLog collects the members' jobs.
type jobLog struct {
	mu   sync.Mutex
	jobs []job
}

func (l *jobLog) add(j job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs = append(l.jobs, j)
}

func (l *jobLog) all() []job {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]job(nil), l.jobs...)
}

// member campaigns for ever as s3lect run does: it works while it leads,
// stops its work stopTime after the leadership ends, then resigns (a
// leader asked to step down releases then) and campaigns again.
func member(ctx context.Context, e *s3lect.Elector, id string, stopTime time.Duration, log *jobLog) {
	for {
		lead, err := e.Campaign(ctx)
		if err != nil {
			return
		}
		j := job{id: id, term: lead.Term(), start: time.Now()}
		<-lead.Context().Done()
		time.Sleep(stopTime) // SIGTERM, the command's exit, the group confirmed gone
		j.end = time.Now()
		log.add(j)
		lead.Resign(context.Background())
	}
}

// TestStepDownInVirtualTime: three members at the default intervals in a
// testing/synctest bubble on the memory store, and an operator's step-down
// request written at many phases of the leader's renewal cycle, with and
// without -to, immediate (-now) and announced (the default in storage
// mode, docs/moves.md 11.5). At every phase the leader's work ends
// within a FrequentInterval (-now: its next renewal is refused) or at the
// announced moment, within InfrequentInterval + FrequentInterval; the
// next leader is another member (the one named by -to), it starts only
// after the old leader's work has stopped (announced: within
// FrequentInterval/16 and a slack of it), and no two jobs ever overlap.
func TestStepDownInVirtualTime(t *testing.T) {
	for _, announce := range []bool{false, true} {
		for _, to := range []string{"", "c"} {
			for phase := range 7 {
				offset := time.Duration(phase) * s3lect.DefaultFrequentInterval / 7
				t.Run(fmt.Sprintf("announce=%v/to=%q/phase %v", announce, to, offset), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						stepDownAt(t, to, offset, announce)
					})
				})
			}
		}
	}
}

// groupOfThree runs members a, b and c on one memory store's lockfile
// "leader/job.json", started a second apart (a leads first) by start; at
// 2 min + offset, once the followers are stable and b sees a leading, it
// calls act, then lets the group run 2 min more and closes it. It returns
// the jobs, the first a's and at least one after it.
func groupOfThree(t *testing.T, offset time.Duration, start func(ctx context.Context, e *s3lect.Elector, id string, log *jobLog),
	act func(mem *memstore.Store, key string)) []job {
	t.Helper()
	mem := memstore.New()
	key := "leader/job.json"
	ctx, cancel := context.WithCancel(t.Context())
	var (
		log jobLog
		wg  sync.WaitGroup
	)
	electors := map[string]*s3lect.Elector{}
	for _, id := range []string{"a", "b", "c"} {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: key, ServerID: id, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		electors[id] = e
		wg.Go(func() { start(ctx, e, id, &log) })
		time.Sleep(time.Second) // a leads first
	}
	time.Sleep(2*time.Minute + offset) // the followers are stable
	if rec, ok := electors["b"].Leader(); !ok || rec.LeaderID != "a" {
		cancel()
		t.Fatalf("leader at 2 min + %v = %+v, %v; want a", offset, rec, ok)
	}
	act(mem, key)
	time.Sleep(2 * time.Minute)
	cancel()
	for _, e := range electors {
		e.Close()
	}
	wg.Wait()
	jobs := log.all()
	if len(jobs) < 2 || jobs[0].id != "a" {
		t.Fatalf("jobs %+v; want a's, then another's", jobs)
	}
	return jobs
}

func stepDownAt(t *testing.T, to string, offset time.Duration, announce bool) {
	stopTime := s3lect.DefaultLeaderTimeout / 40 // well within run's LeaderTimeout/20 to SIGKILL
	var requested time.Time
	jobs := groupOfThree(t, offset, func(ctx context.Context, e *s3lect.Elector, id string, log *jobLog) {
		member(ctx, e, id, stopTime, log)
	}, func(mem *memstore.Store, key string) {
		requested = time.Now()
		old, req, err := requestStepDownChecked(t.Context(), mem, key, to, announce, nil)
		if err != nil {
			t.Errorf("requestStepDown() = %v", err)
			return
		}
		if announce != (req.ReleaseAt > 0) {
			t.Errorf("request %+v; want releaseAt set only when announced", req)
		}
		if !sameLeadership(old, req) || req.StepDown == "" || req.To != to || !req.LastUpdated.Equal(old.LastUpdated) || req.TTL != old.TTL || req.Held != old.Held {
			t.Errorf("request %+v over %+v; want the leader's record as it is, with stepDown and to %q", req, old, to)
		}
	})
	first, next := jobs[0], jobs[1]
	fi, ii := s3lect.DefaultFrequentInterval, s3lect.DefaultInfrequentInterval
	switch d := first.end.Sub(requested); {
	case !announce && d > fi+stopTime:
		t.Errorf("a's work ended %v after the request; want within a FrequentInterval and its stop time", d)
	case announce && d > ii+fi+stopTime:
		t.Errorf("a's work ended %v after the announced request; want within InfrequentInterval + FrequentInterval and its stop time", d)
	case announce && d < ii-fi:
		t.Errorf("a's work ended %v after the announced request; want at the announced moment, about an InfrequentInterval later", d)
	}
	if gap := next.start.Sub(first.end); announce && gap > fi/16+fi/16 {
		t.Errorf("the job was stopped for %v; want within FrequentInterval/16 and a slack (the followers watch the announced moment)", gap)
	}
	switch {
	case next.id == "a":
		t.Errorf("the leadership went back to a, which was asked to step down; want another member")
	case to != "" && next.id != to:
		t.Errorf("the leadership went to %s; want %s, named by -to", next.id, to)
	}
	if !first.end.Before(next.start) {
		t.Errorf("%s's job started at %v, before a's stopped at %v", next.id, next.start.Sub(requested), first.end.Sub(requested))
	}
	// Followers read every InfrequentInterval: the next leader comes
	// within the renewal, the stop and one such read.
	if d := next.start.Sub(requested); d > s3lect.DefaultFrequentInterval+stopTime+s3lect.DefaultInfrequentInterval+s3lect.DefaultFrequentInterval {
		t.Errorf("%s led %v after the request; want within the renewal, the stop and the followers' read interval", next.id, d)
	}
	for i := 1; i < len(jobs); i++ {
		if !jobs[i-1].end.Before(jobs[i].start) {
			t.Errorf("jobs overlap: %+v and %+v", jobs[i-1], jobs[i])
		}
	}
	t.Logf("a stopped %v after the request; %s led %v after it (outage %v)", first.end.Sub(requested), next.id, next.start.Sub(requested), next.start.Sub(first.end))
}

// TestStepDownNobodyLeads: no lockfile, or a released one, is left alone;
// -to naming the leader itself is refused.
func TestStepDownNobodyLeads(t *testing.T) {
	mem := memstore.New()
	if _, _, err := requestStepDown(t.Context(), mem, "k", ""); !errors.Is(err, errNobodyLeads) {
		t.Errorf("requestStepDown(no lockfile) = %v; want errNobodyLeads", err)
	}
	if _, err := mem.PutIfMatch(t.Context(), "k", []byte(`{"leaderID":"a","leaderAddr":"","lastUpdated":"0001-01-01T00:00:00Z","term":3}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := requestStepDown(t.Context(), mem, "k", ""); !errors.Is(err, errNobodyLeads) || !strings.Contains(err.Error(), "a released") {
		t.Errorf("requestStepDown(released) = %v; want errNobodyLeads saying a released it", err)
	}
	if _, err := mem.PutIfMatch(t.Context(), "h", []byte(`{"leaderID":"a","leaderAddr":"","lastUpdated":"2026-11-26T16:00:00Z","term":3}`), ""); err != nil {
		t.Fatal(err)
	}
	var u errUsage
	if _, _, err := requestStepDown(t.Context(), mem, "h", "a"); !errors.As(err, &u) {
		t.Errorf("requestStepDown(-to the leader) = %v; want a usage error", err)
	}
}

// TestReleaseSeesRequestIgnored: a leader that renews over the request
// (the original s3lect renews whatever record names it) is reported as
// ignoring it, at once, instead of waiting for a lease that never lapses.
func TestReleaseSeesRequestIgnored(t *testing.T) {
	mem := memstore.New()
	orig := `{"leaderID":"old","leaderAddr":"","lastUpdated":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
	if _, err := mem.PutIfMatch(t.Context(), "k", []byte(orig), ""); err != nil {
		t.Fatal(err)
	}
	_, req, err := requestStepDown(t.Context(), mem, "k", "")
	if err != nil {
		t.Fatal(err)
	}
	go func() { // the original's next cycle: it reads, sees its own ID, and renews over what it read
		time.Sleep(50 * time.Millisecond)
		_, etag, _ := mem.Get(context.Background(), "k")
		renewed := `{"leaderID":"old","leaderAddr":"","lastUpdated":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
		mem.PutIfMatch(context.Background(), "k", []byte(renewed), etag)
	}()
	var said []string
	o := follow(t.Context(), mem, "k", req, time.Now(), time.Minute, time.Minute, 10*time.Millisecond, func(_ outcome, what string) { said = append(said, what) })
	if !o.ignored || o.released || o.lapsed || len(said) != 1 || said[0] != "ignored" {
		t.Errorf("follow() = %+v, said %v; want the request reported as ignored", o, said)
	}
}

// TestTransferToAMemberThatJustJoined: release -to a member that started
// shortly before lands on it. A follower that has just turned stable
// (followed a leader for LeaderTimeout) used to read next up to
// 2×InfrequentInterval − FrequentInterval after its last read (its slot's
// renewal at or after the one due), while the transfer window,
// max(lease, InfrequentInterval) + FrequentInterval, assumes a read within
// an InfrequentInterval: the member asked to step down took its own
// release back. Here (the intervals, 500ms/2s/1.5s, c started
// 1.7 s before the request) a led again 2.81 s after the request. Since
// the library reads within k renewals of the last read (alignedRead,
// protocol.md 3.3), c reads it in the window.
//
// Announced (the default in storage mode, moves.md 11.5), c reads the
// announcement and watches the moment.
func TestTransferToAMemberThatJustJoined(t *testing.T) {
	for _, announce := range []bool{false, true} {
		t.Run(fmt.Sprintf("announce=%v", announce), func(t *testing.T) { transferToJustJoined(t, announce) })
	}
}

func transferToJustJoined(t *testing.T, announce bool) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		key := "leader/job.json"
		ctx, cancel := context.WithCancel(t.Context())
		var (
			log      jobLog
			wg       sync.WaitGroup
			electors []*s3lect.Elector
		)
		add := func(id string) {
			e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: key, ServerID: id, Logger: slog.New(slog.DiscardHandler),
				FrequentInterval: 500 * time.Millisecond, InfrequentInterval: 2 * time.Second, LeaderTimeout: 1500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			electors = append(electors, e)
			wg.Go(func() { member(ctx, e, id, 10*time.Millisecond, &log) })
		}
		add("A")
		time.Sleep(time.Second)
		add("B")
		time.Sleep(10 * time.Second)
		add("C")
		time.Sleep(1700 * time.Millisecond)
		requested := time.Now()
		if _, _, err := requestStepDownChecked(t.Context(), mem, key, "C", announce, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(8 * time.Second)
		cancel()
		for _, e := range electors {
			e.Close()
		}
		wg.Wait()
		for _, j := range log.all() {
			if j.start.After(requested) {
				if j.id != "C" {
					t.Errorf("%s took over %v after release -to C; want C, which had run for 1.7 s", j.id, j.start.Sub(requested))
				}
				return
			}
		}
		t.Errorf("nobody took over within 8 s of release -to C")
	})
}

// TestFollowEndsAtWait: release follows the lockfile for -wait exactly,
// even when -wait is shorter than the lease (it used to wait the lease,
// a tenth and a second whatever -wait said), and then says what it knows.
func TestFollowEndsAtWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		if _, err := mem.PutIfMatch(t.Context(), "k", []byte(`{"leaderID":"a","leaderAddr":"","lastUpdated":"2026-11-26T16:00:00Z","term":3,"ttl":1500}`), ""); err != nil {
			t.Fatal(err)
		}
		_, req, err := requestStepDown(t.Context(), mem, "k", "web-9")
		if err != nil {
			t.Fatal(err)
		}
		begun := time.Now()
		o := follow(t.Context(), mem, "k", req, begun, 1500*time.Millisecond, 300*time.Millisecond, 50*time.Millisecond, func(outcome, string) {})
		if took := time.Since(begun); took != 300*time.Millisecond || o.next.LeaderID != "" || o.lapsed {
			t.Errorf("follow(-wait 300ms, lease 1.5s) took %v, outcome %+v; want 300ms, nobody next, the lease not run out", took, o)
		}
		var out strings.Builder
		if code := reportMove(&out, req, "web-9", 300*time.Millisecond, o, false); code != exitNotMoved || !strings.Contains(out.String(), "a still holds the lockfile") {
			t.Errorf("reportMove() = %d, %q; want %d saying a still holds the lockfile", code, out.String(), exitNotMoved)
		}
	})
}

// TestFollowSeesAnAnnouncedStepDown: a leader that takes an announced
// request in (docs/moves.md, 11.5) renews over it with releaseAt and
// leads on until the moment, longer than its lease: release reports the
// announcement and its moment, neither "ignored" (a leader that does not
// know requests) nor "did not answer within its lease".
func TestFollowSeesAnAnnouncedStepDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		stamp := time.Now().UTC()
		rec := s3lect.Record{LeaderID: "a", LastUpdated: stamp, Term: 3, Lease: "la", Held: 60000, TTL: 1500}
		b, _ := json.Marshal(rec)
		if _, err := mem.PutIfMatch(t.Context(), "k", b, ""); err != nil {
			t.Fatal(err)
		}
		_, req, err := requestStepDownChecked(t.Context(), mem, "k", "", true, nil)
		if err != nil || req.ReleaseAt != rec.Held {
			t.Fatalf("request %+v, %v; want releaseAt %d (held)", req, err, rec.Held)
		}
		begun := time.Now()
		renewed := make(chan struct{})
		go func() { // the leader: renews over the request every 500ms, announcing
			defer close(renewed)
			for i := 1; i <= 8; i++ {
				time.Sleep(500 * time.Millisecond)
				_, etag, err := mem.Get(t.Context(), "k")
				if err != nil {
					return
				}
				r := rec
				r.LastUpdated, r.Held, r.ReleaseAt = stamp.Add(time.Duration(i)*500*time.Millisecond), rec.Held+int64(i)*500, rec.Held+500+26875
				b, _ := json.Marshal(r)
				mem.PutIfMatch(t.Context(), "k", b, etag)
			}
		}()
		var said []string
		o := follow(t.Context(), mem, "k", req, begun, 1500*time.Millisecond, 3*time.Second, 50*time.Millisecond, func(_ outcome, what string) { said = append(said, what) })
		<-renewed
		if !o.announced || o.ignored || o.lapsed || !slices.Equal(said, []string{"announced"}) {
			t.Errorf("follow() = %+v, said %v; want the announcement reported once, not ignored, not lapsed", o, said)
		}
		if want := stamp.Add(500*time.Millisecond + 26875*time.Millisecond); !o.moment.Equal(want) {
			t.Errorf("moment %v; want %v", o.moment, want)
		}
		var out strings.Builder
		if code := reportMove(&out, req, "", 3*time.Second, o, false); code != exitNotMoved || !strings.Contains(out.String(), "a announced its release for") {
			t.Errorf("reportMove() = %d, %q; want %d saying a announced its release", code, out.String(), exitNotMoved)
		}
	})
}
