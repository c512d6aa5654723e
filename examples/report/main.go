// Command report measures s3lect and prints a markdown report: failover
// and handover times by mode, S3 requests and monthly cost by group size,
// and what 1,000 electors cost in one process, with the configuration and
// the machine they were measured on.
//
// It runs against S3 or MinIO when -bucket is given (from the standard AWS
// environment; AWS_ENDPOINT_URL_S3 for MinIO, with -path-style), and on the
// in-memory store with simulated latency otherwise:
//
//	go run ./examples/report -bucket b -path-style > report.md
//
// Intervals are the defaults divided by -scale (25: FrequentInterval
// 200 ms, LeaderTimeout 600 ms), so a run takes a few minutes; times are
// also given as a fraction of LeaderTimeout, and requests per hour are
// scaled back to the default intervals.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/measure"
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
}

func main() {
	o := options{groups: []int{3, 10, 100}, electors: 1000}
	flag.StringVar(&o.bucket, "bucket", "", "measure on this S3 bucket (standard AWS environment) instead of in memory")
	flag.BoolVar(&o.pathStyle, "path-style", false, "path-style S3 addressing (MinIO)")
	flag.IntVar(&o.scale, "scale", 25, "divide the default intervals by this")
	flag.IntVar(&o.trials, "trials", 20, "failover trials per mode and event")
	flag.DurationVar(&o.window, "window", 12*time.Second, "measurement window for requests and resources")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, w io.Writer) error {
	if o.scale < 1 || o.trials < 1 {
		return fmt.Errorf("-scale and -trials must be at least 1")
	}
	newStore, where, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	k := time.Duration(o.scale)
	fi, ii, lt := s3lect.DefaultFrequentInterval/k, s3lect.DefaultInfrequentInterval/k, s3lect.DefaultLeaderTimeout/k

	fmt.Fprintf(w, "# s3lect benchmark report\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- machine: %s, %d cores, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(w, "- store: %s\n", where)
	fmt.Fprintf(w, "- intervals: the defaults divided by %d: FrequentInterval %v, InfrequentInterval %v, LeaderTimeout %v (the retry delays, 100 ms and 1 s, are not scaled)\n",
		o.scale, fi, ii, lt)
	fmt.Fprintf(w, "- reproduce: `go run ./examples/report %s`\n\n", strings.Join(os.Args[1:], " "))

	fmt.Fprintf(w, "## Failover and handover\n\n")
	fmt.Fprintf(w, "%d groups of three per row, struck at a random point of their cycle; time from the crash (store calls fail, peer endpoint gone) or the Resign call to the next leader's Campaign returning.\n\n", o.trials)
	fmt.Fprintln(w, "| mode | event | p50 | p95 | max | p50 / LeaderTimeout | max / LeaderTimeout |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, m := range measure.Modes {
		for _, crash := range []bool{true, false} {
			times, err := measure.Failover(ctx, newStore, m, crash, o.trials, o.scale)
			if err != nil {
				return err
			}
			event := "graceful handover"
			if crash {
				event = "crash failover"
			}
			p50, p95, mx := measure.Percentile(times, 50), measure.Percentile(times, 95), measure.Percentile(times, 100)
			fmt.Fprintf(w, "| %s | %s | %v | %v | %v | %.2f | %.2f |\n", m.Name, event, ms(p50), ms(p95), ms(mx),
				float64(p50)/float64(lt), float64(mx)/float64(lt))
		}
	}

	fmt.Fprintf(w, "\n## S3 requests and cost\n\n")
	fmt.Fprintf(w, "Storage mode, requests per hour at the default intervals (measured over %v at 1/%d scale), monthly cost at S3 Standard prices ($0.005 per 1,000 PUT, $0.0004 per 1,000 GET, %d hours). Peer mode removes the followers' GETs.\n\n", o.window, o.scale, measure.HoursPerMonth)
	fmt.Fprintln(w, "| group | leader PUT/h | leader GET/h | follower GET/h | follower PUT/h | monthly cost |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, n := range o.groups {
		r, err := measure.Cost(ctx, newStore, n, o.scale, o.window)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.1f | $%.2f |\n", n, r.LeaderPUT, r.LeaderGET, r.FollowerGET, r.FollowerPUT, r.Monthly(n))
	}

	fmt.Fprintf(w, "\n## %d electors in one process\n\n", o.electors)
	fmt.Fprintf(w, "On the in-memory store, at 1/%d scale, measured over %v after settling. CPU is in cores; store operations per second are at the scaled intervals (divide by %d for the defaults).\n\n", o.scale, o.window, o.scale)
	fmt.Fprintln(w, "| layout | goroutines per elector | heap per elector | process RSS | CPU | store ops/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, layout := range []struct {
		name      string
		lockfiles int
	}{
		{fmt.Sprintf("%d lockfiles, every elector leads", o.electors), o.electors},
		{fmt.Sprintf("%d workers × %d shards", 10, o.electors/10), o.electors / 10},
	} {
		u, err := measure.Pool(ctx, o.electors, layout.lockfiles, o.scale, o.window)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| %s | %.2f | %.1f KB | %.0f MB | %.3f | %.0f |\n", layout.name, u.Goroutines, u.HeapBytes/1024, float64(u.RSSBytes)/(1<<20), u.CPU, u.StoreOpsPerSec)
	}
	return nil
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// openStore returns a constructor of stores for the electors, where they
// are, and how to close what it opened.
func openStore(ctx context.Context, o options) (func() store.Store, string, func(), error) {
	if o.bucket == "" {
		mem := memstore.New()
		return func() store.Store { return measure.Latency(mem, 5*time.Millisecond) },
			"in-memory, with 5 ms added to every call", func() {}, nil
	}
	st, err := s3store.FromEnvironment(ctx, o.bucket, o.pathStyle)
	if err != nil {
		return nil, "", nil, err
	}
	where := "S3 bucket " + o.bucket
	if ep := os.Getenv("AWS_ENDPOINT_URL_S3"); ep != "" {
		where += " at " + ep
	}
	return func() store.Store { return st }, where, st.(*s3store.Store).CloseIdleConnections, nil
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
