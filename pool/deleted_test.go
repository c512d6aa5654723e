package pool

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestDeletedShardRecordUnderALiveOwner: a shard record deleted while its
// owner lives, seen absent by a worker that forgot the shard (it was
// listed by its owner) and that cannot read the owner's session object for
// a while, is created at once: two live leaders. docs/protocol.md 10 says
// only that terms can restart after a deletion.
func TestDeletedShardRecordUnderALiveOwner(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		fp := newFaultPools(t, []string{"s0", "s1"}, func(worker, shard string) string { return worker + "/" + shard })
		fp.blindKey = "pool/sessions/w2.json"
		defer fp.stop()
		mem, leads, stores, start := fp.mem, fp.leads, fp.stores, fp.start
		start("w1")
		start("w2")
		time.Sleep(3 * testLT)
		live := map[string]started{}
		for len(leads) > 0 {
			s := <-leads
			live[s.id] = s
		}
		var x string
		for k, s := range live {
			if strings.HasPrefix(k, "w2/") && s.l.Context().Err() == nil {
				x = strings.TrimPrefix(k, "w2/")
			}
		}
		if x == "" {
			t.Fatalf("w2 leads nothing after 3 × LeaderTimeout: %v", live)
		}
		owner := live["w2/"+x]
		mem.Delete("pool/shards/" + x + ".json")
		stores["w1"].blind.Store(true) // w1's reads of w2's session fail for a while
		time.Sleep(2 * testLT)
		stores["w1"].blind.Store(false)
		for len(leads) > 0 {
			s := <-leads
			if s.id == "w1/"+x && owner.l.Context().Err() == nil {
				t.Errorf("w1 took %s at term %d while w2's leadership (term %d) was live", x, s.term, owner.term)
			}
		}
	})
}
