// Command demo shows s3lect electing a leader, failing over after a crash
// and handing over on resignation, with a live timeline.
//
// By default it runs three candidates in one process on the in-memory
// store with timings scaled down tenfold, and exits by itself:
//
//	go run ./examples/demo
//
// Flags choose the number of candidates and real default timings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

func main() {
	var (
		n        = flag.Int("n", 3, "number of candidates")
		realTime = flag.Bool("real", false, "use the default timings (5s / 30s / 15s) instead of scaling them down tenfold")
	)
	flag.Parse()
	if *n < 2 {
		fmt.Fprintln(os.Stderr, "demo: -n must be at least 2 so that someone can take over")
		os.Exit(2)
	}
	cfg := s3lect.ElectorConfig{
		FrequentInterval:   500 * time.Millisecond,
		InfrequentInterval: 3 * time.Second,
		LeaderTimeout:      1500 * time.Millisecond,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if *realTime {
		cfg.FrequentInterval, cfg.InfrequentInterval, cfg.LeaderTimeout = 0, 0, 0
	}
	if err := run(context.Background(), *n, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// candidate is one instance of the service, with a store connection the
// demo can cut to simulate a crash.
type candidate struct {
	id   string
	conn *cuttable
	e    *s3lect.Elector
}

// timeline prints events with the time since the start.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (t *timeline) say(who, what string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%7.2fs  %-6s %s\n", time.Since(t.start).Seconds(), who, fmt.Sprintf(what, args...))
}

func run(ctx context.Context, n int, cfg s3lect.ElectorConfig, w io.Writer) error {
	mem := memstore.New()
	cfg.LockfilePath = "leader/demo.json"
	tl := &timeline{w: w, start: time.Now()}
	lt := cfg.LeaderTimeout
	if lt == 0 {
		lt = s3lect.DefaultLeaderTimeout
	}
	fmt.Fprintf(w, "s3lect demo: %d candidates on the in-memory store, LeaderTimeout %v\n\n", n, lt)

	// Every candidate campaigns in a loop and reports when it wins.
	type win struct {
		c    *candidate
		lead *s3lect.Leadership
		at   time.Time
	}
	wins := make(chan win, n)
	var cands []*candidate
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		c := &candidate{id: fmt.Sprintf("node-%d", i+1), conn: &cuttable{inner: mem}}
		ccfg := cfg
		ccfg.Store, ccfg.ServerID, ccfg.ServerAddr = c.conn, c.id, fmt.Sprintf("127.0.0.1:%d", 9000+i)
		e, err := s3lect.New(ccfg)
		if err != nil {
			return err
		}
		c.e = e
		defer e.Close()
		cands = append(cands, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lead, err := e.Campaign(ctx)
				if err != nil {
					return // closed
				}
				tl.say(c.id, "became leader, term %d", lead.Term())
				wins <- win{c, lead, time.Now()}
				<-lead.Done()
				tl.say(c.id, "stopped leading: %v", context.Cause(lead.Context()))
				if c.conn.isCut() {
					return
				}
			}
		}()
	}

	// A watcher that never campaigns prints what the group sees.
	watcher := cfg
	watcher.Store, watcher.ServerID = mem, "watcher"
	we, err := s3lect.New(watcher)
	if err != nil {
		return err
	}
	defer we.Close()
	changes := we.Changes()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for c := range changes {
			if c.Leader.LeaderID == "" {
				tl.say("watch", "no live leader")
			} else {
				tl.say("watch", "leader is %s (term %d)", c.Leader.LeaderID, c.Leader.Term)
			}
		}
	}()

	first := <-wins
	time.Sleep(4 * lt)

	tl.say(first.c.id, "CRASH: cut off from the store, never resigns")
	crashed := time.Now()
	first.c.conn.cut()
	second := <-wins
	tl.say("demo", "failover took %.2fs (LeaderTimeout %v)", second.at.Sub(crashed).Seconds(), lt)
	time.Sleep(4 * lt)

	tl.say(second.c.id, "RESIGN: releasing the lockfile")
	resigned := time.Now()
	if err := second.lead.Resign(ctx); err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	third := <-wins
	tl.say("demo", "handover took %.2fs", third.at.Sub(resigned).Seconds())
	time.Sleep(2 * lt)
	tl.say("demo", "done; closing every elector")
	for _, c := range cands {
		c.e.Close()
	}
	we.Close()
	return nil
}

// cuttable passes calls to a store until cut, then fails them all, as a
// crashed process's connection would (from the store's point of view, the
// process is gone).
type cuttable struct {
	inner store.Store
	mu    sync.Mutex
	gone  bool
}

var errCut = errors.New("demo: candidate crashed")

func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
}

func (c *cuttable) isCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

func (c *cuttable) Get(ctx context.Context, key string) ([]byte, string, error) {
	if c.isCut() {
		return nil, "", errCut
	}
	return c.inner.Get(ctx, key)
}

func (c *cuttable) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if c.isCut() {
		return "", errCut
	}
	return c.inner.PutIfMatch(ctx, key, data, etag)
}
