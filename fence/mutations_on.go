//go:build s3lect_mutations

package fence

// The mutations of mutations.go as variables, for the simulation's
// -sim.mutate flag.
var (
	mutNoTermCheck bool // write whatever term the key holds
)
