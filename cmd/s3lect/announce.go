package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/s3lect/s3lect"
)

// A voluntary stop (SIGTERM or SIGINT to run) announces the release first
// (docs/moves.md, section 11.4): the leader's renewals say when it
// will release, the command keeps running until then, and only then gets
// the signal, drains (-grace) and is released. In storage mode the
// followers are reading when the release lands, so the job's outage is
// the drain and a fraction of a second instead of up to an
// InfrequentInterval; in peer mode the library announces nothing and the
// signal is forwarded at once.

// announceFlag is -announce: auto (the default: as long as the
// announcement takes, InfrequentInterval + FrequentInterval at most), off
// (the old immediate release), or a duration that bounds it (to fit a
// Kubernetes grace period).
type announceFlag struct {
	set   bool          // a duration or off was given
	limit time.Duration // 0: off
}

func (a *announceFlag) String() string {
	switch {
	case a == nil || !a.set:
		return "auto"
	case a.limit == 0:
		return "off"
	}
	return a.limit.String()
}

func (a *announceFlag) Set(s string) error {
	switch s {
	case "auto":
		*a = announceFlag{}
		return nil
	case "off", "0":
		*a = announceFlag{set: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want auto, off or a duration that is not negative")
	}
	*a = announceFlag{set: true, limit: d}
	return nil
}

// announceLimit is how long a voluntary stop may wait for the announced
// moment before the command gets the signal: -announce, or by default
// InfrequentInterval + FrequentInterval, by when the moment has come
// (moves.md, section 11.4). 0: no announcement.
func (c runConfig) announceLimit() time.Duration {
	if c.announce.set {
		return c.announce.limit
	}
	return cmp.Or(c.infrequent, s3lect.DefaultInfrequentInterval) + cmp.Or(c.frequent, s3lect.DefaultFrequentInterval)
}

// announceEnd is how an announcement ended.
type announceEnd int

const (
	announced      announceEnd = iota // the announced moment came (or limit ran out, or there was nothing to wait for)
	announceExited                    // the command exited by itself meanwhile
	announceSignal                    // another signal came: stop now
	announceLost                      // the leadership ended meanwhile
)

// announceRelease announces lead's release and waits, while the command
// runs on, for the announced moment, for limit at most; it returns
// earlier when the command exits (exited), another signal comes (sigs),
// or the leadership ends. limit 0 announces nothing.
func announceRelease(lead *s3lect.Leadership, limit time.Duration, exited <-chan struct{}, sigs <-chan os.Signal) (announceEnd, os.Signal) {
	if limit <= 0 {
		return announced, nil
	}
	ctx, cancel := context.WithTimeout(lead.Context(), limit)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); lead.Announce(ctx, "") }()
	defer func() { cancel(); <-done }()
	select {
	case <-done:
		if lead.Context().Err() != nil {
			return announceLost, nil
		}
		return announced, nil
	case <-exited:
		return announceExited, nil
	case sig := <-sigs:
		return announceSignal, sig
	case <-lead.Context().Done():
		return announceLost, nil
	}
}
