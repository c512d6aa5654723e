// Package prom exports the state and counters of s3lect electors to
// Prometheus. It is a module of its own, so that programs that do not
// import it never have client_golang in their module graph.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(prom.NewCollector(e1, e2))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every series carries the labels lockfile (the elector's LockfilePath)
// and server (its ServerID).
//
//	s3lect_leader                     1 while the elector leads, else 0
//	s3lect_term                       the term of the leader it knows of (0: none)
//	s3lect_mode{mode}                 1 for the current mode: leader, frequent, infrequent, peer
//	s3lect_leaderships_won_total      leaderships won
//	s3lect_leadership_ends_total{cause}  leaderships ended: lost, expired, resigned, canceled, other
//	s3lect_store_requests_total{op,result}  store call attempts: op get or put; result ok,
//	                                  not_found, precondition_failed, timeout, canceled, permanent, error
//	s3lect_peer_requests_total{result}  questions to the leader in PeerMode: ok, timeout, canceled, error
//	s3lect_renewal_age_seconds        while leading: time since its last successful write was sent
//	s3lect_read_age_seconds           time since its last successful read (absent before the first)
package prom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3lect/s3lect"
)

var (
	base = []string{"lockfile", "server"}

	descLeader   = prometheus.NewDesc("s3lect_leader", "1 while this elector holds the leadership of the lockfile, else 0.", base, nil)
	descTerm     = prometheus.NewDesc("s3lect_term", "Term (fencing token) of the leader this elector knows of; 0 when it knows of none.", base, nil)
	descMode     = prometheus.NewDesc("s3lect_mode", "1 for the elector's current mode (leader, frequent, infrequent, peer), 0 for the others.", append(base, "mode"), nil)
	descWon      = prometheus.NewDesc("s3lect_leaderships_won_total", "Leaderships this elector has won.", base, nil)
	descEnds     = prometheus.NewDesc("s3lect_leadership_ends_total", "Leaderships of this elector that have ended, by cause.", append(base, "cause"), nil)
	descStore    = prometheus.NewDesc("s3lect_store_requests_total", "Store call attempts, by operation and result.", append(base, "op", "result"), nil)
	descPeer     = prometheus.NewDesc("s3lect_peer_requests_total", "Questions to the leader over HTTPS in PeerMode, by result.", append(base, "result"), nil)
	descRenewAge = prometheus.NewDesc("s3lect_renewal_age_seconds", "While leading: seconds since the last successful write of the leadership was sent.", base, nil)
	descReadAge  = prometheus.NewDesc("s3lect_read_age_seconds", "Seconds since the elector last read the lockfile successfully.", base, nil)

	modes = []string{"leader", "frequent", "infrequent", "peer"}
)

// Collector is a prometheus.Collector over a fixed set of electors.
type Collector struct {
	electors []*s3lect.Elector
	now      func() time.Time
}

// NewCollector returns a collector over electors. Register it once; each
// scrape reads every elector's Stats, which waits for nothing.
func NewCollector(electors ...*s3lect.Elector) *Collector {
	return &Collector{electors: electors, now: time.Now}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerm, descMode, descWon, descEnds, descStore, descPeer, descRenewAge, descReadAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, e := range c.electors {
		s := e.Stats()
		l := []string{s.Lockfile, s.ServerID}
		with := func(more ...string) []string { return append(append([]string(nil), l...), more...) }
		gauge := func(d *prometheus.Desc, v float64, labels []string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		counter := func(d *prometheus.Desc, v uint64, labels []string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
		}
		gauge(descLeader, b2f(s.Leading), l)
		gauge(descTerm, float64(s.Term), l)
		for _, m := range modes {
			gauge(descMode, b2f(s.Mode == m), with(m))
		}
		counter(descWon, s.Won, l)
		for cause, n := range s.Ended {
			counter(descEnds, n, with(cause))
		}
		for k, n := range s.StoreRequests {
			counter(descStore, n, with(k.Op, k.Result))
		}
		for res, n := range s.PeerRequests {
			counter(descPeer, n, with(res))
		}
		if s.Leading && !s.LastRenewal.IsZero() {
			gauge(descRenewAge, now.Sub(s.LastRenewal).Seconds(), l)
		}
		if !s.LastRead.IsZero() {
			gauge(descReadAge, now.Sub(s.LastRead).Seconds(), l)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
