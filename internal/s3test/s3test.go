// Package s3test connects tests to the S3 server the environment names.
// bash .ci/run starts MinIO on loopback and sets:
//
//	S3LECT_TEST_S3_ENDPOINT  http://127.0.0.1:PORT
//	S3LECT_TEST_S3_BUCKET    a base bucket name
//	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
//
// Without them a test that needs S3 is skipped with a message saying how to
// start MinIO, except under CI=true, where it fails: CI must never pass by
// skipping.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lect/s3lect/internal/emulator"
)

// Endpoint returns the test S3 endpoint, or skips (fails under CI=true).
func Endpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv("S3LECT_TEST_S3_ENDPOINT")
	if ep == "" {
		Need(t, "no S3 server: run `bash .ci/run`, which installs and starts MinIO, or start MinIO as docs/testing.md shows and set S3LECT_TEST_S3_ENDPOINT=http://127.0.0.1:9000 S3LECT_TEST_S3_BUCKET=s3lect-test AWS_ACCESS_KEY_ID=s3lect-test AWS_SECRET_ACCESS_KEY=s3lect-test-secret AWS_REGION=us-east-1")
	}
	return ep
}

// Need ends a test that lacks a server it needs: it skips with how to get
// one, except under CI=true, where it fails. CI never passes by skipping.
func Need(t testing.TB, how string) {
	t.Helper()
	emulator.Need(t, how)
}

// NewClient returns a client for the test endpoint with a transport of its
// own, whose idle connections are closed when the test ends. wrap, if not
// nil, wraps that transport (to cut or slow the connection); accessKey and
// secret, if set, replace the environment's credentials.
func NewClient(t testing.TB, wrap func(http.RoundTripper) http.RoundTripper, accessKey, secret string) *s3.Client {
	t.Helper()
	return ClientFor(t, Endpoint(t), wrap, accessKey, secret)
}

// ClientFor is NewClient for any endpoint, such as a fake server's.
func ClientFor(t testing.TB, ep string, wrap func(http.RoundTripper) http.RoundTripper, accessKey, secret string) *s3.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(tr)
	}
	if accessKey == "" {
		accessKey, secret = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	if accessKey == "" {
		accessKey, secret = "fake", "fake" // a fake server checks no signature
	}
	// Built directly, not with config.LoadDefaultConfig, so that nothing
	// else in the environment (a CA bundle, a profile) changes the client.
	return s3.New(s3.Options{
		Region:       orDefault(os.Getenv("AWS_REGION"), "us-east-1"),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secret, ""),
		HTTPClient:   &http.Client{Transport: rt},
		BaseEndpoint: aws.String(ep),
		UsePathStyle: true,
	})
}

var (
	bucketOnce sync.Once
	bucketName string
	bucketErr  error
)

// Bucket returns a bucket of this test process's own, created on first use,
// so that runs against a long-lived server never see each other's objects.
func Bucket(t testing.TB) string {
	t.Helper()
	client := NewClient(t, nil, "", "")
	bucketOnce.Do(func() {
		var b [4]byte
		rand.Read(b[:])
		bucketName = orDefault(os.Getenv("S3LECT_TEST_S3_BUCKET"), "s3lect-test") + "-" + hex.EncodeToString(b[:])
		_, bucketErr = client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &bucketName})
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(bucketErr, &owned) {
			bucketErr = nil
		}
	})
	if bucketErr != nil {
		t.Fatalf("s3test: create bucket %s: %v", bucketName, bucketErr)
	}
	return bucketName
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// NoCredentials makes the AWS SDK's default credential chain come up
// empty for the rest of the test, quickly and without leaving loopback:
// no credential variables, no profile, shared config and credentials
// files that are empty, no container or web-identity role, and the EC2
// instance metadata endpoint on a 127.0.0.1 port nothing listens on (so
// no test ever waits on a real metadata service). It returns the
// variables it set, for tests that start processes.
func NoCredentials(t testing.TB) []string {
	t.Helper()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	env := []string{
		"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=",
		"AWS_PROFILE=", "AWS_DEFAULT_PROFILE=",
		"AWS_CONFIG_FILE=" + empty, "AWS_SHARED_CREDENTIALS_FILE=" + empty,
		"AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_ROLE_ARN=",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=",
		"AWS_EC2_METADATA_DISABLED=", "AWS_EC2_METADATA_SERVICE_ENDPOINT=" + closed,
		"AWS_REGION=us-east-1",
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Cleanup(func() { waitCredentialLookups(t) })
	return env
}

// waitCredentialLookups waits until the SDK's credential lookups have
// given up: the SDK runs them in goroutines of its own, detached from the
// caller's context, which go on retrying the metadata endpoint for a few
// seconds after the call that started them has failed.
func waitCredentialLookups(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("aws-sdk-go-v2/credentials/ec2rolecreds")) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the AWS SDK's credential lookups still run a minute after the test")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
