package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
)

// runner campaigns, runs the command while leading, and stops it in time.
type runner struct {
	o         runConfig
	e         *s3lect.Elector
	st        store.Store // the elector's store, read once after a leadership is lost (stepRequest)
	key       string
	where     string
	endpoint  string // the store's endpoint as a person names it, for the never-answered warning
	command   []string
	sigs      chan os.Signal // only the runner's goroutine reads it
	log       *runLog
	killAfter time.Duration // from the end of a leadership to SIGKILL
	answered  atomic.Bool   // the store has answered a read since start
	noAnswer  atomic.Bool   // -connect-timeout ran out before it did
	holdOff   atomic.Int64  // until when (Unix ns) this member stays out of the election after a step-down
	changes   atomic.Uint64 // changes of leader this runner has seen (its own wins included): s3lect_run_leader_changes_total
	running   atomic.Bool   // the command runs
	warm      *warmGuard    // a guard started while campaigning, for the next command; the runner's goroutine's alone
	started   time.Time     // when run started, for /healthz
}

// printf prints one line of the run's narration (runLog: stamped with
// the time, or a JSON object). An error that says "s3lect:" itself is not
// prefixed twice.
func (r *runner) printf(format string, args ...any) {
	r.log.log(slog.LevelInfo, fmt.Sprintf(format, args...))
}

// event is printf for a line a log collector may look for: its level,
// and in JSON its event name and fields (slog's key, value pairs).
func (r *runner) event(level slog.Level, event string, fields []any, format string, args ...any) {
	r.log.log(level, fmt.Sprintf(format, args...), append([]any{"event", event, "id", r.o.id}, fields...)...)
}

// unprefixed drops the "s3lect: " that the library's errors begin with
// from a message that is printed after a prefix of the command's own
// ("s3lect: s3lect: ..." read as a stutter).
func unprefixed(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "s3lect: "), ": s3lect: ", ": ")
}

func (r *runner) loop() int {
	defer r.discardWarm()
	for {
		lead, end, code, ok := r.campaign()
		if !ok {
			return code
		}
		code, again := r.supervise(lead)
		end()
		if !again {
			return code
		}
		if r.o.once {
			return exitLost
		}
	}
}

// startCommand starts the command in a process group of its own, under
// the guard started while campaigning (prestartGroup: its start is then
// off the path from the leadership to the command), or a new one.
func (r *runner) startCommand(extra []string) (*group, error) {
	if w := r.warm; w != nil {
		r.warm = nil
		return w.start(extra)
	}
	return startGroup(r.command, append(os.Environ(), extra...))
}

// discardWarm ends the guard started in advance, if it was not used.
func (r *runner) discardWarm() {
	if r.warm != nil {
		r.warm.discard()
		r.warm = nil
	}
}

// campaign waits until this instance leads, printing what it sees while
// it waits. ok is false when the run ends instead, with status code. end
// must be called once the leadership is over: the leadership's context
// derives from the campaign's.
func (r *runner) campaign() (lead *s3lect.Leadership, end func(), code int, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	timedOut, stopTimers := r.campaignTimers(cancel)
	defer stopTimers()
	r.event(slog.LevelInfo, "campaigning", []any{"lockfile", r.where}, "%s campaigning for %s", r.o.id, r.where)
	if r.warm == nil {
		r.warm, _ = prestartGroup(r.command, nil) // best effort: startCommand starts a guard then if this failed
	}
	obsCtx, obsStop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.narrate(r.e.Observe(obsCtx))
	}()
	defer func() { obsStop(); <-watched }()

	type result struct {
		lead *s3lect.Leadership
		err  error
	}
	won := make(chan result, 1)
	go func() {
		l, err := r.e.Campaign(ctx)
		won <- result{l, err}
	}()
	var res result
	select {
	case res = <-won:
	case sig := <-r.sigs:
		r.printf("%v before leading; stopping (nothing ran)", sig)
		cancel()
		<-won // Campaign gives back anything it had won
		return nil, nil, exitOK, false
	}
	if res.err == nil && timedOut() {
		// -try ran out just as this instance won: the leadership is
		// cancelled already; give it back.
		r.release(res.lead)
		res.lead, res.err = nil, context.DeadlineExceeded
	}
	obsStop()
	<-watched // no narration after the outcome's line
	if res.err == nil {
		r.changes.Add(1)
		r.event(slog.LevelInfo, "leading", []any{"term", res.lead.Term()}, "%s leads %s (term %d); starting %s", r.o.id, r.where, res.lead.Term(), r.command[0])
		return res.lead, cancel, 0, true
	}
	cancel()
	return nil, nil, r.campaignFailed(res.err, timedOut()), false
}

// campaignTimers cancels a campaign, through cancel, when -try runs out
// and when -connect-timeout does before the store has answered once.
// timedOut reports whether -try ran out; stop stops both timers.
func (r *runner) campaignTimers(cancel func()) (timedOut func() bool, stop func()) {
	var tried atomic.Bool
	stops := []func() bool{}
	if r.o.try > 0 {
		stops = append(stops, time.AfterFunc(r.o.try, func() { tried.Store(true); cancel() }).Stop)
	}
	if r.o.connectTimeout > 0 && !r.answered.Load() {
		// A store that has not answered once since start is almost always
		// a misconfiguration: give up after -connect-timeout, with a
		// status of its own. Once it has answered, outages are waited out.
		stops = append(stops, time.AfterFunc(r.o.connectTimeout, func() {
			if !r.answered.Load() {
				r.noAnswer.Store(true)
				cancel()
			}
		}).Stop)
	}
	return tried.Load, func() {
		for _, s := range stops {
			s()
		}
	}
}

// campaignFailed says why a campaign ended without a leadership, with
// err, and returns the exit status.
func (r *runner) campaignFailed(err error, timedOut bool) int {
	switch {
	case r.noAnswer.Load():
		r.event(slog.LevelError, "no_answer", nil, "the store at %s has not answered since start, for -connect-timeout %v; giving up. %s",
			r.endpoint, r.o.connectTimeout, noAnswerFix(r.endpoint))
		return exitNoAnswer
	case timedOut:
		who := "nobody leads"
		if rec, ok := r.e.Leader(); ok {
			who = fmt.Sprintf("%s leads (term %d)", rec.LeaderID, rec.Term)
		}
		r.event(slog.LevelWarn, "try_expired", nil, "not leader of %s within -try %v; %s", r.where, r.o.try, who)
		return exitTry
	}
	return reportErr(r.log.writer(slog.LevelError), "s3lect run", err)
}

// narrate prints who leads, at once and at every change, and every store
// error, one line each: an error that persists is repeated every
// errRepeat, and its end is reported.
func (r *runner) narrate(changes <-chan s3lect.Change) {
	tick := time.NewTicker(errRepeat)
	defer tick.Stop()
	var n narration
	for {
		select {
		case c, ok := <-changes:
			if !ok {
				return
			}
			if c.Err != nil {
				r.storeError(&n, c.Err)
				continue
			}
			r.answered.Store(true)
			if n.lastErr != "" {
				r.printf("store reachable again")
				n.lastErr, n.lastCause = "", ""
			}
			r.leaderSeen(&n, c)
		case <-tick.C:
			if n.lastErr != "" && !r.noAnswer.Load() {
				r.event(slog.LevelWarn, "store_error", nil, "store error persists: %s%s (retrying)", n.lastErr, hint(errors.New(n.lastErr)))
			}
		}
	}
}

// narration is what narrate has printed.
type narration struct {
	last      s3lect.Change
	seen      bool
	lastErr   string // the last store error printed
	lastCause string // and its cause (errorCause)
}

// storeError prints a store error the elector saw, once per cause.
func (r *runner) storeError(n *narration, err error) {
	switch {
	case store.IsPermanent(err):
		return // Campaign returns it; the run ends saying so
	case r.noAnswer.Load():
		return // giving up: campaign says so
	}
	cause := errorCause(err)
	if cause == n.lastCause {
		return
	}
	if !r.answered.Load() && n.lastCause == "" {
		r.event(slog.LevelWarn, "store_error", nil, "WARNING: the store at %s has not answered since start: %v. %s "+
			"Retrying; giving up after -connect-timeout %v unless it answers.", r.endpoint, withoutNeverAnswered(err), noAnswerFix(r.endpoint), r.o.connectTimeout)
	} else {
		r.event(slog.LevelWarn, "store_error", nil, "store error: %v%s (retrying)", err, hint(err))
	}
	n.lastErr, n.lastCause = err.Error(), cause
}

// leaderSeen prints who leads when it changed, and counts the change.
func (r *runner) leaderSeen(n *narration, c s3lect.Change) {
	if n.seen && c.Leader.LeaderID == n.last.Leader.LeaderID && c.Leader.Term == n.last.Leader.Term && c.IsLeader == n.last.IsLeader {
		return
	}
	if n.seen && c.Leader.LeaderID != "" && (c.Leader.LeaderID != n.last.Leader.LeaderID || c.Leader.Term != n.last.Leader.Term) {
		r.changes.Add(1)
	}
	n.last, n.seen = c, true
	if c.IsLeader {
		return // campaign says so
	}
	msg := describe(c.Leader, time.Now())
	if until := time.Unix(0, r.holdOff.Load()); c.Leader.LeaderID == "" && time.Now().Before(until) {
		msg = fmt.Sprintf("nobody leads (released by this member's step-down); holding off until about %s so that another member takes over",
			until.UTC().Format("15:04:05"))
	}
	r.event(slog.LevelInfo, "waiting", []any{"leader", c.Leader.LeaderID, "term", c.Leader.Term}, "waiting: %s", msg)
}

// describe says who leads, as a waiting instance sees it at now. The
// leadership began Held before its last write (lastUpdated, by the
// writer's clock): never when this instance first saw it.
func describe(rec s3lect.Record, now time.Time) string {
	if rec.LeaderID == "" {
		return "nobody leads (lockfile absent, released or expired); taking over when allowed"
	}
	since := rec.LastUpdated.Add(-time.Duration(rec.Held) * time.Millisecond)
	addr := ""
	if rec.LeaderAddr != "" {
		addr = " at " + rec.LeaderAddr
	}
	return fmt.Sprintf("%s%s leads (term %d) since about %s (for %v)", rec.LeaderID, addr, rec.Term,
		since.UTC().Format("15:04:05"), max(now.Sub(since), 0).Round(time.Second))
}

// supervise runs the command while lead lives. It returns the status to
// exit with, and whether the leadership ended under the command (so that
// the loop campaigns again).
func (r *runner) supervise(lead *s3lect.Leadership) (int, bool) {
	g, err := r.startCommand(childEnv(r.o, lead.Term())) // S3LECT_TERM, S3LECT_STORE: fence.go
	if err != nil {
		r.event(slog.LevelError, "start_failed", nil, "start %s: %v", r.command[0], err)
		r.release(lead)
		return exitNotStart, false
	}
	r.running.Store(true)
	defer r.running.Store(false)
	select {
	case <-g.exited:
		r.reap(g)
		r.release(lead)
		return g.status, false

	case sig := <-r.sigs:
		switch end, again := r.announce(lead, g, sig); end {
		case announceExited:
			r.reap(g)
			r.release(lead)
			return g.status, false
		case announceLost:
			r.lost(lead, g)
			return g.status, false
		case announceSignal:
			r.printf("%v again: ending the announcement; the command gets it now", again)
		}
		r.printf("%v: forwarding it to the command; it has -grace %v to exit while this instance keeps the lease", sig, r.o.grace)
		g.signal(sigNumber(sig))
		t := time.NewTimer(r.o.grace)
		defer t.Stop()
		select {
		case <-g.exited:
		case <-t.C:
			r.printf("the command did not exit within -grace %v; killing its process group", r.o.grace)
		case sig := <-r.sigs:
			r.printf("%v again: killing the command's process group", sig)
		case <-lead.Context().Done():
			r.lost(lead, g)
			return g.status, false
		}
		r.reap(g)
		r.release(lead)
		return g.status, false

	case <-lead.Context().Done():
		req, asked := r.lost(lead, g)
		r.handBack(lead, req, asked)
		return exitLost, true
	}
}

// announce announces the release on a voluntary stop (sig), while the
// command runs on, for -announce at most (announce.go), saying so.
func (r *runner) announce(lead *s3lect.Leadership, g *group, sig os.Signal) (announceEnd, os.Signal) {
	limit := r.o.announceLimit()
	if limit <= 0 {
		return announced, nil
	}
	storage := r.o.peerAddr == "" // in peer mode Announce returns at once: nothing to say
	if storage {
		r.event(slog.LevelInfo, "announcing", []any{"term", lead.Term()}, "%v: announcing the release in the renewals (for -announce %v at most) while the command runs on, so that the followers are reading when it lands; a second signal forwards it now", sig, limit)
	}
	begun := time.Now()
	end, again := announceRelease(lead, limit, g.exited, r.sigs)
	if end == announced && storage {
		r.event(slog.LevelInfo, "announced", []any{"term", lead.Term()}, "release announced (%v): stopping the command", time.Since(begun).Round(time.Millisecond))
	}
	return end, again
}

// handBack tells the elector the command is gone after a leadership ended
// under it: a leader asked to step down (s3lect release) releases the
// lockfile now, and stays out of the next election for a while
// (docs/protocol.md, section 11). After any other end it does nothing.
// req and asked are the step-down request lost found, if it found one.
func (r *runner) handBack(lead *s3lect.Leadership, req s3lect.Record, asked bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lead.Resign(ctx); err != nil {
		r.printf("release %s after the step-down: %v (followers take over after LeaderTimeout)", r.where, err)
		return
	}
	if !asked {
		return
	}
	hold := r.holdOffTime(req.To)
	r.holdOff.Store(time.Now().Add(hold).UnixNano())
	r.printf("stepped down at an operator's request (s3lect release): released %s to %s; "+
		"this member stays out of the next election for about %v so that %s takes over", r.where,
		cmp.Or(req.To, "the next member to read it"), hold, cmp.Or(req.To, "another member"))
}

// lost stops the command after the leadership ended under it: SIGTERM at
// once, SIGKILL after killAfter, and returns once no process of the group
// runs any more. A leadership lost to another writer may have been an
// operator's step-down request (s3lect release): the lockfile is read once,
// after SIGTERM is sent, to say which; the request found is returned for
// handBack, which must not read again (Resign may have replaced it by
// then, and a second read under load may time out).
func (r *runner) lost(lead *s3lect.Leadership, g *group) (req s3lect.Record, asked bool) {
	ended := time.Now()
	g.signal(syscall.SIGTERM) // first: nothing below delays the stop
	t := time.NewTimer(r.killAfter)
	defer t.Stop()
	cause := context.Cause(lead.Context())
	why := unprefixed(fmt.Sprint(cause))
	if errors.Is(cause, s3lect.ErrLeadershipLost) {
		req, asked = r.stepRequest(lead.Term())
		// The cause says so even when the read, bounded by half the time
		// to SIGKILL, does not come back in time on a loaded machine (the
		// request's -to is then unknown here; the library hands over to it).
		asked = asked || errors.Is(cause, s3lect.ErrAskedToStepDown)
		if sd := (*s3lect.StepDownError)(nil); req.To == "" && errors.As(cause, &sd) {
			req.To = sd.To // the cause names the member when the read did not come back
		}
		if asked {
			why = "asked to step down by s3lect release, to hand over to " + cmp.Or(req.To, "another member")
		}
	}
	r.event(slog.LevelWarn, "leadership_ended", []any{"term", lead.Term(), "cause", why}, "leadership ended (%s); stopping the command: SIGTERM sent, SIGKILL in %v", why, r.killAfter)
	select {
	case <-g.exited:
	case <-t.C:
	}
	if _, err := g.kill(); err != nil {
		r.printf("%v", err)
	}
	r.event(slog.LevelInfo, "command_stopped", []any{"status", g.status}, "command stopped (status %d) %v after the leadership ended", g.status, time.Since(ended).Round(time.Millisecond))
	return req, asked
}

// stepRequest reads the lockfile once, for at most half the time to
// SIGKILL, and returns the step-down request over this member's
// leadership of term, if it finds one.
func (r *runner) stepRequest(term uint64) (s3lect.Record, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), min(r.killAfter/2, 2*time.Second))
	defer cancel()
	rec, found, err := readLockfile(ctx, r.st, r.key)
	// An announced step-down (docs/moves.md, 11.5) ends the leadership
	// at the announced moment: the lockfile then holds this member's own
	// last renewal, announcing the release, with the request's to.
	if err != nil || !found || rec.StepDown == "" && rec.ReleaseAt == 0 || rec.LastUpdated.IsZero() || rec.LeaderID != r.o.id || rec.Term != term {
		return s3lect.Record{}, false
	}
	return rec, true
}

// holdOffTime is about how long a member that released its leadership
// stays out of the next election, so that another member takes over
// first (the library's hold-off: the others' next read); with a named
// member (-to), the others wait the transfer window too.
func (r *runner) holdOffTime(to string) time.Duration {
	fi := cmp.Or(r.o.frequent, s3lect.DefaultFrequentInterval)
	ii := cmp.Or(r.o.infrequent, s3lect.DefaultInfrequentInterval)
	lt := cmp.Or(r.o.timeout, s3lect.DefaultLeaderTimeout)
	hold := ii + fi
	if r.o.peerAddr != "" {
		hold = fi
	}
	if to != "" {
		hold = max(hold, lt+fi)
	}
	return hold
}

// reap kills what is left of the group once the command is done with it.
func (r *runner) reap(g *group) {
	if _, err := g.kill(); err != nil {
		r.printf("%v", err)
	}
}

// release gives the lockfile back so that a follower starts at its next
// read instead of a lease later.
func (r *runner) release(lead *s3lect.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lead.Resign(ctx); err != nil {
		r.printf("release %s: %v (followers take over after LeaderTimeout)", r.where, err)
		return
	}
	r.event(slog.LevelInfo, "released", []any{"term", lead.Term()}, "released %s", r.where)
}
