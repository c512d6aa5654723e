package pool

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestDeletedShardRecordUnderALiveOwner: a shard record deleted while its
// owner lives, seen absent by a worker that forgot the shard (it was
// listed by its owner) and that cannot read the owner's session object for
// a while, is created at once: two live leaders. docs/protocol.md 10 says
// only that terms can restart after a deletion.
func TestDeletedShardRecordUnderALiveOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		leads := make(chan started, 16)
		stores := map[string]*faultStore{}
		var cancels []context.CancelFunc
		var dones []chan struct{}
		start := func(id string) {
			fs := &faultStore{Store: mem, held: make(chan struct{}), land: make(chan struct{}), blindKey: "pool/sessions/w2.json"}
			stores[id] = fs
			p, err := New(Config{Store: fs, Prefix: "pool/", ID: id, Shards: []string{"s0", "s1"}, Logger: quiet,
				Work: func(ctx context.Context, shard string, l *s3lect.Leadership) {
					leads <- started{id + "/" + shard, l.Term(), l}
					<-ctx.Done()
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); p.Run(ctx) }()
			cancels, dones = append(cancels, cancel), append(dones, done)
		}
		defer func() {
			for _, c := range cancels {
				c()
			}
			for _, d := range dones {
				<-d
			}
		}()
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
