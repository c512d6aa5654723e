//go:build !s3lect_mutations

package fence

// Mutations break one rule of the fence each, to see the simulation catch
// it (TestFenceSimulation). In every build but the mutation runs they are
// constants, false: nothing can switch one off. Built with -tags
// s3lect_mutations (mutations_on.go), they are variables that -sim.mutate
// sets:
//
//	go test -tags s3lect_mutations -run TestFenceSimulation ./fence -sim.mutate=noterm
const (
	mutNoTermCheck = false // write whatever term the key holds
)
