//go:build race

package s3lect

// raceOn says the tests run under the race detector, which slows the
// simulations about tenfold.
const raceOn = true
