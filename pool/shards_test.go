package pool

import (
	"context"
	"strings"
	"testing"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestSetShardsNamesWhatIsWrong: SetShards refuses what New refuses in
// Config.Shards, naming it (the change itself is tested by
// TestShardsAddedAndRemovedWhileThePoolRuns).
func TestSetShardsNamesWhatIsWrong(t *testing.T) {
	p, err := New(Config{Store: memstore.New(), Prefix: "pools/s/", ID: "w1", Shards: []string{"a"},
		Work: func(ctx context.Context, shard string, lead *s3lect.Leadership) { <-ctx.Done() }})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		shards []string
		want   string
	}{{nil, "no shard named"}, {[]string{"a", ""}, "empty shard name"}, {[]string{"a", "b", "a"}, `shard "a" named twice`}, {[]string{"a\x00"}, "NUL"}} {
		if err := p.SetShards(c.shards); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetShards(%q) = %v; want an error saying %q", c.shards, err, c.want)
		}
	}
	if err := p.SetShards([]string{"a", "b"}); err != nil {
		t.Errorf("SetShards(a, b) = %v", err)
	}
}
