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
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"sync"
	"testing"

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
		Need(t, "no S3 server: run `bash .ci/run`, which installs and starts MinIO, or start MinIO yourself and set S3LECT_TEST_S3_ENDPOINT, S3LECT_TEST_S3_BUCKET and the AWS_* credentials")
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
