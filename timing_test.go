package s3lect

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestNewRefusesTimingsThatOverflow: a timing beyond lease.MaxTiming (ten
// years) is refused with an error naming the field and the largest value
// allowed, Go's "no timeout" (math.MaxInt64) among them; the largest
// allowed is accepted.
func TestNewRefusesTimingsThatOverflow(t *testing.T) {
	const forever = time.Duration(math.MaxInt64)
	longest := lease.MaxTiming
	for _, tc := range []struct {
		name  string
		edit  func(c *ElectorConfig)
		field string // "" for a valid config
	}{
		{"LeaderTimeoutLongest", func(c *ElectorConfig) { c.LeaderTimeout = longest }, ""},
		{"AllLongest", func(c *ElectorConfig) {
			c.FrequentInterval, c.InfrequentInterval, c.LeaderTimeout, c.PeerTimeout = longest/3, longest, longest, longest
		}, ""},
		{"LeaderTimeoutForever", func(c *ElectorConfig) { c.LeaderTimeout = forever }, "LeaderTimeout"},
		{"LeaderTimeoutJustOver", func(c *ElectorConfig) { c.LeaderTimeout = longest + 1 }, "LeaderTimeout"},
		{"LeaderTimeoutCentury", func(c *ElectorConfig) { c.LeaderTimeout = 100 * 365 * 24 * time.Hour }, "LeaderTimeout"},
		{"FrequentForever", func(c *ElectorConfig) { c.FrequentInterval = forever }, "FrequentInterval"},
		{"FrequentJustOver", func(c *ElectorConfig) {
			c.FrequentInterval, c.InfrequentInterval, c.LeaderTimeout = longest+1, longest, longest
		}, "FrequentInterval"},
		{"InfrequentForever", func(c *ElectorConfig) { c.InfrequentInterval = forever }, "InfrequentInterval"},
		{"InfrequentJustOver", func(c *ElectorConfig) { c.InfrequentInterval = longest + 1 }, "InfrequentInterval"},
		{"PeerTimeoutForever", func(c *ElectorConfig) { c.PeerTimeout = forever }, "PeerTimeout"},
		{"PeerTimeoutJustOver", func(c *ElectorConfig) { c.PeerTimeout = longest + 1 }, "PeerTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ElectorConfig{Store: memstore.New(), LockfilePath: "k", ServerID: "a"}
			tc.edit(&cfg)
			if tc.field == "" {
				wantNewError(t, cfg)
			} else {
				wantNewError(t, cfg, tc.field+" ", longest.String()) // the field and the largest value allowed
			}
		})
	}
}

// TestLongestLeaseHolds: a leader with the longest LeaderTimeout allowed
// states it in its record and still leads a day later (its ttl and
// deadline do not wrap).
func TestLongestLeaseHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		e := newTestElector(t, ElectorConfig{Store: mem, LockfilePath: testKey, ServerID: "a", LeaderTimeout: lease.MaxTiming, Logger: quietLogger})
		l, err := e.Campaign(t.Context())
		if err != nil {
			t.Fatalf("Campaign() = %v", err)
		}
		time.Sleep(24 * time.Hour)
		if err := l.Context().Err(); err != nil {
			t.Fatalf("leadership with LeaderTimeout %v ended within a day: %v", lease.MaxTiming, context.Cause(l.Context()))
		}
		data, _, _ := mem.Get(t.Context(), testKey)
		rec, err := ParseRecord(data)
		if err != nil || rec.TTL != lease.MaxTiming.Milliseconds() {
			t.Errorf("record = %+v, %v; want ttl %d", rec, err, lease.MaxTiming.Milliseconds())
		}
	})
}

// TestHugeTTLIsWaitedOutLong: a record stating a ttl past any duration
// (a hostile or broken writer) is waited out as the longest lease allowed,
// not wrapped into a short wait.
func TestHugeTTLIsWaitedOutLong(t *testing.T) {
	for _, ttl := range []int64{math.MaxInt64, math.MaxInt64 / 1000, lease.MaxTiming.Milliseconds() + 1} {
		var sh shared
		sh.p.lt = time.Second
		v := view{}.observe(Record{LeaderID: "x", LastUpdated: time.Unix(1, 0), Term: 1, Lease: "l", TTL: ttl}.encode(), "e1", time.Unix(100, 0))
		if got := sh.lease(v); got != lease.MaxTiming {
			t.Errorf("ttl %d ms: waited %v; want %v", ttl, got, lease.MaxTiming)
		}
		held := Record{LeaderID: "x", LastUpdated: time.Unix(1, 0), Term: 1, Lease: "l", TTL: 1000, Held: math.MaxInt64}
		w := view{}.observe(held.encode(), "e2", time.Unix(100, 0))
		if at, _ := w.takeoverAt(time.Second); at.Before(time.Unix(101, 0)) {
			t.Errorf("held %d ms: takeover at %v; want no sooner than its first sight + lease, %v", held.Held, at, time.Unix(101, 0))
		}
	}
}
