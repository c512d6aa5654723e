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
	famPoolSeen = family{"s3lect_pool_worker_shards", "Shards each live worker owns, as this worker last saw the pool (by the workers' session records); " +
		"the owner label names the worker counted.", []string{"owner"}}
	famPoolBalanced   = family{"s3lect_pool_balanced", "1 when, at this worker's last look, every shard was owned and every live worker owned its fair share (⌊N/W⌋ or ⌈N/W⌉).", nil}
	famPoolClaims     = family{"s3lect_pool_claims_total", "Shards this worker took: vacant, handed over, or taken over from a worker whose session ended.", nil}
	famPoolHandovers  = family{"s3lect_pool_handovers_total", "Shards this worker gave up to balance the pool.", nil}
	famPoolReleases   = family{"s3lect_pool_releases_total", "Shard records this worker wrote released.", nil}
	famPoolExpired    = family{"s3lect_pool_expired_total", "Leaderships of this worker that ended with its session lease.", nil}
	famPoolSessions   = family{"s3lect_pool_sessions_total", "Sessions this worker opened (more than one: a session was lost).", nil}
	famPoolRebalances = family{"s3lect_pool_rebalances_total", "Times this worker saw the pool go from unbalanced to balanced.", nil}
	famPoolRebalance  = family{"s3lect_pool_last_rebalance_seconds", "How long the last rebalancing took, from the first look that found the pool unbalanced.", nil}
	famPoolRequests   = family{"s3lect_pool_store_requests_total", "Store call attempts of this worker, by operation.", []string{"op"}}
)

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
	for _, f := range []family{famPoolOwned, famPoolSeen, famPoolBalanced, famPoolClaims, famPoolHandovers, famPoolReleases,
		famPoolExpired, famPoolSessions, famPoolRebalances, famPoolRebalance, famPoolRequests} {
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
	for _, f := range []family{famPoolSeen, famPoolBalanced, famPoolClaims, famPoolHandovers, famPoolReleases,
		famPoolExpired, famPoolSessions, famPoolRebalances, famPoolRebalance, famPoolRequests, famPoolOwned} {
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
	for w, n := range s.Workers {
		gauge(famPoolSeen, float64(n), w)
	}
	gauge(famPoolBalanced, b2f(s.Balanced))
	counter(famPoolClaims, s.Claims)
	counter(famPoolHandovers, s.Handovers)
	counter(famPoolReleases, s.Releases)
	counter(famPoolExpired, s.Expired)
	counter(famPoolSessions, s.Sessions)
	counter(famPoolRebalances, s.Rebalances)
	gauge(famPoolRebalance, s.LastRebalance.Seconds())
	counter(famPoolRequests, s.Gets, "get")
	counter(famPoolRequests, s.Puts, "put")
}
