package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/s3store"
)

// The benchmarks print the report's tables one at a time. With MinIO
// (bash .ci/run starts one; export its environment), from the repository
// root:
//
//	go test -run XXX -bench . -benchtime 1x ./examples/report/

// benchStores are memstore with 5 ms of latency per call and, when the
// environment names one (S3LECT_TEST_S3_ENDPOINT, as .ci/run sets), MinIO.
func benchStores(b *testing.B) []namedStore {
	mem := memstore.New()
	stores := []namedStore{{name: "memstore, 5 ms latency", short: "memstore",
		new: func() store.Store { return withLatency(mem, 5*time.Millisecond) }}}
	if os.Getenv("S3LECT_TEST_S3_ENDPOINT") != "" {
		client, bucket := s3test.NewClient(b, nil, "", ""), s3test.Bucket(b)
		stores = append(stores, namedStore{name: "MinIO", short: "MinIO",
			new: func() store.Store { return s3store.New(client, bucket) }})
	}
	return stores
}

// BenchmarkThousandElectors starts 1,000 electors on distinct lockfiles in
// one process, as a worker pool with one elector per shard would, and
// reports what each costs at steady state. Each elector leads its own
// lockfile, the most expensive role. Intervals are the defaults divided by
// ten (FrequentInterval 500 ms); store operations per second scale with
// them.
func BenchmarkThousandElectors(b *testing.B) {
	for range b.N {
		u, err := pool(b.Context(), 1000, 1000, 10, 3*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(u.goroutines, "goroutines/elector")
		b.ReportMetric(u.heapBytes, "heap-B/elector")
		b.ReportMetric(u.stackBytes, "stack-B/elector")
		b.ReportMetric(u.heapBytes+u.stackBytes, "heap+stack-B/elector")
		b.ReportMetric(u.storeOpsPerSec, "store-ops/s")
		b.ReportMetric(u.cpu*100, "cpu-%")
	}
}

// BenchmarkFailover measures crash failover (a killed process: see
// crashModel), graceful handover and the stale-peer takeover for every
// mode over 15 groups of three at 1/25 of the default intervals, and
// prints a table.
func BenchmarkFailover(b *testing.B) {
	const k = 25
	_, _, lt := scaled(k)
	for range b.N {
		fmt.Printf("\n| store | mode | event | p50 | p95 | max | p50 × LeaderTimeout | max × | discarded |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, st := range benchStores(b) {
			for _, m := range modes {
				for _, crash := range []bool{true, false} {
					if !crash && m.noHandover {
						continue
					}
					times, disturbed, err := failover(b.Context(), st.new, m, crash, 15, k)
					if err != nil {
						b.Fatal(err)
					}
					event := "graceful handover"
					switch {
					case m.stalePeer:
						event = "last write → takeover"
					case crash:
						event = "crash failover"
					}
					p50, p95, mx := percentile(times, 50), percentile(times, 95), percentile(times, 100)
					fmt.Printf("| %s | %s | %s | %v | %v | %v | %.2f | %.2f | %d |\n", st.short, m.name, event,
						ms(p50), ms(p95), ms(mx), float64(p50)/float64(lt), float64(mx)/float64(lt), disturbed)
				}
			}
		}
	}
}

// BenchmarkS3Cost runs groups of 3, 10 and 100 electors against MinIO with
// every interval scaled down 25 times, counts each elector's S3 requests
// at steady state, scales the rates back to the default intervals, and
// prints requests per hour by role and the monthly cost per group.
func BenchmarkS3Cost(b *testing.B) {
	client, bucket := s3test.NewClient(b, nil, "", ""), s3test.Bucket(b)
	newStore := func() store.Store { return s3store.New(client, bucket) }
	for range b.N {
		fmt.Println("\n| group | leader PUT/h | leader GET/h | follower GET/h | follower PUT/h | monthly cost (S3 Standard) |")
		fmt.Println("|---|---|---|---|---|---|")
		for _, n := range []int{3, 10, 100} {
			r, err := cost(b.Context(), newStore, n, 25, 12*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Printf("| %d | %.0f | %.0f | %.0f | %.1f | $%.2f |\n", n, r.leaderPUT, r.leaderGET, r.followerGET, r.followerPUT, r.monthly(n))
		}
	}
}
