package azblobstore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/azblobstore"
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

func TestElectionOnAzurite(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	storetest.Election(t, func(t *testing.T) store.Store {
		return azblobstore.New(newClient(t, conn, testContainer, nil))
	})
}

func TestCampaignReportsPermanentErrors(t *testing.T) {
	t.Parallel() // a server of its own: side by side with the others
	conn := azurite(t)
	const key = "leader/perm.json"
	cases := []struct {
		name, conn, container string
		want                  []string // what the error must name
	}{
		{"MissingContainer", conn, "s3lect-missing", []string{"s3lect-missing", key, "ContainerNotFound", "az storage container create"}},
		// Real Azure answers a bad shared-key signature with
		// AuthenticationFailed; Azurite with AuthorizationFailure.
		{"WrongAccountKey", wrongKey(conn), testContainer, []string{testContainer, key, "account key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := azblobstore.New(newClient(t, tc.conn, tc.container, nil))
			e, err := s3lect.New(shortConfig(st, key, "a"))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a liveness bound, not a speed limit
			defer cancel()
			_, err = e.Campaign(ctx)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !store.IsPermanent(err) {
				t.Fatalf("Campaign() = %v; want a permanent error, not a retry loop", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Campaign() error %q does not name %q", err, s)
				}
			}
		})
	}
}
