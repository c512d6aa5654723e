package s3store_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/measure"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// BenchmarkS3Cost runs groups of 3, 10 and 100 electors against MinIO with
// every interval scaled down 25 times, counts each elector's S3 requests
// at steady state, scales the rates back to the default intervals, and
// prints requests per hour by role and the monthly cost per group.
//
//	bash .ci/run is the easy way to get MinIO; then, with its environment:
//	go test -run XXX -bench S3Cost -benchtime 1x ./store/s3store/
func BenchmarkS3Cost(b *testing.B) {
	client, bucket := s3test.NewClient(b, nil, "", ""), s3test.Bucket(b)
	newStore := func() store.Store { return s3store.New(client, bucket) }
	for range b.N {
		w := os.Stdout
		fmt.Fprintln(w, "\n| group | leader PUT/h | leader GET/h | follower GET/h | follower PUT/h | monthly cost (S3 Standard) |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, n := range []int{3, 10, 100} {
			r, err := measure.Cost(b.Context(), newStore, n, 25, 12*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.1f | $%.2f |\n", n, r.LeaderPUT, r.LeaderGET, r.FollowerGET, r.FollowerPUT, r.Monthly(n))
		}
	}
}
