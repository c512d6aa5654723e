// Command workerpool shows many electors in one process: N workers each
// run an elector for every one of M shards (lockfiles shards/<i>.json),
// and whoever leads a shard does that shard's work under that shard's
// lead.Context(). When a worker stops (it resigns) or dies (it does not),
// its shards move to the workers that are left.
//
//	go run ./examples/workerpool            # 3 workers, 6 shards, in memory
//	go run ./examples/workerpool -workers 4 -shards 12
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/cutstore"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

func main() {
	workers := flag.Int("workers", 3, "number of workers")
	shards := flag.Int("shards", 6, "number of shards")
	speed := flag.Int("speed", 10, "divide the default intervals by this")
	flag.Parse()
	if err := run(context.Background(), *workers, *shards, *speed, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "workerpool:", err)
		os.Exit(1)
	}
}

// worker runs one elector per shard, all on one store connection it can
// lose.
type worker struct {
	id       string
	conn     *cutstore.Store
	electors []*s3lect.Elector
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func run(ctx context.Context, nWorkers, nShards, speed int, w io.Writer) error {
	if nWorkers < 2 || nShards < 1 || speed < 1 {
		return errors.New("need at least 2 workers, 1 shard, and a speed of at least 1")
	}
	mem := memstore.New()
	start := time.Now()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(w, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	cfg := func(st store.Store, shard int, id string) s3lect.ElectorConfig {
		return s3lect.ElectorConfig{
			Store: st, LockfilePath: fmt.Sprintf("shards/%d.json", shard), ServerID: id,
			FrequentInterval:   s3lect.DefaultFrequentInterval / time.Duration(speed),
			InfrequentInterval: s3lect.DefaultInfrequentInterval / time.Duration(speed),
			LeaderTimeout:      s3lect.DefaultLeaderTimeout / time.Duration(speed),
			Logger:             slog.New(slog.DiscardHandler),
		}
	}
	lt := s3lect.DefaultLeaderTimeout / time.Duration(speed)

	// The shard map, kept from the Changes of one watcher per shard.
	owners := make([]string, nShards)
	var mapMu sync.Mutex
	printMap := func() {
		mapMu.Lock()
		defer mapMu.Unlock()
		count := map[string]int{}
		cells := make([]string, nShards)
		for i, o := range owners {
			if o == "" {
				o = "-"
			}
			count[o]++
			cells[i] = fmt.Sprintf("%d:%s", i, o)
		}
		var per []string
		for o, n := range count {
			per = append(per, fmt.Sprintf("%s=%d", o, n))
		}
		slices.Sort(per)
		say("shard map  %s   (%s)", strings.Join(cells, " "), strings.Join(per, " "))
	}
	var watchers []*s3lect.Elector
	var wwg sync.WaitGroup
	defer wwg.Wait()
	for i := range nShards {
		e, err := s3lect.New(cfg(mem, i, "watcher"))
		if err != nil {
			return err
		}
		defer e.Close()
		watchers = append(watchers, e)
		changes := e.Changes()
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for c := range changes {
				mapMu.Lock()
				changed := owners[i] != c.Leader.LeaderID
				owners[i] = c.Leader.LeaderID
				mapMu.Unlock()
				if changed {
					printMap()
				}
			}
		}()
	}

	var pool []*worker
	for n := range nWorkers {
		wk := &worker{id: fmt.Sprintf("w%d", n+1), conn: cutstore.New(mem)}
		wctx, cancel := context.WithCancel(ctx)
		wk.cancel = cancel
		for i := range nShards {
			e, err := s3lect.New(cfg(wk.conn, i, wk.id))
			if err != nil {
				return err
			}
			wk.electors = append(wk.electors, e)
			// Each shard prefers one worker: the others start campaigning a
			// little later, so the shards spread out at start-up.
			delay := time.Duration((i-n+nWorkers*nShards)%nWorkers) * lt / 4
			wk.wg.Add(1)
			go func() {
				defer wk.wg.Done()
				select {
				case <-time.After(delay):
				case <-wctx.Done():
					return
				}
				for {
					lead, err := e.Campaign(wctx)
					if err != nil {
						return
					}
					processShard(lead.Context(), i) // returns when leadership ends
					if wk.conn.IsCut() {
						return
					}
				}
			}()
		}
		pool = append(pool, wk)
	}
	defer func() {
		for _, wk := range pool {
			wk.cancel()
			for _, e := range wk.electors {
				e.Close()
			}
			wk.wg.Wait()
		}
	}()

	time.Sleep(4 * lt)
	stopped := pool[0]
	say("%s stops: it resigns every shard it leads", stopped.id)
	stopped.cancel() // Campaign contexts end: leaderships are released
	stopped.wg.Wait()
	time.Sleep(4 * lt)

	died := pool[1]
	say("%s dies: its store connection is cut and it never resigns", died.id)
	died.conn.Cut()
	time.Sleep(6 * lt)
	say("done")
	return nil
}

// processShard stands for the work a shard's leader does. It must stop
// when ctx ends: that is when this worker may no longer lead the shard.
func processShard(ctx context.Context, shard int) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = shard // one unit of work on the shard
		}
	}
}
