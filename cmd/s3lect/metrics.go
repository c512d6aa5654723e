package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/prom"
)

// runCollector exports what only the runner knows, beside the elector's
// series (package prom): the changes of leader it has seen and whether
// its command runs.
type runCollector struct {
	r                *runner
	changes, running *prometheus.Desc
}

func newRunCollector(r *runner, where string) *runCollector {
	l := prometheus.Labels{"lockfile": r.key, "server": r.o.id, "store": where}
	return &runCollector{r: r,
		changes: prometheus.NewDesc("s3lect_run_leader_changes_total",
			"Changes of leader this runner has seen (failovers and handovers, its own wins included); it sees them while it waits and when it wins.", nil, l),
		running: prometheus.NewDesc("s3lect_run_command_running", "1 while this runner's command runs, else 0.", nil, l),
	}
}

func (c *runCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.changes; ch <- c.running }

func (c *runCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(c.r.changes.Load()))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, b2f(c.r.running.Load()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsHandler serves /metrics (the elector's series from package prom,
// the runner's, and Go's process and runtime series) and /healthz.
func metricsHandler(r *runner, where string) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		prom.NewCollector(r.e).WithStore(where), newRunCollector(r, where),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", r.serveHealth)
	return mux, nil
}

// health is /healthz's answer.
type health struct {
	OK             bool    `json:"ok"`
	Problem        string  `json:"problem,omitempty"`
	ID             string  `json:"id"`
	Lockfile       string  `json:"lockfile"`
	Mode           string  `json:"mode"` // the elector's: leader, frequent, infrequent, peer ("" before it starts)
	Term           uint64  `json:"term"` // of the leader it knows of; 0: none
	CommandRunning bool    `json:"commandRunning"`
	LastReadAge    float64 `json:"lastReadAgeSeconds,omitempty"` // since the last successful read of the lockfile
}

// healthOf judges a runner from its elector's stats at now: healthy while
// the store answers, that is while its last successful read or renewal
// is no older than a follower's read interval and a lease (a follower
// reads every InfrequentInterval; its reads are retried within the
// lease), or while it has not yet had that long since start.
func healthOf(s s3lect.Stats, id, where string, running bool, started, now time.Time, fi, ii, lt time.Duration) health {
	h := health{OK: true, ID: id, Lockfile: where, Mode: s.Mode, Term: s.Term, CommandRunning: running}
	last := s.LastRead
	if s.LastRenewal.After(last) {
		last = s.LastRenewal
	}
	if !s.LastRead.IsZero() {
		h.LastReadAge = now.Sub(s.LastRead).Seconds()
	}
	limit := max(ii, fi) + lt
	switch {
	case last.IsZero() && now.Sub(started) > limit:
		h.OK, h.Problem = false, fmt.Sprintf("the store has not answered since start (%v ago)", now.Sub(started).Round(time.Second))
	case !last.IsZero() && now.Sub(last) > limit:
		h.OK, h.Problem = false, fmt.Sprintf("the store has not answered for %v (more than InfrequentInterval + LeaderTimeout)", now.Sub(last).Round(time.Second))
	}
	return h
}

func (r *runner) serveHealth(w http.ResponseWriter, _ *http.Request) {
	fi := cmp.Or(r.o.frequent, s3lect.DefaultFrequentInterval)
	h := healthOf(r.e.Stats(), r.o.id, r.where, r.running.Load(), r.started, time.Now(), fi,
		cmp.Or(r.o.infrequent, s3lect.DefaultInfrequentInterval), cmp.Or(r.o.timeout, s3lect.DefaultLeaderTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !h.OK {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(h)
}

// serveMetrics serves metricsHandler on addr over plain HTTP until stop
// is called.
func serveMetrics(addr string, r *runner, where string) (stop func(), err error) {
	h, err := metricsHandler(r, where)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErr("-metrics-addr: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.printf("metrics server: %v", err)
		}
	}, nil
}
