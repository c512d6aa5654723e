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

func TestPoolBalancesAndFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 4, 40)
		defer g.stop()
		ids := []string{"w1", "w2", "w3", "w4"}

		time.Sleep(2 * testLT)
		if c := g.counts(); !within(c, ids, 10, 10, 40) {
			t.Fatalf("2 × LeaderTimeout after a common start: %s; want 10 each", spread(c))
		}
		dead := g.workers[3]
		dead.st.dead.Store(true)
		killed := time.Now()
		time.Sleep(2 * testLT)
		if c := g.counts(); !within(c, ids[:3], 13, 14, 40) {
			t.Errorf("2 × LeaderTimeout after w4 was killed: %s; want 13 or 14 each, 40 in all", spread(c))
		}
		t.Logf("after the kill: %s at %v", spread(g.counts()), time.Since(killed))
		g.check(t)
	})
}

func TestPoolWorkReturningEarlyResigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ran := make(chan uint64, 4)
		p, err := New(Config{Store: memstore.New(), Prefix: "p/", ID: "quick", Shards: []string{"only"}, Logger: quiet,
			Work: func(ctx context.Context, shard string, l *s3lect.Leadership) { ran <- l.Term() }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		first := <-ran
		second := <-ran // the first leadership was resigned and released, so the shard was taken again
		if second != first+1 {
			t.Errorf("terms %d then %d; want one more each time", first, second)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	work := func(context.Context, string, *s3lect.Leadership) {}
	st := memstore.New()
	ok := Config{Store: st, Prefix: "p/", ID: "a", Shards: []string{"a"}, Work: work}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"NoStore", with(func(c *Config) { c.Store = nil }), "Store is nil"},
		{"NoPrefix", with(func(c *Config) { c.Prefix = "" }), "Prefix is empty"},
		{"NoID", with(func(c *Config) { c.ID = "" }), "ID is empty"},
		{"SlashID", with(func(c *Config) { c.ID = "a/b" }), "contains a slash"},
		{"NoShards", with(func(c *Config) { c.Shards = nil }), "Shards is empty"},
		{"NoWork", with(func(c *Config) { c.Work = nil }), "Work is nil"},
		{"Duplicate", with(func(c *Config) { c.Shards = []string{"a", "a"} }), `shard "a" twice`},
		{"EmptyShard", with(func(c *Config) { c.Shards = []string{""} }), "empty name"},
		{"ShortLease", with(func(c *Config) { c.LeaderTimeout = 2 * time.Second; c.FrequentInterval = time.Second }), "must exceed two FrequentIntervals"},
		{"Negative", with(func(c *Config) { c.FrequentInterval = -1 }), "FrequentInterval -1ns is negative"},
		{"NegativeInfrequent", with(func(c *Config) { c.InfrequentInterval = -1 }), "InfrequentInterval -1ns is negative"},
		{"InfrequentBelowFrequent", with(func(c *Config) { c.InfrequentInterval = time.Second }), "InfrequentInterval 1s is below FrequentInterval 5s"},
		{"LongKey", with(func(c *Config) { c.ID = strings.Repeat("x", 1100) }), "exceed 1024 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v; want one saying %q", err, tc.want)
			}
		})
	}
	if _, err := New(ok); err != nil {
		t.Errorf("New(valid) = %v", err)
	}
}
