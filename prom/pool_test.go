package prom

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestPoolMetrics runs two workers over 10 shards, scrapes both from one
// registry (one of them the coordinator), stops one and checks that the
// other's series show it take every shard, and the leaver's its releases.
func TestPoolMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		var shards []string
		for i := range 10 {
			shards = append(shards, string(rune('a'+i)))
		}
		reg := prometheus.NewRegistry()
		var stops []context.CancelFunc
		var dones []chan struct{}
		for _, id := range []string{"w1", "w2"} {
			p, err := pool.New(pool.Config{Store: mem, Prefix: "pools/p1/", ID: id, Shards: shards, Logger: quiet,
				Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.Register(NewPoolCollector(p)); err != nil {
				t.Fatalf("Register(worker %s) = %v", id, err)
			}
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); p.Run(ctx) }()
			stops, dones = append(stops, stop), append(dones, done)
		}
		defer func() {
			for i, stop := range stops {
				stop()
				<-dones[i]
			}
		}()
		scrape := func() string {
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != 200 {
				t.Fatalf("scrape: HTTP %d: %s", rec.Code, rec.Body.String())
			}
			return rec.Body.String()
		}
		time.Sleep(2 * s3lect.DefaultLeaderTimeout)
		body := scrape()
		coordinators := 0
		for _, w := range []string{"w1", "w2"} {
			if v, ok := sample(body, "s3lect_pool_shards_owned", `worker="`+w+`"`); !ok || v != 5 {
				t.Errorf("s3lect_pool_shards_owned{worker=%q} = %v (found %v); want 5\n%s", w, v, ok, body)
			}
			if v, _ := sample(body, "s3lect_pool_coordinating", `worker="`+w+`"`); v == 1 {
				coordinators++
				if term, _ := sample(body, "s3lect_pool_coordinator_term", `worker="`+w+`"`); term < 1 {
					t.Errorf("%s coordinates at term %v; want a term of at least 1", w, term)
				}
			}
		}
		if coordinators != 1 {
			t.Errorf("%d workers report s3lect_pool_coordinating 1; want 1\n%s", coordinators, body)
		}
		stops[1]()
		<-dones[1]
		time.Sleep(s3lect.DefaultLeaderTimeout)
		body = scrape()
		if v, _ := sample(body, "s3lect_pool_shards_owned", `worker="w1"`); v != 10 {
			t.Errorf("after w2 left, w1 owns %v shards; want 10", v)
		}
		if v, _ := sample(body, "s3lect_pool_claims_total", `worker="w1"`); v != 10 {
			t.Errorf("s3lect_pool_claims_total{worker=w1} = %v; want 10", v)
		}
		if v, _ := sample(body, "s3lect_pool_releases_total", `worker="w2"`); v != 5 {
			t.Errorf("s3lect_pool_releases_total{worker=w2} = %v; want 5 (its shards, at Run's end)", v)
		}
		for _, op := range []string{"get", "put", "list"} {
			if !strings.Contains(body, `s3lect_pool_store_requests_total{op="`+op+`",pool="pools/p1/",store="",worker="w1"}`) {
				t.Errorf("no %s counter for w1:\n%s", op, body)
			}
		}
	})
}

// TestPoolCollectorsCollide registers two collectors over different
// workers with the same pool and ID: refused at Register, not at scrape.
func TestPoolCollectorsCollide(t *testing.T) {
	work := func(ctx context.Context, _ string, _ *s3lect.Leadership) {}
	mk := func() *pool.Pool {
		p, err := pool.New(pool.Config{Store: memstore.New(), Prefix: "p/", ID: "same", Shards: []string{"a"}, Work: work})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewPoolCollector(mk())); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NewPoolCollector(mk())); err == nil {
		t.Error("Register(a second worker with the same labels) = nil; want an error")
	}
	if err := reg.Register(NewPoolCollector(mk()).WithStore("s3://other")); err != nil {
		t.Errorf("Register(the same labels on another store) = %v; want nil", err)
	}
}
