// Package prom exports the state and counters of s3lect electors to
// Prometheus. It is a module of its own, so that programs that do not
// import it never have client_golang in their module graph.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(prom.NewCollector(e1, e2))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every series carries the labels lockfile (the elector's LockfilePath),
// server (its ServerID) and store (the name given to
// [Collector.WithStore]; empty by default, and Prometheus stores a series
// with an empty label as one without it).
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
//
// # Pools
//
// NewPoolCollector exports one worker of a package pool pool, with the
// labels pool (its Prefix), worker (its ID) and store:
//
//	s3lect_pool_shards_owned            shards this worker leads now
//	s3lect_pool_claims_total            leaderships started (shards the coordinator assigned)
//	s3lect_pool_releases_total          leaderships ended by a move or Run's end
//	s3lect_pool_sessions_total          sessions opened (more than one: a session was lost)
//	s3lect_pool_coordinating            1 while this worker is the pool's coordinator
//	s3lect_pool_coordinator_term        the election term it last coordinated in (0: never)
//	s3lect_pool_store_requests_total{op}  store call attempts on the pool's objects: get, put or list
//
// # Many electors in one registry
//
// One registry takes any number of collectors (of electors, of pools'
// electors), as long as no two electors in it have the same lockfile,
// server and store. Electors of one group differ by server, the shards
// of a pool by lockfile. Electors on different stores (two buckets, two
// endpoints) may have the same lockfile and server: give each store a
// collector of its own and name the store as an operator would look for
// it, for instance by the URL it was opened from:
//
//	reg.MustRegister(
//		prom.NewCollector(eu).WithStore("s3://locks-eu"),
//		prom.NewCollector(us).WithStore("s3://locks-us"),
//	)
//
// A collision is refused when the collector is registered, never left
// for a scrape to fail on: Register returns an error, and MustRegister
// panics with it, naming the lockfile, server and store the electors
// share. Within one collector the error says which two electors (by
// position) collide; across collectors it is the registry's "descriptor
// ... already exists", whose help text points to WithStore. A collector
// over the very same electors as one already registered gets
// prometheus.AlreadyRegisteredError, so the usual handling of that error
// (use the existing collector) stays right.
package prom

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3lect/s3lect"
)

// A family is one metric name with its help and the labels that vary
// within one source's series; a source (an elector) adds its identity as
// constant labels.
type family struct {
	name, help string
	labels     []string
}

// The families of an elector.
var (
	famLeader = family{"s3lect_leader", "1 while this elector holds the leadership of the lockfile, else 0. " +
		"The labels lockfile, server and store name the elector and must be unique in a registry: " +
		"name electors' stores apart with prom's Collector.WithStore.", nil}
	famTerm     = family{"s3lect_term", "Term (fencing token) of the leader this elector knows of; 0 when it knows of none.", nil}
	famMode     = family{"s3lect_mode", "1 for the elector's current mode (leader, frequent, infrequent, peer), 0 for the others.", []string{"mode"}}
	famWon      = family{"s3lect_leaderships_won_total", "Leaderships this elector has won.", nil}
	famEnds     = family{"s3lect_leadership_ends_total", "Leaderships of this elector that have ended, by cause.", []string{"cause"}}
	famStore    = family{"s3lect_store_requests_total", "Store call attempts, by operation and result.", []string{"op", "result"}}
	famPeer     = family{"s3lect_peer_requests_total", "Questions to the leader over HTTPS in PeerMode, by result.", []string{"result"}}
	famRenewAge = family{"s3lect_renewal_age_seconds", "While leading: seconds since the last successful write of the leadership was sent.", nil}
	famReadAge  = family{"s3lect_read_age_seconds", "Seconds since the elector last read the lockfile successfully.", nil}

	modes = []string{"leader", "frequent", "infrequent", "peer"}
)

// identity holds the labels every series of one source carries. Two
// sources with the same identity in one registry would collide.
type identity struct {
	lockfile, server, store string
}

func (id identity) labels() prometheus.Labels {
	return prometheus.Labels{"lockfile": id.lockfile, "server": id.server, "store": id.store}
}

func (id identity) String() string {
	return fmt.Sprintf("lockfile %q, server %q and store %q", id.lockfile, id.server, id.store)
}

// electorDescs holds one elector's descriptors. Its identity is in their
// constant labels, so that the registry refuses, at registration, an
// elector whose series would collide with one already registered.
type electorDescs struct {
	e                                                             *s3lect.Elector
	id                                                            identity
	leader, term, mode, won, ends, store, peer, renewAge, readAge *prometheus.Desc

	// instance carries the elector's address. The registry takes two
	// collectors that describe the same descriptors for the same
	// collector registered twice (AlreadyRegisteredError, whose usual
	// handling keeps the first and silently drops the second). With it,
	// collectors over different electors with the same identity differ,
	// and the registry reports the duplicate series instead.
	instance *prometheus.Desc
}

func newElectorDescs(e *s3lect.Elector, store string) electorDescs {
	s := e.Stats()
	id := identity{lockfile: s.Lockfile, server: s.ServerID, store: store}
	l := id.labels()
	desc := func(f family) *prometheus.Desc { return prometheus.NewDesc(f.name, f.help, f.labels, l) }
	return electorDescs{e: e, id: id,
		leader: desc(famLeader), term: desc(famTerm), mode: desc(famMode), won: desc(famWon), ends: desc(famEnds),
		store: desc(famStore), peer: desc(famPeer), renewAge: desc(famRenewAge), readAge: desc(famReadAge),
		instance: prometheus.NewDesc("s3lect_elector_instance", "Never collected: tells electors with the same labels apart at registration.",
			nil, prometheus.Labels{"elector": fmt.Sprintf("%p", e)}),
	}
}

// describe sends d's descriptors, leader last: when an elector collides
// with one registered before, the registry's error shows the last
// duplicate descriptor it was sent, and leader's help says how to fix it.
func (d *electorDescs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.instance, d.term, d.mode, d.won, d.ends, d.store, d.peer, d.renewAge, d.readAge, d.leader} {
		ch <- x
	}
}

func (d *electorDescs) collect(ch chan<- prometheus.Metric, now time.Time) {
	s := d.e.Stats()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(d.leader, b2f(s.Mode == "leader"))
	gauge(d.term, float64(s.Term))
	for _, m := range modes {
		gauge(d.mode, b2f(s.Mode == m), m)
	}
	counter(d.won, s.Won)
	for cause, n := range s.Ended {
		counter(d.ends, n, cause)
	}
	for op, byResult := range s.StoreRequests {
		for res, n := range byResult {
			counter(d.store, n, op, res)
		}
	}
	for res, n := range s.PeerRequests {
		counter(d.peer, n, res)
	}
	if s.Mode == "leader" && !s.LastRenewal.IsZero() {
		gauge(d.renewAge, now.Sub(s.LastRenewal).Seconds())
	}
	if !s.LastRead.IsZero() {
		gauge(d.readAge, now.Sub(s.LastRead).Seconds())
	}
}

// Collector is a prometheus.Collector over a fixed set of electors on one
// store.
type Collector struct {
	electors  []*s3lect.Elector
	storeName string
	descs     []electorDescs
	err       error // a collision between the electors, reported by Describe
	now       func() time.Time
}

// NewCollector returns a collector over electors, whose series carry an
// empty store label. Register it once; each scrape reads every elector's
// Stats, which waits for nothing. Give electors on different stores
// collectors of their own, named with WithStore.
func NewCollector(electors ...*s3lect.Elector) *Collector {
	return newCollector(electors, "")
}

// WithStore returns a collector over the same electors whose series carry
// the label store=name. Name the store as an operator would look for it
// (for instance the URL it was opened from, "s3://locks-eu"), so that
// electors on different stores with the same LockfilePath and ServerID
// stay apart. c itself is unchanged.
func (c *Collector) WithStore(name string) *Collector {
	return newCollector(c.electors, name)
}

func newCollector(electors []*s3lect.Elector, store string) *Collector {
	c := &Collector{electors: append([]*s3lect.Elector(nil), electors...), now: time.Now}
	seen := map[identity]int{}
	for i, e := range electors {
		d := newElectorDescs(e, store)
		j, dup := seen[d.id]
		switch {
		case !dup:
			seen[d.id] = i
		case c.err != nil: // the first collision is reported
		case electors[j] == e:
			c.err = fmt.Errorf("prom: electors %d and %d of the collector are the same elector; give each elector once", j+1, i+1)
		default:
			c.err = fmt.Errorf("prom: electors %d and %d of the collector have the same %s, so their series would collide; "+
				"if they are on different stores, give each store a collector of its own named with WithStore", j+1, i+1, d.id)
		}
		c.descs = append(c.descs, d)
	}
	return c
}

// Describe implements prometheus.Collector. If two of the collector's
// electors would collide, it describes only the error, so that Register
// returns it.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.err != nil {
		ch <- prometheus.NewInvalidDesc(c.err)
		return
	}
	for i := range c.descs {
		c.descs[i].describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil {
		return
	}
	now := c.now()
	for i := range c.descs {
		c.descs[i].collect(ch, now)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
