package coord

import (
	"fmt"
	"testing"

	"github.com/s3lect/s3lect/store"
)

// TestPageHomesAreLeftOutWhenThePageWouldNotFit: a page at capacity whose
// shards all have homes would pass store.MaxObjectSize; it is written
// with its shards and without its homes. A small page keeps them.
func TestPageHomesAreLeftOutWhenThePageWouldNotFit(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("shard-%05d", i) }
	n := PageCapacity(len(Marshal(name(0))))
	p := Page{V: wireVersion, Ver: Ver{1, 1}, ID: "w1", Session: "s1", Shards: map[string]uint64{}, Homes: map[string]string{}}
	for i := range n {
		p.Shards[name(i)] = 1<<32 | uint64(i+1)
		p.Homes[name(i)] = "w-returning-worker-with-a-long-id"
	}
	data := pageData(p)
	if len(data) > store.MaxObjectSize {
		t.Fatalf("page of %d shards with homes encoded to %d bytes; want at most %d", n, len(data), store.MaxObjectSize)
	}
	got, err := ParsePage(data, "w1")
	if err != nil || len(got.Shards) != n || got.Homes != nil {
		t.Errorf("page at capacity = %d shards, homes %v, err %v; want %d shards and no homes", len(got.Shards), got.Homes != nil, err, n)
	}
	small := Page{V: wireVersion, Ver: Ver{1, 2}, ID: "w1", Session: "s1", Shards: map[string]uint64{"a": 1<<32 | 1}, Homes: map[string]string{"a": "w2"}}
	if got, _ := ParsePage(pageData(small), "w1"); got.Homes["a"] != "w2" {
		t.Errorf("a small page's homes = %v; want a → w2", got.Homes)
	}
}
