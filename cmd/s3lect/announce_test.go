package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestSIGTERMAnnouncesInVirtualTime: three members at the default
// intervals in a testing/synctest bubble on the memory store (storage
// mode), and SIGTERM to the leader's runner at seven phases of its renewal
// cycle, handled as run handles it: announceRelease with -announce's
// default, then the command drains (2s here) and the leadership is
// resigned. At every phase the job's outage (old job stopped → new job
// started) is at most the drain plus 1 s (the target: in fact the watch's
// FrequentInterval/16 and a takeover), the next job runs on another
// member and starts after the old one stopped, and the whole move (the
// signal to the new job's start) takes at most InfrequentInterval +
// FrequentInterval + the drain. With -announce off the outage is up to an
// InfrequentInterval: logged, for comparison.
func TestSIGTERMAnnouncesInVirtualTime(t *testing.T) {
	const drain = 2 * time.Second
	for _, announce := range []bool{true, false} {
		var worst time.Duration
		for phase := range 7 {
			offset := time.Duration(phase) * s3lect.DefaultFrequentInterval / 7
			t.Run(fmt.Sprintf("announce=%v/phase %v", announce, offset), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					outage, move := sigtermAt(t, announce, offset, drain)
					worst = max(worst, outage)
					if announce && outage > drain+time.Second {
						t.Errorf("outage %v; want at most the drain (%v) plus 1s", outage, drain)
					}
					if lim := s3lect.DefaultInfrequentInterval + s3lect.DefaultFrequentInterval + drain; announce && move > lim {
						t.Errorf("the move took %v from the signal; want at most InfrequentInterval + FrequentInterval + the drain (%v)", move, lim)
					}
					t.Logf("announce %v: outage %v, signal to the next job %v", announce, outage, move)
				})
			})
		}
		t.Logf("announce %v: worst outage over 7 phases %v (drain %v)", announce, worst, drain)
	}
}

// sigtermAt runs three members, signals the leader's runner offset after
// its followers are stable, and returns the job's outage and the time
// from the signal to the next job's start.
func sigtermAt(t *testing.T, announce bool, offset, drain time.Duration) (outage, move time.Duration) {
	c := runConfig{} // the default intervals; -announce auto
	if !announce {
		c.announce = announceFlag{set: true}
	}
	sigs := make(chan os.Signal, 1)
	var signalled time.Time
	jobs := groupOfThree(t, offset, func(ctx context.Context, e *s3lect.Elector, id string, log *jobLog) {
		if id == "a" {
			stoppedMember(ctx, e, id, c.announceLimit(), drain, sigs, log)
		} else {
			member(ctx, e, id, s3lect.DefaultLeaderTimeout/40, log)
		}
	}, func(*memstore.Store, string) {
		signalled = time.Now()
		sigs <- os.Interrupt
	})
	first, next := jobs[0], jobs[1]
	if next.id == "a" || !first.end.Before(next.start) {
		t.Errorf("next job %+v after a's %+v; want another member's, after a's stopped", next, first)
	}
	for i := 1; i < len(jobs); i++ {
		if !jobs[i-1].end.Before(jobs[i].start) {
			t.Errorf("jobs overlap: %+v and %+v", jobs[i-1], jobs[i])
		}
	}
	return next.start.Sub(first.end), next.start.Sub(signalled)
}

// stoppedMember leads as s3lect run does until a signal on sigs: then it
// announces the release as run does (announceRelease, for limit at most),
// drains for drain, resigns and leaves, as run exits.
func stoppedMember(ctx context.Context, e *s3lect.Elector, id string, limit, drain time.Duration, sigs chan os.Signal, log *jobLog) {
	lead, err := e.Campaign(ctx)
	if err != nil {
		return
	}
	j := job{id: id, term: lead.Term(), start: time.Now()}
	select {
	case <-sigs:
	case <-ctx.Done():
		return
	}
	announceRelease(lead, limit, nil, sigs)
	time.Sleep(drain) // the command gets the signal and drains
	j.end = time.Now()
	log.add(j)
	lead.Resign(context.Background())
}

// TestAnnounceReleaseEnds: an announcement run waits for ends early when
// a second signal comes, when the command exits by itself, and when the
// leadership ends, each within the same instant, and -announce off
// announces nothing.
func TestAnnounceReleaseEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(sigs chan os.Signal, exited chan struct{}, e *s3lect.Elector)
		want announceEnd
	}{
		{"second signal", func(sigs chan os.Signal, _ chan struct{}, _ *s3lect.Elector) { sigs <- os.Interrupt }, announceSignal},
		{"command exited", func(_ chan os.Signal, exited chan struct{}, _ *s3lect.Elector) { close(exited) }, announceExited},
		{"leadership ended", func(_ chan os.Signal, _ chan struct{}, e *s3lect.Elector) { e.Close() }, announceLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, lead := soleLeader(t)
				sigs, exited := make(chan os.Signal, 1), make(chan struct{})
				go func() {
					time.Sleep(3 * time.Second)
					tc.act(sigs, exited, e)
				}()
				begun := time.Now()
				end, _ := announceRelease(lead, time.Minute, exited, sigs)
				if took := time.Since(begun); end != tc.want || took != 3*time.Second {
					t.Errorf("announceRelease ended %d after %v; want %d at 3s, when it happened", end, took, tc.want)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		_, lead := soleLeader(t)
		var c runConfig
		if err := c.announce.Set("off"); err != nil || c.announceLimit() != 0 {
			t.Fatalf("-announce off: %v, limit %v; want 0", err, c.announceLimit())
		}
		begun := time.Now()
		if end, _ := announceRelease(lead, c.announceLimit(), nil, nil); end != announced || time.Since(begun) != 0 {
			t.Errorf("-announce off: %d after %v; want announced at once", end, time.Since(begun))
		}
	})
}

// TestAnnounceLimit: -announce's default follows the intervals; a
// duration or off is taken as given.
func TestAnnounceLimit(t *testing.T) {
	for _, tc := range []struct {
		flag                 string
		frequent, infrequent time.Duration
		want                 time.Duration
	}{
		{"auto", 0, 0, 35 * time.Second},
		{"auto", 2 * time.Second, 10 * time.Second, 12 * time.Second},
		{"15s", 0, 0, 15 * time.Second},
		{"off", 0, 0, 0},
	} {
		c := runConfig{frequent: tc.frequent, infrequent: tc.infrequent}
		if err := c.announce.Set(tc.flag); err != nil {
			t.Fatalf("-announce %s: %v", tc.flag, err)
		}
		if got := c.announceLimit(); got != tc.want || c.announce.String() != tc.flag {
			t.Errorf("-announce %s at %v/%v: limit %v, shown as %q; want %v", tc.flag, tc.frequent, tc.infrequent, got, c.announce.String(), tc.want)
		}
	}
}

// soleLeader returns an elector on a memory store of its own, closed when
// the test ends, and the leadership it won.
func soleLeader(t *testing.T) (*s3lect.Elector, *s3lect.Leadership) {
	t.Helper()
	e, err := s3lect.New(s3lect.ElectorConfig{Store: memstore.New(), LockfilePath: "k", ServerID: "a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	lead, err := e.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return e, lead
}
