package pool

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestResignAfterALostSessionInALook: two workers share 40 shards; one
// of them crashes, and the survivor's look to take its 20 shards over
// meets the survivor's own store hanging (every call hangs until its
// context ends, as over a cut connection): the survivor's session is
// lost, its leaderships end, and each Work, on its way out, calls
// lead.Resign (defer lead.Resign(ctx)). A leadership ended by its
// session releases nothing, so Resign returns nil at once, and the last
// within the session's lease from its last renewal before the hang. The
// hang begins at eight phases around the survivor's takeover look, and
// either worker is the survivor. (Review rev28b's
// "ResignWaitsForAFutileLook": Resign returned after 23 × LeaderTimeout,
// the look going on with claim rounds for a session that was gone. With
// the rounds stopped when the session changed, Resign still waited for
// the loop to take the leadership's end in after the tick in progress:
// up to 4.89 × LeaderTimeout here, the look's reads hanging one after
// the other and its first round's record reads for a session already
// lost; 1.67 × with that round skipped too. -sim.mutate=settlewaits.)
func TestResignAfterALostSessionInALook(t *testing.T) {
	defer setMutation(t)()
	var shards []string
	for i := range 40 {
		shards = append(shards, fmt.Sprintf("s%02d", i))
	}
	for _, survivor := range []string{"w1", "w2"} {
		for phase := range 8 {
			t.Run(fmt.Sprintf("%s/phase%d", survivor, phase), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					mem := memstore.New()
					trace := &resignTrace{took: make(chan resigned, 64)}
					sts := map[string]*crashStore{}
					var stops []func()
					for _, id := range []string{"w1", "w2"} {
						st := &crashStore{Store: mem}
						sts[id] = st
						p, err := New(Config{Store: st, Prefix: "pool/", ID: id, Shards: shards, Logger: quiet, Work: trace.work(id)})
						if err != nil {
							t.Fatal(err)
						}
						ctx, cancel := context.WithCancel(context.Background())
						done := make(chan struct{})
						go func() { defer close(done); p.Run(ctx) }()
						stops = append(stops, func() { cancel(); <-done })
					}
					dead := "w2"
					if survivor == "w2" {
						dead = "w1"
					}
					defer func() {
						sts[survivor].cut.Store(false)
						sts[dead].dead.Store(false)
						for _, stop := range stops {
							stop()
						}
					}()
					time.Sleep(4 * testLT)
					// The dead worker's lease runs out about LeaderTimeout
					// after its last renewal (on a slot): the survivor's
					// takeover look runs then. Its store hangs from eight
					// phases around it.
					untilSlot(testFI / 2)
					sts[dead].dead.Store(true)
					time.Sleep(testLT - testFI + time.Duration(phase)*testFI/4)
					sts[survivor].cut.Store(true)
					cutAt := time.Now()
					worst := resigned{took: -1}
					n := 0
					deadline := time.After(100 * testLT)
				collect:
					for {
						select {
						case r := <-trace.took:
							if r.worker != survivor {
								continue // the dead worker's, when it is stopped
							}
							n++
							if r.took > worst.took || r.err != nil {
								worst = r
							}
							if n == 20 {
								break collect
							}
						case <-deadline:
							t.Fatalf("%d of %s's 20 Works returned within 100 × LeaderTimeout of its store hanging", n, survivor)
						}
					}
					last := time.Since(cutAt)
					t.Logf("%s's last Resign returned %v after its store hung; the longest took %v (%.2f × LeaderTimeout)",
						survivor, last, worst.took, float64(worst.took)/float64(testLT))
					if worst.took != 0 || worst.err != nil {
						t.Errorf("Resign inside %s's Work for %s took %v (%v); want nil at once: its leadership was ended by its session", survivor, worst.shard, worst.took, worst.err)
					}
					// The leaderships end with the session's lease, from its
					// last renewal before the hang.
					if within := testLT - lease.Margin(testLT); last > within {
						t.Errorf("%s's last Resign returned %v after its store hung; want within its lease, %v", survivor, last, within)
					}
				})
			})
		}
	}
}
