package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/s3lect/s3lect/internal/s3test"
)

// TestMain points the report's -bucket, which reads the standard AWS
// environment, at the test's S3 server, so that TestReportOnMinIO can run
// beside the in-memory report (t.Setenv cannot be used in a parallel
// test).
func TestMain(m *testing.M) {
	if ep := os.Getenv("S3LECT_TEST_S3_ENDPOINT"); ep != "" {
		os.Setenv("AWS_ENDPOINT_URL_S3", ep)
	}
	goleak.VerifyTestMain(m)
}

// quick is a small report: it checks the plumbing, not the figures.
func quick() options {
	return options{scale: 50, shardK: 10, trials: 1, window: 2 * time.Second, groups: []int{3}, electors: 100, costPools: []int{4}}
}

// minPuts is the fewest PUTs per worker per FrequentInterval checkReport
// takes for "about one": fewer means the writes are not counted, or the
// store stalled for most of the window.
const minPuts = 0.4

// checkReport checks the report's form; electors says whether it holds the
// in-memory electors table (-no-memstore leaves it out).
func checkReport(t *testing.T, out, store string, electors bool) {
	t.Helper()
	want := []string{
		"# s3lect benchmark report", "- machine:", "- intervals: the defaults divided by",
		"How a crash is modelled: A crash is a killed process",
		"| " + store + " | storage | crash failover |",
		"| " + store + " | storage, InfrequentInterval = FrequentInterval | graceful handover |",
		"| " + store + " | peer, no long-poll | graceful handover |", "| " + store + " | peer + long-poll | crash failover |",
		"| " + store + " | stale peer (peer + long-poll) | last write → takeover |",
		"| 3 | ", "## 100 shards on 10 workers (package pool)",
		"| store | cold start p50 | max | death p50 | max | join p50 | max |",
		"## What a pool costs a month (package pool, 100 shards)", "| workers | PUT per worker per FrequentInterval | GET | LIST | S3 Standard a month | GCS Standard a month | Azure Blob Hot a month |",
	}
	table := []string{"## 100 electors in one process", "10 workers × 10 shards", "stacks per elector"}
	if electors {
		want = append(want, table...)
	} else if strings.Contains(out, table[0]) {
		t.Errorf("report holds the in-memory electors table although -no-memstore leaves it out:\n%s", out)
	}
	for _, want := range want {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The shard table's steady state is one PUT per worker per
	// FrequentInterval, never one per shard (10 each): exactly so in
	// virtual time (pool's TestSteadyStateCostIsOneWritePerWorker). Here,
	// on real timers on a machine that may be busy, a session renewed late
	// can move a shard and add a write, and a store that stalls for a few
	// intervals takes writes away (0.75 in one CI run: every worker's
	// renewal in flight across the same slots), so this checks only the
	// order of magnitude: the writes are counted, and not one per shard.
	m := regexp.MustCompile(`\| ` + regexp.QuoteMeta(store) + ` \| ([0-9.]+) \| [0-9.]+ \| [0-9.]+ \|`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("report has no shard row for %s:\n%s", store, out)
	}
	if puts, _ := strconv.ParseFloat(m[1], 64); puts < minPuts || puts > 2 {
		t.Errorf("shard table: %v PUT per worker per FrequentInterval; want about 1, not one per shard (10):\n%s", puts, out)
	}
	t.Logf("shard table's row: %s", m[0])
	// The spread table's row: a cold start, a death and a join measured
	// in the one trial (whether within 10 × LeaderTimeout or not).
	if !regexp.MustCompile(`\| ` + regexp.QuoteMeta(store) + ` \| [0-9.]+m?s \| [0-9.]+m?s \| [0-9.]+m?s \| [0-9.]+m?s \| [0-9.]+m?s \| [0-9.]+m?s \| [0-9.]+, [0-9.]+, [0-9.]+ \|.* \| [0-9]+ of 2 \|`).MatchString(out) {
		t.Errorf("report has no spread row for %s:\n%s", store, out)
	}
	// The cost table's row: the same order of magnitude, and the monthly
	// cost its figures give at the prices (within the rounding of the
	// figures as printed, to hundredths).
	m = regexp.MustCompile(`\| 4 \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| \$([0-9.]+) \| \$([0-9.]+) \| \$([0-9.]+) \|`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("report has no pool cost row for 4 workers:\n%s", out)
	}
	var f [6]float64
	for i := range f {
		f[i], _ = strconv.ParseFloat(m[i+1], 64)
	}
	if f[0] < minPuts || f[0] > 2 {
		t.Errorf("pool cost table: %v PUT per worker per FrequentInterval for 4 workers; want about 1:\n%s", f[0], out)
	}
	r := perFI{puts: f[0], gets: f[1], lists: f[2]}
	for i, c := range clouds {
		if want := c.monthly(r, 4); math.Abs(want-f[3+i]) > 0.01+0.01*want {
			t.Errorf("pool cost table: %s $%.2f a month for 4 workers at %+v; want $%.2f", c.name, f[3+i], r, want)
		}
	}
}

func TestPoolCostArithmetic(t *testing.T) {
	// One PUT and one LIST per worker per 5 s interval, 100 workers: 100 ×
	// 525,600 intervals a month = 52.56 million of each. At S3 prices
	// ($0.005 per 1,000 for both): 2 × 52,560 × $0.005 = $525.60.
	got := clouds[0].monthly(perFI{puts: 1, lists: 1}, 100)
	if math.Abs(got-525.60) > 0.005 {
		t.Errorf("S3 monthly(1 PUT + 1 LIST per worker per interval, 100 workers) = $%.2f; want $525.60", got)
	}
	// The same pool reading every other worker's session instead (100
	// GETs per worker per interval: member list + 99 sessions): 5,256
	// million GETs at $0.0004 per 1,000 = $2,102.40, plus the PUTs'
	// $262.80.
	got = clouds[0].monthly(perFI{puts: 1, gets: 100}, 100)
	if math.Abs(got-2365.20) > 0.005 {
		t.Errorf("S3 monthly(1 PUT + 100 GET per worker per interval, 100 workers) = $%.2f; want $2,365.20", got)
	}
}

// The two reports run side by side: they wait on real timers (a few
// percent of a core under -race) and check the report's form, not its
// figures.

func TestReportInMemory(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), quick(), &out); err != nil {
		t.Fatal(err)
	}
	checkReport(t, out.String(), "memstore", true)
}

func TestReportOnMinIO(t *testing.T) {
	t.Parallel()
	if ep := s3test.Endpoint(t); os.Getenv("AWS_ENDPOINT_URL_S3") != ep {
		t.Fatalf("AWS_ENDPOINT_URL_S3 = %q; TestMain sets it to S3LECT_TEST_S3_ENDPOINT %q", os.Getenv("AWS_ENDPOINT_URL_S3"), ep)
	}
	o := quick()
	o.bucket, o.pathStyle = s3test.Bucket(t), true
	o.scale = 25 // a lease of 600 ms: MinIO under -race on a busy machine can be slower than 1/50 allows
	// The pool's rows at a fifth of the defaults (a 3 s lease), not a
	// tenth: under -race at a load average of 25, ten workers' coordinator
	// lost its 1.5 s election lease four times in 30 s and the shards did
	// not spread within the cold start's wait.
	o.shardK = 5
	o.noMemory = true // TestReportInMemory covers the in-memory rows and the electors table
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	checkReport(t, out.String(), "S3", false)
	if !strings.Contains(out.String(), "- store: S3 bucket") {
		t.Errorf("report does not name the bucket:\n%s", out.String())
	}
	if strings.Contains(out.String(), "| memstore |") {
		t.Errorf("report measured in memory although told not to:\n%s", out.String())
	}
}

func TestNoMemstoreNeedsBucket(t *testing.T) {
	o := quick()
	o.noMemory = true
	if err := run(context.Background(), o, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-no-memstore needs -bucket") {
		t.Errorf("run(-no-memstore without -bucket) = %v; want an error naming -bucket", err)
	}
}

func TestModeMeasuresOneRow(t *testing.T) {
	t.Parallel()
	o := quick()
	o.mode = "storage, InfrequentInterval = FrequentInterval"
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| memstore | ") {
			rows++
			if !strings.HasPrefix(line, "| memstore | "+o.mode+" | ") {
				t.Errorf("-mode %q measured another row: %s", o.mode, line)
			}
		}
	}
	if rows != 2 || strings.Contains(out.String(), "## S3 requests") || strings.Contains(out.String(), "shards on") {
		t.Errorf("-mode %q: want its crash and handover rows only, got %d rows:\n%s", o.mode, rows, out.String())
	}
}

func TestModeUnknownNamesTheModes(t *testing.T) {
	o := quick()
	o.mode = "storage, typo"
	err := run(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `"peer + long-poll"`) {
		t.Errorf("run with an unknown -mode: error %v; want one listing the modes", err)
	}
}

// TestShardPeerMeasuresPeerMode: -shard-peer runs the shard table's
// pools in the pool's peer mode (it once refused, before the
// coordinator-decided pool had one): the table says so and has the peer
// requests' column, the workers report to their coordinator over HTTPS,
// and a stable worker reads far less than storage mode's page and
// election reads (about 2 GETs per FrequentInterval). The figures are the
// report's to print; the test asserts only what holds on a loaded
// machine. About 10 s under -race (one trial: a cold start, a kill, a
// join, at 1/10 of the default intervals), beside TestReportInMemory.
func TestShardPeerMeasuresPeerMode(t *testing.T) {
	t.Parallel()
	o := quick()
	o.shardOnly, o.shardPeer, o.costPools = true, true, nil
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run(-shard-peer) = %v", err)
	}
	report := out.String()
	for _, want := range []string{"Peer mode (-shard-peer, pool.Config.PeerMode)", "| peer requests per worker per FrequentInterval |", "| memstore | "} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	var puts, gets, lists, peer float64
	for _, line := range strings.Split(report, "\n") {
		if !strings.HasPrefix(line, "| memstore | ") || strings.Count(line, "|") < 13 {
			continue
		}
		cells := strings.Split(line, "|")
		fmt.Sscan(cells[2], &puts)
		fmt.Sscan(cells[3], &gets)
		fmt.Sscan(cells[4], &lists)
		fmt.Sscan(cells[12], &peer)
	}
	if puts < minPuts || peer <= 0 || gets >= 1 {
		t.Errorf("per worker per FrequentInterval: %.2f PUT, %.2f GET, %.2f peer requests; want about 1 PUT, some peer requests and under 1 GET (a page read only when it changed):\n%s", puts, gets, peer, report)
	}
}

// TestRefereeLateStart: the pool calls Work on a goroutine of its own. On
// a busy machine the goroutine of a leadership that has already ended may
// run after the next owner's Work began; the referee must still count the
// shard led by the next owner (the report once waited forever on a
// "999 of 1,000 shards led" pool that had every shard led).
func TestRefereeLateStart(t *testing.T) {
	ref := &shardReferee{live: map[string]shardHolder{}, dead: map[string]bool{}}
	first, end := context.WithCancel(context.Background())
	end() // its leadership ended before its Work began
	next, stop := context.WithCancel(context.Background())
	defer stop()
	ref.start("shard-0001", "worker-02", next)
	ref.start("shard-0001", "worker-01", first)
	if ref.unled([]string{"shard-0001"}) {
		t.Errorf("a late start of an ended leadership hid the next owner: shard-0001 counted unled")
	}
	if got := ref.owners()["shard-0001"]; got != "worker-02" {
		t.Errorf("owner of shard-0001 = %q; want worker-02 (the one whose Work runs)", got)
	}
	stop()
	if !ref.unled([]string{"shard-0001"}) {
		t.Errorf("shard-0001 counted led after its only leadership ended")
	}
}
