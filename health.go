package s3lect

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/s3lect/s3lect/internal/retry"
)

// healthPingTimeout is how long HealthHandler waits for an elector's run
// loop to answer before it reports the elector stuck.
const healthPingTimeout = 500 * time.Millisecond

// HealthHandler returns an http.Handler to mount as a process's liveness
// probe (for example Kubernetes' livenessProbe). It answers 200 "ok" when
// every elector given is healthy, and 503 with one line per unhealthy
// elector otherwise. An elector is unhealthy when:
//
//   - it holds a leadership whose last successful write is older than its
//     lease allows: LeaderTimeout while the leadership is live, plus the
//     longest its release can take under the retry policy once it has
//     ended. Such a leader is stuck (a store call that never returns, a
//     process starved of CPU) and restarting the process is the cure; or
//   - its run loop does not answer within 500 ms.
//
// Followers and watchers are healthy whatever the store does: restarting
// them would not bring the store back. Electors not yet started, or
// closed, are healthy. The handler starts nothing and changes nothing.
func HealthHandler(electors ...*Elector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var bad []string
		for _, e := range electors {
			if err := e.health(r.Context()); err != nil {
				bad = append(bad, err.Error())
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if len(bad) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(bad, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// health returns why e is unhealthy, or nil.
func (e *Elector) health(ctx context.Context) error {
	e.life.Lock()
	running := e.started && !e.closed
	e.life.Unlock()
	if !running {
		return nil
	}
	if s := e.snap.Load(); s.holding {
		limit := e.cfg.LeaderTimeout
		if s.lead == nil || !s.lead.live() {
			limit += e.releaseBudget()
		}
		if age := e.clock.Now().Sub(s.lastWrite); age > limit {
			return fmt.Errorf("s3lect: %q: stuck leader: last renewed %v ago, more than the %v its lease allows",
				e.key, age.Round(time.Millisecond), limit)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, healthPingTimeout)
	defer cancel()
	if err := e.ping(pctx); err != nil && err != ErrClosed {
		return fmt.Errorf("s3lect: %q: run loop did not answer within %v: %w", e.key, healthPingTimeout, err)
	}
	return nil
}

// releaseBudget is the longest an ended leadership's release may take: a
// write, a read and a write again, each with every retry and each attempt
// up to FrequentInterval.
func (e *Elector) releaseBudget() time.Duration {
	one := e.cfg.FrequentInterval
	for b := retry.Schedule(); ; {
		d := b.NextBackOff()
		if d == backoff.Stop {
			break
		}
		one += d + e.cfg.FrequentInterval
	}
	return 3 * one
}
