// Package coord is the pure core of the worker pool: the decisions of a
// worker and of the pool's coordinator as functions of (state, event, local
// time) that return effects (store calls, timers, Work to start or stop),
// with no goroutines, no clock and no randomness of their own. The pool
// package runs them against a store; the simulation in this package's
// tests drives them directly, in an order drawn from a seed.
//
// The protocol, whose sections the comments cite, is
// docs/pool-protocol.md.
package coord
