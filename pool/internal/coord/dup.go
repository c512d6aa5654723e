package coord

import "time"

// renewsAgain takes in that the foreign session on the worker's key has
// renewed once since the worker first read it (its seq risen to seq), and
// reports whether the worker must read on before counting a displacement
// (W1). One rise is not enough: an operator who puts the key back to two
// consecutive versions of an earlier process (a restore tool replaying a
// version history, replication catching up) shows one, and then stands
// still. A duplicate process renews again within its ttl of the rise (its
// FrequentInterval is under half its LeaderTimeout), so the worker counts
// it on a second rise, read within the ttl after the first.
func (w *Worker) renewsAgain(now time.Time, seq uint64) bool {
	if w.dup.rose {
		return false
	}
	w.dup.seq, w.dup.at, w.dup.rose = seq, now, true
	return true
}
