package coord

import (
	"os"
	"testing"
)

// TestSimulationWithLateWrites (thirteenth review, what held): the random
// simulation with one write in twelve, during the faults, landing up to
// two LeaderTimeouts after its send instead of within 1.2 s: a request
// held in the network, or what the executor does after a host's resume,
// where a coordinator's page write retried by lease.Calls.Put is sent
// before the leadership's expiry timer has caught up with the clock
// (the thirteenth review's report). Late pages of a deposed
// era, late session writes of a worker whose lease is over, late news
// and rosters: no two live owners, no repeated or lower term, every shard
// led within the bound. -sim.late=<part of a key> runs the same in
// TestSimulation and TestPeerSimulation over more seeds.
func TestSimulationWithLateWrites(t *testing.T) {
	if simLate != "" {
		t.Skip("-sim.late is given: TestSimulation runs it")
	}
	n := 40
	if os.Getenv("S3LECT_SIM_SEEDS") != "" {
		n = 4
	}
	simLate = "put "
	defer func() { simLate = "" }()
	t.Run("storage", func(t *testing.T) { runSeeds(t, n, false) })
	t.Run("peer", func(t *testing.T) { runSeeds(t, n, true) })
}
