//go:build ignore

// This program measures graceful handovers side by side: this module's
// elector and the original s3lect (github.com/nadrama-com/s3lect), on one
// S3 bucket, with one schedule and one S3 client (this module's s3store,
// behind the original's Storage interface). run.sh builds it in a
// temporary module next to a checkout of the original; it is a manual
// measurement, not part of CI. See docs/measurements.md.
//
// Three members share a lockfile at the defaults divided by 25, with
// InfrequentInterval = FrequentInterval (200 ms, 200 ms, 600 ms), the
// original's read rate. The leader leads for a second and a varying part
// of a FrequentInterval, then gives the leadership up (ours: Resign, and
// it campaigns again; the original's: Stop, and once the next leader is
// known a new elector of the same ID starts, since a stopped one cannot
// start again). The time runs from that call to the next leader's
// Campaign or WaitForLeadership returning. The original's members start
// at random phases of a FrequentInterval, as independent processes do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	orig "github.com/nadrama-com/s3lect"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

const (
	fi = 200 * time.Millisecond
	lt = 600 * time.Millisecond
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func main() {
	bucket := flag.String("bucket", "", "an existing bucket (AWS_ENDPOINT_URL_S3 names the server; path-style addressing)")
	n := flag.Int("n", 20, "handovers per implementation")
	flag.Parse()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	st := s3store.New(s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), *bucket)
	prefix := fmt.Sprintf("origcompare/%d/", time.Now().UnixNano())
	for _, impl := range []struct {
		name string
		run  func(store.Store, string, int) []time.Duration
	}{{"s3lect", ours}, {"original", original}} {
		took := impl.run(st, prefix+impl.name+".json", *n)
		slices.Sort(took)
		fmt.Printf("%-8s storage, InfrequentInterval = FrequentInterval, %d handovers: median %v, p90 %v, max %v\n",
			impl.name, len(took), took[len(took)/2].Round(100*time.Microsecond),
			took[len(took)*9/10].Round(100*time.Microsecond), took[len(took)-1].Round(100*time.Microsecond))
	}
}

// pause is how long the i-th leader leads: a second and a part of a
// FrequentInterval that moves through the cycle.
func pause(i int) time.Duration { return time.Second + time.Duration(i%7)*fi/7 }

func ours(st store.Store, key string, n int) []time.Duration {
	type win struct {
		id   string
		lead *s3lect.Leadership
		at   time.Time
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wins := make(chan win)
	for _, id := range []string{"a", "b", "c"} {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: key, ServerID: id, FrequentInterval: fi,
			InfrequentInterval: fi, LeaderTimeout: lt, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		defer e.Close()
		go func() {
			for {
				l, err := e.Campaign(ctx)
				if err != nil {
					return
				}
				select {
				case wins <- win{id, l, time.Now()}:
				case <-ctx.Done():
					return
				}
				<-l.Context().Done()
			}
		}()
	}
	var took []time.Duration
	w := <-wins
	for i := range n {
		time.Sleep(pause(i))
		begun := time.Now()
		w.lead.Resign(context.Background())
		next := <-wins
		if next.id == w.id {
			log.Printf("s3lect: handover %d went back to %s", i, w.id)
		}
		took = append(took, next.at.Sub(begun))
		w = next
	}
	return took
}

// origStore is s3store behind the original's Storage interface.
type origStore struct{ st store.Store }

func (s origStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	data, etag, err := s.st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", orig.ErrStorageNotFound
	}
	return data, etag, err
}

func (s origStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	_, err := s.st.PutIfMatch(ctx, key, data, etag)
	if errors.Is(err, store.ErrPreconditionFailed) {
		return orig.ErrStoragePrecondition
	}
	return err
}

func original(st store.Store, key string, n int) []time.Duration {
	type win struct {
		id string
		e  *orig.S3Elector
		at time.Time
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wins := make(chan win)
	var running []*orig.S3Elector
	start := func(id string, phase time.Duration) {
		e, err := orig.NewS3Elector(orig.S3ElectorOptions{Storage: origStore{st}, Logger: quiet, Config: &orig.ElectorConfig{
			LockfilePath: key, ServerID: id, ServerAddr: "127.0.0.1:1", FrequentInterval: fi, InfrequentInterval: fi, LeaderTimeout: lt}})
		if err != nil {
			log.Fatal(err)
		}
		running = append(running, e)
		go func() {
			time.Sleep(phase)
			if err := e.Start(ctx); err != nil {
				log.Fatal(err)
			}
			if e.WaitForLeadership(ctx) == nil {
				select {
				case wins <- win{id, e, time.Now()}:
				case <-ctx.Done():
				}
			}
		}()
	}
	defer func() {
		for _, e := range running {
			e.Stop()
		}
	}()
	for _, id := range []string{"a", "b", "c"} {
		start(id, rand.N(fi))
	}
	var took []time.Duration
	w := <-wins
	for i := range n {
		time.Sleep(pause(i))
		begun := time.Now()
		w.e.Stop()
		next := <-wins
		took = append(took, next.at.Sub(begun))
		start(w.id, rand.N(fi)) // a new process in its place, at a random phase
		w = next
	}
	return took
}
