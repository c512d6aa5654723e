package s3lect_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/measure"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/s3store"
)

// BenchmarkThousandElectors starts 1,000 electors on distinct lockfiles in
// one process, as a worker pool with one elector per shard would, and
// reports what each costs at steady state. Each elector leads its own
// lockfile, the most expensive role. Intervals are the defaults divided by
// ten (FrequentInterval 500 ms); store operations per second scale with
// them.
func BenchmarkThousandElectors(b *testing.B) {
	for range b.N {
		u, err := measure.Pool(b.Context(), 1000, 1000, 10, 3*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(u.Goroutines, "goroutines/elector")
		b.ReportMetric(u.HeapBytes, "heap-B/elector")
		b.ReportMetric(u.StoreOpsPerSec, "store-ops/s")
		b.ReportMetric(u.CPU*100, "cpu-%")
	}
}

// BenchmarkFailover measures crash-failover and graceful-handover times
// for each mode over 20 groups of three, on memstore with 5 ms of latency
// per call and, when the environment names one (as bash .ci/run does), on
// MinIO, at 1/25 of the default intervals. It prints a table.
//
//	go test -run XXX -bench Failover -benchtime 1x .
func BenchmarkFailover(b *testing.B) {
	const k = 25
	stores := []struct {
		name string
		new  func() store.Store
	}{}
	mem := memstore.New()
	stores = append(stores, struct {
		name string
		new  func() store.Store
	}{"memstore, 5 ms latency", func() store.Store { return measure.Latency(mem, 5*time.Millisecond) }})
	if os.Getenv("S3LECT_TEST_S3_ENDPOINT") != "" {
		client, bucket := s3test.NewClient(b, nil, "", ""), s3test.Bucket(b)
		stores = append(stores, struct {
			name string
			new  func() store.Store
		}{"MinIO", func() store.Store { return s3store.New(client, bucket) }})
	}
	lt := s3lect.DefaultLeaderTimeout / k
	for range b.N {
		fmt.Printf("\n| store | mode | event | p50 | max | p50 / LeaderTimeout |\n|---|---|---|---|---|---|\n")
		for _, st := range stores {
			for _, m := range measure.Modes {
				for _, crash := range []bool{true, false} {
					times, err := measure.Failover(b.Context(), st.new, m, crash, 20, k)
					if err != nil {
						b.Fatal(err)
					}
					event := "graceful handover"
					if crash {
						event = "crash failover"
					}
					p50, mx := measure.Percentile(times, 50), measure.Percentile(times, 100)
					fmt.Printf("| %s | %s | %s | %v | %v | %.2f |\n", st.name, m.Name, event,
						p50.Round(time.Millisecond), mx.Round(time.Millisecond), float64(p50)/float64(lt))
				}
			}
		}
	}
}
