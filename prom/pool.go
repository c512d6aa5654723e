package prom

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3lect/s3lect/pool"
)

// The families of a pool worker. Every series carries the labels pool
// (the pool's Prefix), worker (its ID) and store.
var (
	famPoolOwned = family{"s3lect_pool_shards_owned", "Shards this worker leads now. " +
		"The labels pool, worker and store name the worker and must be unique in a registry.", nil}
	famPoolClaims       = family{"s3lect_pool_claims_total", "Leaderships this worker started: shards the coordinator assigned it.", nil}
	famPoolReleases     = family{"s3lect_pool_releases_total", "Leaderships this worker ended because the coordinator moved the shard or Run ended.", nil}
	famPoolSessions     = family{"s3lect_pool_sessions_total", "Sessions this worker opened (more than one: a session was lost).", nil}
	famPoolCoordinating = family{"s3lect_pool_coordinating", "1 while this worker is the pool's coordinator.", nil}
	famPoolCoordTerm    = family{"s3lect_pool_coordinator_term", "The coordinator election's term in which this worker last coordinated the pool (0: never).", nil}
	famPoolRequests     = family{"s3lect_pool_store_requests_total", "Store call attempts of this worker on the pool's objects (not the coordinator election's), by operation.", []string{"op"}}
)

// poolFamilies are every family a PoolCollector describes.
var poolFamilies = []family{famPoolOwned, famPoolClaims, famPoolReleases, famPoolSessions, famPoolCoordinating, famPoolCoordTerm, famPoolRequests}

// PoolCollector is a prometheus.Collector over one pool worker.
type PoolCollector struct {
	p     *pool.Pool
	store string
	descs map[string]*prometheus.Desc
}

// NewPoolCollector returns a collector over the worker p, whose series
// carry the labels pool (Config.Prefix), worker (Config.ID) and store
// (empty; see WithStore). The electors of package s3lect and pool workers
// can share one registry.
func NewPoolCollector(p *pool.Pool) *PoolCollector { return newPoolCollector(p, "") }

// WithStore returns a collector over the same worker whose series carry
// the label store=name, so that two pools with the same Prefix and worker
// ID on different stores stay apart. c itself is unchanged.
func (c *PoolCollector) WithStore(name string) *PoolCollector { return newPoolCollector(c.p, name) }

func newPoolCollector(p *pool.Pool, store string) *PoolCollector {
	s := p.Stats()
	l := prometheus.Labels{"pool": s.Pool, "worker": s.Worker, "store": store}
	c := &PoolCollector{p: p, store: store, descs: map[string]*prometheus.Desc{}}
	for _, f := range poolFamilies {
		c.descs[f.name] = prometheus.NewDesc(f.name, f.help, f.labels, l)
	}
	// As for electors (electorDescs.instance): two collectors over
	// different workers with the same labels differ here, so the registry
	// reports their duplicate series instead of taking the second for the
	// first registered again.
	c.descs["instance"] = prometheus.NewDesc("s3lect_pool_instance", "Never collected: tells workers with the same labels apart at registration.",
		nil, prometheus.Labels{"worker": fmt.Sprintf("%p", p)})
	return c
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.descs["instance"]
	for _, f := range poolFamilies {
		ch <- c.descs[f.name]
	}
}

// Collect implements prometheus.Collector. It reads the worker's Stats,
// which waits for nothing.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	gauge := func(f family, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[f.name], prometheus.GaugeValue, v, labels...)
	}
	counter := func(f family, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[f.name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge(famPoolOwned, float64(s.Owned))
	counter(famPoolClaims, s.Claims)
	counter(famPoolReleases, s.Releases)
	counter(famPoolSessions, s.Sessions)
	gauge(famPoolCoordinating, b2f(s.Coordinating))
	gauge(famPoolCoordTerm, float64(s.Coordinator))
	counter(famPoolRequests, s.Gets, "get")
	counter(famPoolRequests, s.Puts, "put")
	counter(famPoolRequests, s.Lists, "list")
}
