// Package coord is the pure core of the worker pool: the decisions of a
// worker and of the pool's coordinator as functions of (state, event, local
// time) that return effects (store calls, timers, Work to start or stop),
// with no goroutines, no clock and no randomness of their own. The pool
// package runs them against a store; the simulation in this package's
// tests drives them directly, in an order drawn from a seed.
//
// The protocol is in docs/pool-coordinator.md. In short: each worker keeps
// one session object (its lease), listing the shards it leads and the
// page of the assignment it has applied; one coordinator, elected by
// package s3lect, writes each worker a page naming the shards it may lead,
// with If-Match, and moves a shard only once the worker that had it shows
// it released or its session is over.
package coord
