package s3store_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
	"github.com/s3lect/s3lect/store/storetest"
)

var quiet = slog.New(slog.DiscardHandler)

// Short timings for elections on a real server.
func shortConfig(st store.Store, key, id string) s3lect.ElectorConfig {
	return s3lect.ElectorConfig{
		Store: st, LockfilePath: key, ServerID: id, ServerAddr: id + ":1",
		FrequentInterval: 300 * time.Millisecond, InfrequentInterval: 900 * time.Millisecond, LeaderTimeout: 1500 * time.Millisecond,
		Logger: quiet,
	}
}

func TestElectionOnS3(t *testing.T) {
	bucket := s3test.Bucket(t)
	log := notesLogger(t)
	storetest.Election(t, func(t *testing.T) store.Store {
		return s3store.New(s3test.NewClient(t, nil, "", ""), bucket, s3store.WithLogger(log))
	})
}

func TestCampaignReportsPermanentErrors(t *testing.T) {
	bucket := s3test.Bucket(t)
	cases := []struct {
		name, bucket string
		client       func() store.Store
		want         string
	}{
		{"MissingBucket", "s3lect-missing-bucket", nil, "NoSuchBucket"},
		// versitygw names an unknown key XAdminUserNotFound.
		{"BadCredentials", bucket, nil, "InvalidAccessKeyId|XAdminUserNotFound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			access, secret := "", ""
			if tc.name == "BadCredentials" {
				access, secret = "nobody", "wrong"
			}
			st := s3store.New(s3test.NewClient(t, nil, access, secret), tc.bucket)
			e, err := s3lect.New(shortConfig(st, "leader/perm.json", "a"))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a bound, not a speed limit
			defer cancel()
			start := time.Now()
			_, err = e.Campaign(ctx)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !store.IsPermanent(err) {
				t.Fatalf("Campaign() = %v; want a permanent error, not a retry loop", err)
			}
			t.Logf("Campaign returned the permanent error after %v", time.Since(start))
			for _, s := range []string{tc.bucket, "leader/perm.json"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Campaign() error %q does not name %q", err, s)
				}
			}
			if !slices.ContainsFunc(strings.Split(tc.want, "|"), func(code string) bool { return strings.Contains(err.Error(), code) }) {
				t.Errorf("Campaign() error %q names none of %s", err, tc.want)
			}
		})
	}
}

func TestDefaultStoreFromEnvironment(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", endpoint) // how a MinIO or R2 user points the SDK at their store
	cfg := shortConfig(nil, "e2e/default-store.json", "a")
	cfg.Store, cfg.Bucket, cfg.S3PathStyle = nil, bucket, true
	e, err := s3lect.New(cfg)
	if err != nil {
		t.Fatalf("New(Bucket) = %v", err)
	}
	defer e.Close()
	lead, err := e.Campaign(t.Context())
	if err != nil {
		t.Fatalf("Campaign() = %v", err)
	}
	st, err := s3store.FromEnvironment(t.Context(), bucket, true)
	if err != nil {
		t.Fatalf("FromEnvironment() = %v", err)
	}
	defer st.CloseIdleConnections()
	data, _, err := st.Get(t.Context(), cfg.LockfilePath)
	if err != nil {
		t.Fatalf("Get(%q) = %v", cfg.LockfilePath, err)
	}
	if rec, err := s3lect.ParseRecord(data); err != nil || rec.LeaderID != "a" || rec.Term != lead.Term() {
		t.Errorf("lockfile the default store wrote = %+v, %v; want a's record at term %d", rec, err, lead.Term())
	}
	if err := lead.Resign(t.Context()); err != nil {
		t.Errorf("Resign() = %v", err)
	}
}
