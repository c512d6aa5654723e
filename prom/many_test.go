package prom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/pool"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// newElector returns an elector on st that is closed when the test ends.
func newElector(t *testing.T, st store.Store, lockfile, id string) *s3lect.Elector {
	t.Helper()
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: lockfile, ServerID: id,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		FrequentInterval: 50 * time.Millisecond, InfrequentInterval: 200 * time.Millisecond, LeaderTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// lead makes e the leader of its lockfile until the test ends.
func lead(t *testing.T, e *s3lect.Elector) {
	t.Helper()
	if _, err := e.Campaign(t.Context()); err != nil {
		t.Fatalf("Campaign() = %v; want a leadership", err)
	}
}

// serveMetrics serves reg over loopback HTTP the way a program would,
// failing the request on any gathering error, and returns a scrape
// function giving the status code and body.
func serveMetrics(t *testing.T, reg *prometheus.Registry) func() (int, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	srv.Listener.Close()
	srv.Listener = listen(t)
	srv.Start()
	t.Cleanup(srv.Close)
	client := srv.Client()
	t.Cleanup(client.CloseIdleConnections)
	return func() (int, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		return resp.StatusCode, string(b)
	}
}

// series counts the series of name in a text scrape.
func series(body, name string) int {
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") {
			n++
		}
	}
	return n
}

func TestCollectorsOfDifferentElectorsShareARegistry(t *testing.T) {
	t.Run("two electors of one group", func(t *testing.T) {
		mem := memstore.New()
		a := newElector(t, mem, "group/leader.json", "a")
		b := newElector(t, mem, "group/leader.json", "b")
		lead(t, a)
		reg := prometheus.NewPedanticRegistry()
		for _, c := range []*Collector{NewCollector(a), NewCollector(b)} {
			if err := reg.Register(c); err != nil {
				t.Fatalf("Register() = %v; want nil", err)
			}
		}
		code, body := serveMetrics(t, reg)()
		if code != http.StatusOK {
			t.Fatalf("scrape: status %d; want 200\n%s", code, body)
		}
		if v, _ := sample(body, "s3lect_leader", `server="a"`); v != 1 {
			t.Errorf(`s3lect_leader{server="a"} = %v; want 1`, v)
		}
		if v, ok := sample(body, "s3lect_leader", `server="b"`); !ok || v != 0 {
			t.Errorf(`s3lect_leader{server="b"} = %v (found %v); want 0`, v, ok)
		}
	})
	t.Run("two pools", func(t *testing.T) {
		mem := memstore.New()
		shards := []string{"s1", "s2", "s3"}
		reg := prometheus.NewPedanticRegistry()
		for _, w := range []string{"w1", "w2"} {
			p, err := pool.New(pool.Config{Store: mem, Prefix: "pool/", ID: w, Shards: shards,
				Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.Register(NewPoolCollector(p)); err != nil {
				t.Fatalf("Register(pool worker %s) = %v; want nil", w, err)
			}
		}
		code, body := serveMetrics(t, reg)()
		if code != http.StatusOK {
			t.Fatalf("scrape: status %d; want 200\n%s", code, body)
		}
		for _, w := range []string{"w1", "w2"} {
			if v, ok := sample(body, "s3lect_pool_shards_owned", `pool="pool/"`, `worker="`+w+`"`); !ok || v != 0 {
				t.Errorf("s3lect_pool_shards_owned{worker=%q} = %v (found %v); want 0 before Run:\n%s", w, v, ok, body)
			}
		}
		if n := series(body, "s3lect_pool_shards_owned"); n != 2 {
			t.Errorf("%d s3lect_pool_shards_owned series; want 2 (one per worker)", n)
		}
	})
}

// Two electors on different stores with the same lockfile path and
// ServerID: each leads on its own store.
func TestSameLockfileAndServerOnTwoStores(t *testing.T) {
	const lockfile = "jobs/leader.json"
	eu := newElector(t, memstore.New(), lockfile, "a")
	us := newElector(t, memstore.New(), lockfile, "a")
	lead(t, eu)
	lead(t, us)

	t.Run("named stores coexist", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		for _, c := range []*Collector{NewCollector(eu).WithStore("mem://eu"), NewCollector(us).WithStore("mem://us")} {
			if err := reg.Register(c); err != nil {
				t.Fatalf("Register() = %v; want nil", err)
			}
		}
		code, body := serveMetrics(t, reg)()
		if code != http.StatusOK {
			t.Fatalf("scrape: status %d; want 200\n%s", code, body)
		}
		for _, st := range []string{"mem://eu", "mem://us"} {
			if v, _ := sample(body, "s3lect_leader", `store="`+st+`"`); v != 1 {
				t.Errorf(`s3lect_leader{store=%q} = %v; want 1`, st, v)
			}
			if v, _ := sample(body, "s3lect_term", `store="`+st+`"`); v < 1 {
				t.Errorf(`s3lect_term{store=%q} = %v; want at least 1`, st, v)
			}
		}
		if n := series(body, "s3lect_leader"); n != 2 {
			t.Errorf("%d s3lect_leader series; want 2", n)
		}
	})

	t.Run("unnamed stores are refused at registration", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(NewCollector(eu)); err != nil {
			t.Fatalf("Register(first) = %v; want nil", err)
		}
		err := reg.Register(NewCollector(us))
		if err == nil {
			t.Fatal("Register(second) = nil; want an error naming the shared labels")
		}
		if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			t.Errorf("Register(second) = AlreadyRegisteredError; want the duplicate series reported, not the first collector offered for reuse")
		}
		for _, want := range []string{`lockfile="` + lockfile + `"`, `server="a"`, `store=""`, "WithStore"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Register(second) = %q; want it to name %s", err, want)
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Error("MustRegister(second) did not panic")
				}
			}()
			reg.MustRegister(NewCollector(us))
		}()
		code, body := serveMetrics(t, reg)()
		if code != http.StatusOK {
			t.Fatalf("scrape: status %d; want 200 with the first collector's series\n%s", code, body)
		}
		if n := series(body, "s3lect_leader"); n != 1 {
			t.Errorf("%d s3lect_leader series; want 1", n)
		}
	})

	t.Run("one collector over both is refused", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			c     *Collector
			wants []string
		}{
			{"two stores", NewCollector(eu, us), []string{"electors 1 and 2", `lockfile "jobs/leader.json", server "a" and store ""`, "WithStore"}},
			{"two stores, one name", NewCollector(eu, us).WithStore("mem"), []string{"electors 1 and 2", `store "mem"`}},
			{"one elector twice", NewCollector(eu, eu).WithStore("mem://eu"), []string{"electors 1 and 2", "same elector"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := prometheus.NewPedanticRegistry().Register(tc.c)
				if err == nil {
					t.Fatal("Register() = nil; want an error")
				}
				for _, want := range tc.wants {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Register() = %q; want it to contain %q", err, want)
					}
				}
			})
		}
	})

	t.Run("the same electors again are already registered", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		first := NewCollector(eu).WithStore("mem://eu")
		reg.MustRegister(first)
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(NewCollector(eu).WithStore("mem://eu")); !errors.As(err, &are) || are.ExistingCollector != first {
			t.Errorf("Register(same elector again) = %v; want AlreadyRegisteredError with the first collector", err)
		}
	})
}

func ExampleCollector_WithStore() {
	// Two electors with the same lockfile and ServerID, on two stores.
	newElector := func(st store.Store) *s3lect.Elector {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: "jobs/leader.json", ServerID: "a"})
		if err != nil {
			panic(err)
		}
		return e
	}
	eu, us := newElector(memstore.New()), newElector(memstore.New())
	defer eu.Close()
	defer us.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(eu).WithStore("s3://locks-eu"),
		NewCollector(us).WithStore("s3://locks-us"),
	)
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "s3lect_leader" {
			continue
		}
		for _, m := range mf.GetMetric() {
			fmt.Print(mf.GetName(), "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", m.GetGauge().GetValue())
		}
	}
	// Output:
	// s3lect_leader{lockfile="jobs/leader.json",server="a",store="s3://locks-eu"} 0
	// s3lect_leader{lockfile="jobs/leader.json",server="a",store="s3://locks-us"} 0
}
