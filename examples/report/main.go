// Command report measures s3lect and prints a markdown report: crash
// failover, graceful handover and stale-peer takeover times by mode, S3
// requests and monthly cost by group size, what 1,000 electors cost in
// one process, package pool's requests per worker and failover, and what
// a pool of 10, 30 and 100 workers costs a month on S3, GCS and Azure
// (-pool-cost), with the configuration and the machine they were
// measured on.
//
// It always measures on the in-memory store with simulated latency, and
// also on S3 or MinIO when -bucket is given (from the standard AWS
// environment; AWS_ENDPOINT_URL_S3 for MinIO, with -path-style):
//
//	go run ./examples/report -bucket b -path-style > report.md
//
// (-no-memstore measures on the bucket alone: it leaves the in-memory
// failover rows and the in-memory electors table out.) The bucket must
// exist. A trial whose first leader lost its lease before the strike (a
// store too slow for the scaled lease) is run again, and counted.
//
// A crash is modelled as a killed process (see crashModel in measure.go),
// never through a graceful shutdown; the report says so in its output.
//
// Intervals are the defaults divided by -scale (25: FrequentInterval
// 200 ms, InfrequentInterval 1.2 s, LeaderTimeout 600 ms), so a run takes
// a few minutes; times are also given as multiples of LeaderTimeout, and
// requests per hour are scaled back to the default intervals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/s3store"
)

type options struct {
	bucket    string
	pathStyle bool
	scale     int
	trials    int
	window    time.Duration // for the cost and resource measurements
	groups    []int
	electors  int
	shardK    int           // the shard table's scale
	shardII   time.Duration // the pool's InfrequentInterval in the shard table, before scaling (0: FrequentInterval)
	stagger   time.Duration // between the shard table's workers' starts
	poolW     int           // the shard table's workers
	poolN     int           // the shard table's shards
	costPools []int         // the pool cost table's numbers of workers
	shardOnly bool          // only the shard table
	shardPeer bool          // the shard table's pools in peer mode (shardpeer.go)
	noMemory  bool          // with a bucket: skip the failover rows on the in-memory store
	mode      string        // when set, only the failover rows of the mode so named
}

func main() {
	o := options{groups: []int{3, 10, 100}, electors: 1000, costPools: []int{10, 30, 100}, poolW: 10, poolN: 1000}
	flag.StringVar(&o.bucket, "bucket", "", "also measure on this S3 bucket (standard AWS environment); it must exist")
	flag.BoolVar(&o.noMemory, "no-memstore", false, "with -bucket: measure on the bucket only (no in-memory failover rows, no in-memory electors table)")
	flag.BoolVar(&o.pathStyle, "path-style", false, "path-style S3 addressing (MinIO)")
	flag.IntVar(&o.scale, "scale", 25, "divide the default intervals by this")
	flag.BoolVar(&o.shardOnly, "shards-only", false, "measure the shard table only")
	flag.BoolVar(&o.shardPeer, "shard-peer", false, "run the shard table's pools in peer mode (pool.Config.PeerMode, each worker serving pool.PeerHandler over HTTPS on loopback)")
	flag.IntVar(&o.shardK, "shard-scale", 10, "divide the default intervals by this in the shard table (1,000 shards in one process need a longer lease than -scale gives on a busy machine)")
	flag.DurationVar(&o.shardII, "shard-ii", 0, "the pools' InfrequentInterval in the shard tables, before -shard-scale divides it (ignored by the coordinator pool: Config.InfrequentInterval is deprecated)")
	flag.DurationVar(&o.stagger, "shard-stagger", 0, "start the shard tables' workers this far apart (not scaled; 0: all at once). 100 workers started at once, on a store that takes milliseconds, take many LeaderTimeouts to spread")
	flag.IntVar(&settleIntervals, "shard-settle", settleIntervals, "how many FrequentIntervals the shard tables wait after the spread before their measurement window (a spread pool's workers look a few more times, 1, 2, 4... intervals apart, until two looks find the same counts)")
	flag.IntVar(&coldSpreadWait, "shard-spread-wait", coldSpreadWait, "how long the shard tables' cold start may take to spread, in LeaderTimeouts, before the table (or a cost row) is given up")
	flag.Func("shard-pool", "the shard table's pool, as WORKERSxSHARDS (default 10x1000)", func(v string) error {
		ws, ns, ok := strings.Cut(v, "x")
		w, werr := strconv.Atoi(ws)
		n, nerr := strconv.Atoi(ns)
		if !ok || werr != nil || nerr != nil || w < 2 || n < w {
			return fmt.Errorf("%q is not WORKERSxSHARDS with at least 2 workers and a shard per worker (e.g. 30x3000)", v)
		}
		o.poolW, o.poolN = w, n
		return nil
	})
	flag.Func("pool-cost", "numbers of workers, comma-separated, of the pool cost table (default 10,30,100; \"\" leaves the table out)", func(v string) error {
		o.costPools = nil
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a number of workers", f)
			}
			o.costPools = append(o.costPools, n)
		}
		return nil
	})
	flag.StringVar(&o.mode, "mode", "", "measure only the failover rows of this mode (e.g. \"storage, InfrequentInterval = FrequentInterval\"), nothing else")
	flag.IntVar(&o.trials, "trials", 15, "failover trials per mode and event")
	flag.DurationVar(&o.window, "window", 12*time.Second, "measurement window for requests and resources")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, w io.Writer) error {
	if o.scale < 1 || o.trials < 1 || o.shardK < 1 {
		return fmt.Errorf("-scale, -shard-scale and -trials must be at least 1")
	}
	if o.mode != "" && !slices.ContainsFunc(modes, func(m mode) bool { return m.name == o.mode }) {
		var names []string
		for _, m := range modes {
			names = append(names, fmt.Sprintf("%q", m.name))
		}
		return fmt.Errorf("-mode %q: no such row; the modes are %s", o.mode, strings.Join(names, ", "))
	}
	stores, closeStores, err := openStores(ctx, o)
	if err != nil {
		return err
	}
	defer closeStores()
	fi, ii, lt := scaled(o.scale)

	fmt.Fprintf(w, "# s3lect benchmark report\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- machine: %s, %d cores, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	for _, st := range stores {
		fmt.Fprintf(w, "- store: %s\n", st.name)
	}
	fmt.Fprintf(w, "- intervals: the defaults divided by %d: FrequentInterval %v, InfrequentInterval %v, LeaderTimeout %v (the retry delays, 100 ms and 1 s, are not scaled)\n",
		o.scale, fi, ii, lt)
	fmt.Fprintf(w, "- reproduce: `go run ./examples/report %s`\n\n", strings.Join(os.Args[1:], " "))

	if o.shardOnly {
		return shardTable(ctx, o, stores, w)
	}

	fmt.Fprintf(w, "## Failover and handover\n\n")
	fmt.Fprintf(w, "%d groups of three per row, struck at a random point of their cycle once the followers are stable. "+
		"Crash failover: from the crash to the next leader's Campaign returning. "+
		"Graceful handover: from the Resign call to the next leader's Campaign returning. "+
		"Stale peer: the leader crashes and a process at its address answers every peer request with 200 and the last record, forever; "+
		"the time runs from the dead leader's last write to the next leader's Campaign returning.\n\n", o.trials)
	fmt.Fprintf(w, "How a crash is modelled: %s\n\n", crashModel)
	fmt.Fprintln(w, "| store | mode | event | p50 | p95 | max | p50 × LeaderTimeout | p95 × | max × | trials |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, st := range stores {
		for _, m := range modes {
			if o.mode != "" && m.name != o.mode {
				continue
			}
			for _, crash := range []bool{true, false} {
				if !crash && m.noHandover {
					continue
				}
				times, disturbed, err := failover(ctx, st.new, m, crash, o.trials, o.scale)
				if err != nil {
					return err
				}
				event := "graceful handover"
				switch {
				case m.stalePeer:
					event = "last write → takeover"
				case crash:
					event = "crash failover"
				}
				p50, p95, mx := percentile(times, 50), percentile(times, 95), percentile(times, 100)
				x := func(d time.Duration) float64 { return float64(d) / float64(lt) }
				trials := fmt.Sprint(len(times))
				if disturbed > 0 {
					trials += fmt.Sprintf(" (%d more discarded: the leadership changed before the strike)", disturbed)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %v | %v | %v | %.2f | %.2f | %.2f | %s |\n", st.short, m.name, event,
					ms(p50), ms(p95), ms(mx), x(p50), x(p95), x(mx), trials)
			}
		}
	}

	if o.mode != "" {
		return nil
	}
	costStore := stores[len(stores)-1]
	fmt.Fprintf(w, "\n## S3 requests and cost\n\n")
	fmt.Fprintf(w, "On %s. Storage mode, requests per hour at the default intervals (measured over %v at 1/%d scale), monthly cost at S3 Standard prices ($0.005 per 1,000 PUT, $0.0004 per 1,000 GET, %d hours). Peer mode removes the followers' GETs.\n\n", costStore.name, o.window, o.scale, hoursPerMonth)
	fmt.Fprintln(w, "| group | leader PUT/h | leader GET/h | follower GET/h | follower PUT/h | monthly cost |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, n := range o.groups {
		r, err := cost(ctx, costStore.new, n, o.scale, o.window)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.1f | $%.2f |\n", n, r.leaderPUT, r.leaderGET, r.followerGET, r.followerPUT, r.monthly(n))
	}

	if !o.noMemory {
		if err := electorsTable(ctx, o, w); err != nil {
			return err
		}
	}
	return shardTable(ctx, o, stores, w)
}

// electorsTable measures o.electors electors in one process, on the
// in-memory store.
func electorsTable(ctx context.Context, o options, w io.Writer) error {
	fmt.Fprintf(w, "\n## %d electors in one process\n\n", o.electors)
	fmt.Fprintf(w, "On the in-memory store, at 1/%d scale, measured over %v after settling. Each elector has one goroutine of the caller's calling Campaign, until it leads; goroutines, heap and stacks count it. Heap and stacks are the growth of the live heap and of goroutine stacks, divided by the electors (the budget is %d KiB of heap plus stacks per elector). CPU is in cores; store operations per second are at the scaled intervals (divide by %d for the defaults).\n\n", o.scale, o.window, perElectorLimit>>10, o.scale)
	fmt.Fprintln(w, "| layout | goroutines per elector | heap per elector | stacks per elector | heap + stacks | process RSS | CPU | store ops/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, layout := range []struct {
		name      string
		lockfiles int
	}{
		{fmt.Sprintf("%d lockfiles, every elector leads", o.electors), o.electors},
		{fmt.Sprintf("%d workers × %d shards", 10, o.electors/10), o.electors / 10},
	} {
		u, err := pool(ctx, o.electors, layout.lockfiles, o.scale, o.window)
		if err != nil {
			return err
		}
		both := u.heapBytes + u.stackBytes
		verdict := "within"
		if both > perElectorLimit {
			verdict = "OVER"
		}
		fmt.Fprintf(w, "| %s | %.2f | %.1f KiB | %.1f KiB | %.1f KiB (%s %d KiB) | %.0f MiB | %.3f | %.0f |\n", layout.name, u.goroutines,
			u.heapBytes/1024, u.stackBytes/1024, both/1024, verdict, perElectorLimit>>10, float64(u.rssBytes)/(1<<20), u.cpu, u.storeOpsPerSec)
	}
	return nil
}

// shardTable measures and prints the table of package pool's shards.
func shardTable(ctx context.Context, o options, stores []namedStore, w io.Writer) error {
	nShards, nWorkers := o.poolN, o.poolW
	if nWorkers == 0 { // options built without the flag's default
		nShards, nWorkers = o.electors, 10
	}
	sfi, _, slt := scaled(o.shardK)
	ctx, err := withShardPeers(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## %d shards on %d workers (package pool)\n\n", nShards, nWorkers)
	fmt.Fprintf(w, "One lease per worker: each worker renews one session object per FrequentInterval and reads its page of the assignment, which one coordinator, elected among the workers, writes when a shard moves. "+
		"Intervals: the defaults divided by %d (FrequentInterval %v, LeaderTimeout %v). "+
		"Requests are per worker per FrequentInterval, in steady state, every attempt counted, the coordinator election's included (an elector per shard would write %d PUTs per interval in all); LIST is the coordinator's listing of the pool. "+
		"Crash: a worker is killed (its store calls fail at once, calls in flight too; no goodbye) at a random point of its renewal cycle; "+
		"the time runs from the kill to every shard it ran being run by a survivor; %d trials (a trial in which a survivor lost its session, a machine or store too slow for the lease, is run again and counted). "+
		"Goroutines and memory are per shard in steady state, on the in-memory store, Work's own goroutine and its stack included (targets: one goroutine per led shard plus a constant per worker, and at most 4 KiB of the pool's own heap per shard; Go's smallest stack is 2 KiB).\n\n",
		o.shardK, sfi, slt, nShards, o.trials)
	shardPeerNote(o, w)
	fmt.Fprintln(w, "| store | PUT per worker per FrequentInterval | GET per worker per FrequentInterval | LIST per worker per FrequentInterval | crash → its shards led again, p50 | p95 | max | p50 × LeaderTimeout | goroutines per shard | heap + stacks per shard | trials |"+shardPeerHeader(o))
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|"+shardPeerDash(o))
	var results []shardResult
	for _, st := range stores {
		r, err := shards(ctx, st.process, nWorkers, nShards, o.shardK, o.shardII, o.stagger, o.trials, o.window)
		if err != nil {
			return fmt.Errorf("shards on %s: %w", st.short, err)
		}
		results = append(results, r)
		p50, p95, mx := percentile(r.ledAgain, 50), percentile(r.ledAgain, 95), percentile(r.ledAgain, 100)
		gor, mem := "(in memory only)", "(in memory only)"
		if st.short == "memstore" {
			gor = fmt.Sprintf("%.2f", r.goroutines)
			mem = fmt.Sprintf("%.1f KiB (heap %.1f, stacks %.1f)", (r.heapBytes+r.stackBytes)/1024, r.heapBytes/1024, r.stackBytes/1024)
		}
		trials := fmt.Sprint(len(r.ledAgain))
		if r.disturbed > 0 {
			trials += fmt.Sprintf(" (%d more run again)", r.disturbed)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %v | %v | %v | %.2f | %s | %s | %s |%s\n", st.short, r.perWorker.puts, r.perWorker.gets, r.perWorker.lists,
			ms(p50), ms(p95), ms(mx), float64(p50)/float64(slt), gor, mem, trials, shardPeerCell(o, r))
	}
	spreadTable(w, stores, results, nShards, nWorkers, slt, o.stagger)
	return poolCostTable(ctx, o, stores[len(stores)-1], w)
}

// spreadTable prints, from the shard table's trials, how long the pool
// took to spread its shards evenly after a cold start, a death and a join.
func spreadTable(w io.Writer, stores []namedStore, results []shardResult, nShards, nWorkers int, lt, stagger time.Duration) {
	start := "the %d workers' start"
	if stagger > 0 {
		start = fmt.Sprintf("the last of the %%d workers' starts (they started %v apart)", stagger)
	}
	fmt.Fprintf(w, "\nThe even spread (every live worker at ⌊N/W⌋ or ⌈N/W⌉ shards, ± 1, every shard led), in the same trials: "+
		"cold start, from "+start+"; death, from the kill (%d survivors); join, from the start of a new worker after the survivors had spread (%d workers). "+
		"Counted every LeaderTimeout/100; a death or join not spread within 10 × LeaderTimeout is counted at that bound.\n\n", nWorkers, nWorkers-1, nWorkers)
	fmt.Fprintln(w, "| store | cold start p50 | max | death p50 | max | join p50 | max | p50 × LeaderTimeout (cold, death, join) | max × (cold, death, join) | not spread within 10 × LeaderTimeout |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	x := func(d time.Duration) float64 { return float64(d) / float64(lt) }
	for i, r := range results {
		c50, cmx := percentile(r.coldSpread, 50), percentile(r.coldSpread, 100)
		d50, dmx := percentile(r.deathSpread, 50), percentile(r.deathSpread, 100)
		j50, jmx := percentile(r.joinSpread, 50), percentile(r.joinSpread, 100)
		fmt.Fprintf(w, "| %s | %v | %v | %v | %v | %v | %v | %.2f, %.2f, %.2f | %.2f, %.2f, %.2f | %d of %d |\n", stores[i].short,
			ms(c50), ms(cmx), ms(d50), ms(dmx), ms(j50), ms(jmx), x(c50), x(d50), x(j50), x(cmx), x(dmx), x(jmx), r.spreadMissed, 2*len(r.ledAgain))
	}
}

// poolCostTable measures a pool's requests per worker in steady state at
// each of o.costPools workers, and prints what they cost a month.
func poolCostTable(ctx context.Context, o options, st namedStore, w io.Writer) error {
	if len(o.costPools) == 0 {
		return nil
	}
	nShards := o.electors
	sfi, _, _ := scaled(o.shardK)
	fmt.Fprintf(w, "\n## What a pool costs a month (package pool, %d shards)\n\n", nShards)
	fmt.Fprintf(w, "On %s. Requests per worker per FrequentInterval in steady state, measured over %v at 1/%d scale (FrequentInterval %v), "+
		"and the pool's cost a month at the default FrequentInterval (%v, %d hours a month) at list prices per 1,000 requests: "+
		"S3 Standard PUT and LIST $%.4f, GET $%.4f; GCS Standard (regional) Class A (writes, objects.list) $%.4f, Class B (reads) $%.4f; "+
		"Azure Blob Hot LRS write and list $%.4f, read $%.4f. Storage and network are left out.\n\n",
		st.name, o.window, o.shardK, sfi, s3lect.DefaultFrequentInterval, hoursPerMonth,
		clouds[0].put*1000, clouds[0].get*1000, clouds[1].put*1000, clouds[1].get*1000, clouds[2].put*1000, clouds[2].get*1000)
	fmt.Fprint(w, "| workers | PUT per worker per FrequentInterval | GET | LIST |")
	for _, c := range clouds {
		fmt.Fprintf(w, " %s a month |", c.name)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "|---|---|---|---|"+strings.Repeat("---|", len(clouds)))
	for _, workers := range o.costPools {
		r, err := shardCost(ctx, st.process, workers, nShards, o.shardK, o.shardII, o.stagger, o.window)
		if errors.Is(err, errNoSpread) {
			// Not a steady state: nothing to price. The row says so, and
			// the other rows are still measured.
			fmt.Fprintf(w, "| %d | not measured: %v, %d × LeaderTimeout |%s\n", workers, errNoSpread, coldSpreadWait, strings.Repeat(" |", 2+len(clouds)))
			continue
		}
		if err != nil {
			return fmt.Errorf("pool cost on %s, %d workers: %w", st.short, workers, err)
		}
		fmt.Fprintf(w, "| %d | %.2f | %.2f | %.2f |", workers, r.puts, r.gets, r.lists)
		for _, c := range clouds {
			fmt.Fprintf(w, " $%.2f |", c.monthly(r, workers))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// namedStore makes the stores of one row of measurements.
type namedStore struct {
	name, short string
	new         func() store.Store
	// process returns the store as one more process would reach it: on
	// S3 a client and connections of its own.
	process func() store.Store
}

// openStores returns the stores to measure on: the in-memory store with
// simulated latency always, then the S3 bucket when -bucket names one; and
// how to close what it opened.
func openStores(ctx context.Context, o options) ([]namedStore, func(), error) {
	mem := memstore.New()
	stores := []namedStore{{
		name: "in-memory, with 5 ms added to every call", short: "memstore",
		new: func() store.Store { return withLatency(mem, 5*time.Millisecond) },
	}}
	stores[0].process = stores[0].new
	if o.bucket == "" {
		if o.noMemory {
			return nil, nil, fmt.Errorf("-no-memstore needs -bucket: there would be nothing to measure")
		}
		return stores, func() {}, nil
	}
	if o.noMemory {
		stores = nil
	}
	st, err := s3store.FromEnvironment(ctx, o.bucket, o.pathStyle)
	if err != nil {
		return nil, nil, err
	}
	name := "S3 bucket " + o.bucket
	if ep := os.Getenv("AWS_ENDPOINT_URL_S3"); ep != "" {
		name += " at " + ep
	}
	var clients []*s3store.Store
	process := func() store.Store {
		c, err := s3store.FromEnvironment(ctx, o.bucket, o.pathStyle)
		if err != nil {
			return st // the environment loaded once already; it does not fail now
		}
		clients = append(clients, c)
		return c
	}
	stores = append(stores, namedStore{name: name, short: "S3", new: func() store.Store { return st }, process: process})
	return stores, func() {
		st.CloseIdleConnections()
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}, nil
}

// cpuModel names the processor, from /proc/cpuinfo where there is one.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
