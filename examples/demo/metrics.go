package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/s3lect/s3lect"
)

// serveMetrics serves the electors' Stats on addr: /metrics in the
// Prometheus text format, with the names package prom uses (the demo
// writes them itself to keep client_golang out of the main module), and
// /healthz, s3lect.HealthHandler over all of them. It returns a function
// that stops the server. An empty addr serves nothing.
func serveMetrics(addr string, w io.Writer, electors []*s3lect.Elector) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeMetrics(rw, electors, time.Now())
	})
	mux.Handle("/healthz", s3lect.HealthHandler(electors...))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	fmt.Fprintf(w, "metrics at http://%s/metrics, liveness at http://%s/healthz\n\n", ln.Addr(), ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// writeMetrics writes the electors' Stats in the Prometheus text format.
func writeMetrics(w io.Writer, electors []*s3lect.Elector, now time.Time) {
	stats := make([]s3lect.Stats, len(electors))
	for i, e := range electors {
		stats[i] = e.Stats()
	}
	family := func(name, typ, help string, each func(s s3lect.Stats, put func(v float64, labels ...string))) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, s := range stats {
			each(s, func(v float64, labels ...string) {
				all := []string{fmt.Sprintf("lockfile=%q", s.Lockfile), fmt.Sprintf("server=%q", s.ServerID)}
				for i := 0; i+1 < len(labels); i += 2 {
					all = append(all, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
				}
				fmt.Fprintf(w, "%s{%s} %g\n", name, strings.Join(all, ","), v)
			})
		}
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	family("s3lect_leader", "gauge", "1 while this elector holds the leadership, else 0.", func(s s3lect.Stats, put func(float64, ...string)) {
		put(b2f(s.Mode == "leader"))
	})
	family("s3lect_term", "gauge", "Term of the leader this elector knows of.", func(s s3lect.Stats, put func(float64, ...string)) {
		put(float64(s.Term))
	})
	family("s3lect_mode", "gauge", "1 for the elector's current mode.", func(s s3lect.Stats, put func(float64, ...string)) {
		for _, m := range []string{"leader", "frequent", "infrequent", "peer"} {
			put(b2f(s.Mode == m), "mode", m)
		}
	})
	family("s3lect_leaderships_won_total", "counter", "Leaderships won.", func(s s3lect.Stats, put func(float64, ...string)) {
		put(float64(s.Won))
	})
	family("s3lect_leadership_ends_total", "counter", "Leaderships ended, by cause.", func(s s3lect.Stats, put func(float64, ...string)) {
		for _, c := range slices.Sorted(maps.Keys(s.Ended)) {
			put(float64(s.Ended[c]), "cause", c)
		}
	})
	family("s3lect_store_requests_total", "counter", "Store call attempts, by operation and result.", func(s s3lect.Stats, put func(float64, ...string)) {
		for _, op := range slices.Sorted(maps.Keys(s.StoreRequests)) {
			for _, res := range slices.Sorted(maps.Keys(s.StoreRequests[op])) {
				put(float64(s.StoreRequests[op][res]), "op", op, "result", res)
			}
		}
	})
	family("s3lect_renewal_age_seconds", "gauge", "While leading: seconds since the last successful write was sent.", func(s s3lect.Stats, put func(float64, ...string)) {
		if s.Mode == "leader" && !s.LastRenewal.IsZero() {
			put(now.Sub(s.LastRenewal).Seconds())
		}
	})
	family("s3lect_read_age_seconds", "gauge", "Seconds since the last successful read of the lockfile.", func(s s3lect.Stats, put func(float64, ...string)) {
		if !s.LastRead.IsZero() {
			put(now.Sub(s.LastRead).Seconds())
		}
	})
}

func electorsOf(cands []*candidate) []*s3lect.Elector {
	var out []*s3lect.Elector
	for _, c := range cands {
		out = append(out, c.e)
	}
	return out
}
