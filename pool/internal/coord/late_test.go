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
// led within the bound. -sim.late=<part of a key> makes only those
// writes late, here and in TestSimulation and TestPeerSimulation.
func TestSimulationWithLateWrites(t *testing.T) {
	n := 40
	if os.Getenv("S3LECT_SIM_SEEDS") != "" {
		n = 4
	}
	old := simLate
	if simLate == "" {
		simLate = "put " // every write, unless -sim.late names which
	}
	defer func() { simLate = old }()
	t.Run("storage", func(t *testing.T) { runSeeds(t, n, false) })
	t.Run("peer", func(t *testing.T) { runSeeds(t, n, true) })
}
