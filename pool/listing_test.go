package pool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
)

// listRecorder records every key its listings of a sub-prefix returned:
// Run's one listing of the whole Prefix at its start, for the old pool's
// objects (oldpool.go), is not the coordinator's.
type listRecorder struct {
	store.Store
	mu     sync.Mutex
	listed []string
}

func (l *listRecorder) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	es, err := l.Store.(store.Lister).List(ctx, prefix)
	if prefix == "pools/t/" {
		return es, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range es {
		l.listed = append(l.listed, e.Key)
	}
	return es, err
}

// TestListingLeavesTheElectionsTermClaimsOut: the coordinator lists the
// sessions and their news, never the pages nor the coordinator
// election's lockfile and term claims (one per takeover, never deleted):
// its listing does not grow with the takeovers. Here the coordinator
// leaves three times, so that the election changes hands and claims
// pile up.
func TestListingLeavesTheElectionsTermClaimsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		rec := &listRecorder{Store: st}
		var pools []*Pool
		var stops []context.CancelFunc
		var errs []chan error
		for i := range 4 {
			p, err := New(testConfig(rec, "pools/t/", fmt.Sprintf("w%d", i), []string{"a", "b", "c", "d"}))
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			pools, stops, errs = append(pools, p), append(stops, stop), append(errs, errc)
		}
		live := []int{0, 1, 2, 3}
		for range 3 { // the coordinator leaves, three times: the election changes hands
			time.Sleep(10 * time.Second)
			c := slices.IndexFunc(live, func(i int) bool { return pools[i].Stats().Coordinator != 0 })
			if c < 0 {
				t.Fatalf("no coordinator among workers %v", live)
			}
			stops[live[c]]()
			if err := <-errs[live[c]]; err != nil {
				t.Errorf("Run() of w%d = %v", live[c], err)
			}
			live = slices.Delete(live, c, c+1)
		}
		time.Sleep(10 * time.Second)
		stops[live[0]]()
		<-errs[live[0]]
		all, err := st.List(context.Background(), "pools/t/")
		if err != nil {
			t.Fatal(err)
		}
		claims := 0
		for _, e := range all {
			if strings.HasPrefix(e.Key, "pools/t/coordinator.json.term.") {
				claims++
			}
		}
		if claims < 3 {
			t.Fatalf("%d term claims in the store after the workers left in turn; want the election to have changed hands", claims)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.listed) == 0 {
			t.Fatal("no listing returned a key")
		}
		for _, k := range rec.listed {
			if !strings.HasPrefix(k, "pools/t/workers/") && !strings.HasPrefix(k, "pools/t/news/") {
				t.Fatalf("the coordinator's listing returned %s; want only sessions and news (%d term claims in the store)", k, claims)
			}
		}
	})
}
