package s3lect

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

func TestNewValidatesConfig(t *testing.T) {
	mem := memstore.New()
	base := func() ElectorConfig {
		return ElectorConfig{Store: mem, LockfilePath: "k", ServerID: "a"}
	}
	cases := []struct {
		name  string
		edit  func(c *ElectorConfig)
		field string // "" for a valid config
	}{
		{"Defaults", func(c *ElectorConfig) {}, ""},
		{"TensOfMilliseconds", func(c *ElectorConfig) {
			c.FrequentInterval, c.InfrequentInterval, c.LeaderTimeout, c.PeerTimeout = 10*time.Millisecond, 20*time.Millisecond, 30*time.Millisecond, 10*time.Millisecond
		}, ""},
		{"NoStoreNoBucket", func(c *ElectorConfig) { c.Store = nil }, "Bucket"},
		{"StoreAndBucket", func(c *ElectorConfig) { c.Bucket = "b" }, "Bucket"},
		{"BucketWithS3Backend", func(c *ElectorConfig) { c.Store, c.Bucket = nil, "b" }, ""},
		{"NoLockfile", func(c *ElectorConfig) { c.LockfilePath = "" }, "LockfilePath"},
		{"LockfileNUL", func(c *ElectorConfig) { c.LockfilePath = "a\x00b" }, "LockfilePath"},
		{"LockfileTooLong", func(c *ElectorConfig) { c.LockfilePath = strings.Repeat("k", 1025-claimKeyLen) }, "LockfilePath"},
		{"LockfileLongest", func(c *ElectorConfig) { c.LockfilePath = strings.Repeat("k", 1024-claimKeyLen) }, ""},
		{"LockfileNotUTF8", func(c *ElectorConfig) { c.LockfilePath = "a\xffb" }, "LockfilePath"},
		{"NoServerID", func(c *ElectorConfig) { c.ServerID = "" }, "ServerID"},
		{"NegativeFrequent", func(c *ElectorConfig) { c.FrequentInterval = -time.Second }, "FrequentInterval"},
		{"NegativeInfrequent", func(c *ElectorConfig) { c.InfrequentInterval = -time.Second }, "InfrequentInterval"},
		{"NegativeTimeout", func(c *ElectorConfig) { c.LeaderTimeout = -time.Second }, "LeaderTimeout"},
		{"NegativePeerTimeout", func(c *ElectorConfig) { c.PeerTimeout = -time.Second }, "PeerTimeout"},
		{"TimeoutTwoIntervals", func(c *ElectorConfig) { c.FrequentInterval, c.LeaderTimeout = 5*time.Second, 10*time.Second }, "LeaderTimeout"},
		{"FrequentAboveDefaultTimeout", func(c *ElectorConfig) { c.FrequentInterval = 8 * time.Second }, "LeaderTimeout"},
		{"InfrequentBelowFrequent", func(c *ElectorConfig) { c.InfrequentInterval = time.Second }, "InfrequentInterval"},
		{"PeerModeWithoutAddr", func(c *ElectorConfig) { c.PeerMode = true }, "ServerAddr"},
		{"RelativeHealthPath", func(c *ElectorConfig) { c.PeerHealthPath = "health" }, "PeerHealthPath"},
		// The default PeerWait, LeaderTimeout/2, is capped at the minute a
		// leader waits at most: a long lease alone is valid.
		{"LongLeaseDefaultPeerWait", func(c *ElectorConfig) { c.LeaderTimeout = 5 * time.Minute }, ""},
		{"PeerWaitAboveMinute", func(c *ElectorConfig) { c.PeerWait = 2 * time.Minute }, "PeerWait"},
	}
	// Bucket builds the S3 store from the AWS environment, which must have
	// credentials (docs/stores.md): static ones here, whatever the machine
	// running the test has.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			if tc.field == "" {
				wantNewError(t, cfg)
			} else {
				wantNewError(t, cfg, tc.field)
			}
		})
	}
}

func TestBucketNeedsS3Backend(t *testing.T) {
	saved := defaultstore.Get() // this test binary links s3store in; unlink it
	defaultstore.Register(nil)
	defer defaultstore.Register(saved)
	_, err := New(ElectorConfig{Bucket: "b", LockfilePath: "k", ServerID: "a"})
	if err == nil || !strings.Contains(err.Error(), "store/s3store") {
		t.Errorf("New(Bucket) without the S3 backend = %v; want an error naming the package to import", err)
	}
}

func TestNewStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newFaultStore(memstore.New())
		e, err := New(testConfig(fs, "a"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		if n := len(fs.log()); n != 0 {
			t.Errorf("an idle elector made %d store calls in an hour; want 0", n)
		}
		if err := e.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("second Close() = %v", err)
		}
		if _, err := e.Campaign(t.Context()); !errors.Is(err, ErrClosed) {
			t.Errorf("Campaign after Close = %v; want ErrClosed", err)
		}
		if _, ok := <-e.Changes(); ok {
			t.Error("Changes() after Close delivered a value; want a closed channel")
		}
	})
}

// TestStoreCallsPerHour counts store calls per virtual hour by role at the
// default intervals, and prints them.
func TestStoreCallsPerHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		mk := func(id string) *node {
			fs := newFaultStore(mem)
			cfg := testConfig(fs, id)
			cfg.FrequentInterval, cfg.InfrequentInterval, cfg.LeaderTimeout = 0, 0, 0 // defaults
			e := newTestElector(t, cfg)
			return &node{id: id, fs: fs, e: e}
		}
		leader, follower := mk("leader"), mk("follower")
		if _, err := leader.e.Campaign(t.Context()); err != nil {
			t.Fatal(err)
		}
		go follower.e.Campaign(t.Context())

		// A watcher of a group with no leader stays in the frequent interval.
		watcherStore := newFaultStore(memstore.New())
		cfg := testConfig(watcherStore, "watcher")
		cfg.FrequentInterval, cfg.InfrequentInterval, cfg.LeaderTimeout = 0, 0, 0
		watcher, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer watcher.Close()
		watcher.Changes()

		time.Sleep(time.Hour)
		synctest.Wait()
		rows := []struct {
			role             string
			fs               *faultStore
			wantGet, wantPut int
		}{
			{"leader", leader.fs, 0, 720},
			{"follower, infrequent", follower.fs, 120, 0},
			{"follower, frequent", watcherStore, 720, 0},
		}
		for _, r := range rows {
			gets, puts := r.fs.count("get"), r.fs.count("put")
			t.Logf("%-22s GET %4d/h  PUT %4d/h", r.role, gets, puts)
			if !near(gets, r.wantGet) || !near(puts, r.wantPut) {
				t.Errorf("%s: %d GET and %d PUT per hour; want about %d and %d", r.role, gets, puts, r.wantGet, r.wantPut)
			}
		}
	})
}

// near reports whether got is want give or take the few calls of the
// first minute, before a follower settles.
func near(got, want int) bool { return got >= want && got <= want+4 }

// wantNewError calls New(cfg). With no want it must succeed; otherwise
// its error must contain every string of want (the field it names, and
// whatever else the error must say).
func wantNewError(t *testing.T, cfg ElectorConfig, want ...string) {
	t.Helper()
	e, err := New(cfg)
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("New() error = %v; want nil", err)
		}
		e.Close()
		return
	}
	if err == nil {
		e.Close()
		t.Fatalf("New() error = nil; want one naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("New() error = %q; want it to say %q", err, w)
		}
	}
}
