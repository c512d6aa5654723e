package s3store_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// S3 Standard request prices, us-east-1.
const (
	pricePUT      = 0.005 / 1000
	priceGET      = 0.0004 / 1000
	hoursPerMonth = 730
)

// BenchmarkS3Cost runs groups of 3, 10 and 100 electors against MinIO with
// every interval scaled down 25 times, counts each elector's S3 requests
// at steady state, scales the rates back to the default intervals, and
// prints requests per hour by role and the monthly cost per group.
//
//	bash .ci/run is the easy way to get MinIO; then, with its environment:
//	go test -run XXX -bench S3Cost -benchtime 1x ./store/s3store/
func BenchmarkS3Cost(b *testing.B) {
	const scale = 25
	bucket := s3test.Bucket(b)
	client := s3test.NewClient(b, func(rt http.RoundTripper) http.RoundTripper { return rt }, "", "")
	type row struct {
		n                        int
		leaderPUT, leaderGET     float64 // per hour at the default intervals
		followerGET, followerPUT float64 // mean per follower
	}
	var rows []row
	for range b.N {
		rows = rows[:0]
		for _, n := range []int{3, 10, 100} {
			key := fmt.Sprintf("cost/group-%d.json", n)
			counters := make([]*store.Counter, n)
			electors := make([]*s3lect.Elector, n)
			for i := range n {
				counters[i] = store.NewCounter(s3store.New(client, bucket))
				e, err := s3lect.New(s3lect.ElectorConfig{
					Store: counters[i], LockfilePath: key, ServerID: fmt.Sprintf("i%d", i),
					FrequentInterval:   s3lect.DefaultFrequentInterval / scale,
					InfrequentInterval: s3lect.DefaultInfrequentInterval / scale,
					LeaderTimeout:      s3lect.DefaultLeaderTimeout / scale,
					Logger:             quiet,
				})
				if err != nil {
					b.Fatal(err)
				}
				electors[i] = e
				go e.Campaign(b.Context())
			}
			time.Sleep(3 * s3lect.DefaultLeaderTimeout / scale * 2) // settle into the infrequent interval
			before := make([]store.Counts, n)
			for i, c := range counters {
				before[i] = c.Counts()
			}
			window := 12 * time.Second // five minutes at the default intervals
			time.Sleep(window)
			perHour := func(d int64) float64 { return float64(d) / window.Hours() / scale }
			r := row{n: n}
			for i, c := range counters {
				now := c.Counts()
				gets, puts := perHour(now.Gets-before[i].Gets), perHour(now.Puts-before[i].Puts)
				if isLeader(electors[i]) {
					r.leaderGET, r.leaderPUT = gets, puts
				} else {
					r.followerGET += gets / float64(n-1)
					r.followerPUT += puts / float64(n-1)
				}
			}
			rows = append(rows, r)
			for _, e := range electors {
				e.Close()
			}
		}
	}
	w := os.Stdout
	fmt.Fprintf(w, "\nS3 requests per hour by role at the default intervals (measured on MinIO at 1/%d scale):\n\n", scale)
	fmt.Fprintln(w, "| group | leader PUT/h | leader GET/h | follower GET/h | follower PUT/h | monthly cost (S3 Standard) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		monthly := hoursPerMonth * (r.leaderPUT*pricePUT + r.leaderGET*priceGET +
			float64(r.n-1)*(r.followerGET*priceGET+r.followerPUT*pricePUT))
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.1f | $%.2f |\n", r.n, r.leaderPUT, r.leaderGET, r.followerGET, r.followerPUT, monthly)
	}
}

func isLeader(e *s3lect.Elector) bool {
	c, ok := <-e.Changes()
	return ok && c.IsLeader
}
