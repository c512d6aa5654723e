package s3store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// With no credentials anywhere, the first call fails for good, naming
// what to set, instead of being retried for ever.
func TestNoCredentialsIsPermanent(t *testing.T) {
	s3test.NoCredentials(t)
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatalf("LoadDefaultConfig() = %v", err)
	}
	// The endpoint is never reached: signing fails first.
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:1") })
	st := s3store.New(client, "bucket")
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, _, err := st.Get(t.Context(), "leader/x.json"); return err }},
		{"Put", func() error { _, err := st.PutIfMatch(t.Context(), "leader/x.json", []byte("{}"), ""); return err }},
	} {
		err := op.call()
		if !store.IsPermanent(err) || !errors.Is(err, s3store.ErrNoCredentials) {
			t.Errorf("%s() = %v; want a permanent error wrapping ErrNoCredentials", op.name, err)
			continue
		}
		for _, fix := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "s3://bucket/leader/x.json"} {
			if !strings.Contains(err.Error(), fix) {
				t.Errorf("%s() = %q; want it to name %s", op.name, err, fix)
			}
		}
	}
}

// ElectorConfig.Bucket with no credentials: New says so, naming the fix,
// within seconds.
func TestBucketWithoutCredentials(t *testing.T) {
	s3test.NoCredentials(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
	cfg := shortConfig(nil, "leader/x.json", "a")
	cfg.Store, cfg.Bucket = nil, "bucket"
	e, err := s3lect.New(cfg)
	if err == nil {
		e.Close()
	}
	if !errors.Is(err, s3store.ErrNoCredentials) || !store.IsPermanent(err) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("New(Bucket) = %v; want the permanent no-credentials error naming AWS_ACCESS_KEY_ID", err)
	}
}

// Campaign on a client built by hand with no credentials returns the
// permanent error, once a store call has time for the SDK's walk down its
// chain (the metadata endpoint is tried several times).
func TestCampaignWithoutCredentials(t *testing.T) {
	s3test.NoCredentials(t)
	awsCfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatalf("LoadDefaultConfig() = %v", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:1") })
	cfg := shortConfig(s3store.New(client, "bucket"), "leader/x.json", "a")
	cfg.FrequentInterval, cfg.InfrequentInterval, cfg.LeaderTimeout = 20*time.Second, 20*time.Second, time.Minute
	e, err := s3lect.New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a bound on a hang, never reached when it works
	defer cancel()
	_, err = e.Campaign(ctx)
	if !errors.Is(err, s3store.ErrNoCredentials) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("Campaign() = %v; want the permanent no-credentials error naming AWS_ACCESS_KEY_ID", err)
	}
}

// CheckCredentials: none found is permanent and names the fix; found is nil.
func TestCheckCredentials(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		s3test.NoCredentials(t)
		awsCfg, err := config.LoadDefaultConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		err = s3store.CheckCredentials(t.Context(), awsCfg)
		if !errors.Is(err, s3store.ErrNoCredentials) || !store.IsPermanent(err) || !strings.Contains(err.Error(), "AWS_PROFILE") {
			t.Errorf("CheckCredentials() = %v; want the permanent no-credentials error naming AWS_PROFILE", err)
		}
	})
	t.Run("from the environment", func(t *testing.T) {
		s3test.NoCredentials(t)
		t.Setenv("AWS_ACCESS_KEY_ID", "key")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
		awsCfg, err := config.LoadDefaultConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := s3store.CheckCredentials(t.Context(), awsCfg); err != nil {
			t.Errorf("CheckCredentials() = %v; want nil", err)
		}
	})
}

// An endpoint on localhost needs path-style addressing (bucket.localhost
// names no host): a Store gets it without being asked, from the
// environment and from a client built by hand.
func TestLocalhostEndpointUsesPathStyle(t *testing.T) {
	ep := s3test.Endpoint(t)
	bucket := s3test.Bucket(t)
	local := strings.Replace(ep, "127.0.0.1", "localhost", 1)
	if local == ep {
		t.Fatalf("test endpoint %s is not on 127.0.0.1", ep)
	}
	t.Run("FromEnvironment", func(t *testing.T) {
		t.Setenv("AWS_ENDPOINT_URL_S3", local)
		st, err := s3store.FromEnvironment(t.Context(), bucket, false)
		if err != nil {
			t.Fatalf("FromEnvironment() = %v", err)
		}
		defer st.CloseIdleConnections()
		if _, err := st.PutIfMatch(t.Context(), "localhost/env.json", []byte(`{"leaderID":"a"}`), ""); err != nil {
			t.Fatalf("PutIfMatch() = %v", err)
		}
	})
	t.Run("New", func(t *testing.T) {
		client := s3test.ClientFor(t, local, nil, "", "")
		client = s3.New(client.Options(), func(o *s3.Options) { o.UsePathStyle = false })
		st := s3store.New(client, bucket)
		if _, err := st.PutIfMatch(t.Context(), "localhost/new.json", []byte(`{"leaderID":"a"}`), ""); err != nil {
			t.Fatalf("PutIfMatch() = %v", err)
		}
		if _, _, err := st.Get(t.Context(), "localhost/new.json"); err != nil {
			t.Fatalf("Get() = %v", err)
		}
	})
}
