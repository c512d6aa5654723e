// Package s3store is a store.Store on Amazon S3 and S3-compatible object
// stores (MinIO, Cloudflare R2, ...) using aws-sdk-go-v2.
//
// Writes use PutObject with If-None-Match: * (create) or If-Match (replace).
// The store must honour both: before its first write, a Store checks that
// it does, on a probe object next to the lockfile (the lockfile's key with
// ".s3lect-probe" appended), and refuses to write if it does not.
//
// IAM: s3:GetObject and s3:PutObject on the lockfile and its probe.
//
// Importing this package also lets s3lect.New build a Store by itself from
// ElectorConfig.Bucket and the standard AWS environment.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/store"
)

func init() { defaultstore.Register(FromEnvironment) }

// Store is a store.Store on one S3 bucket. It is safe for concurrent use.
type Store struct {
	client *s3.Client
	bucket string

	mu      sync.Mutex
	checked error // nil until the conditional-write check has an answer
	passed  bool
}

var _ store.Store = (*Store)(nil)

// New returns a Store on bucket. The client's own retries are turned off
// for the Store's calls: s3lect retries by its fixed policy, and an SDK
// retry of a conditional write would hide whether the first try landed.
func New(client *s3.Client, bucket string) *Store {
	return &Store{client: client, bucket: bucket}
}

// FromEnvironment builds a Store on bucket from the SDK's default
// configuration: the standard AWS environment variables, shared config
// files and instance roles, including AWS_ENDPOINT_URL_S3 for MinIO or R2.
// pathStyle addresses the bucket in the URL's path, as MinIO needs.
// s3lect.New uses it when ElectorConfig.Bucket is set.
func FromEnvironment(ctx context.Context, bucket string, pathStyle bool) (store.Store, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS configuration: %w", err)
	}
	// An HTTP client of the store's own, on a copy of the transport the SDK
	// configured (CA bundle included), so that CloseIdleConnections can
	// release it when the elector that owns the store closes.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	}
	cfg.HTTPClient = &http.Client{Transport: tr}
	return New(s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }), bucket), nil
}

// CloseIdleConnections closes the idle connections of the store's HTTP
// client, if that client can. s3lect.Elector.Close calls it on a store
// that New built from Bucket.
func (s *Store) CloseIdleConnections() {
	if c, ok := s.client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// noRetries turns the SDK's retries off for one call.
func noRetries(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// Get implements store.Store. It reads at most store.MaxObjectSize+1 bytes
// of the object.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}, noRetries)
	if err != nil {
		return nil, "", s.mapError("get", key, err, false)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, store.MaxObjectSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("s3store: get s3://%s/%s: read body: %w", s.bucket, key, err)
	}
	return data, aws.ToString(out.ETag), nil
}

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := s.check(ctx, key); err != nil {
		return "", err
	}
	return s.put(ctx, key, data, etag)
}

func (s *Store) put(ctx context.Context, key string, data []byte, etag string) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:      &s.bucket,
		Key:         &key,
		Body:        bytes.NewReader(data),
		ContentType: aws.String("application/json"),
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := s.client.PutObject(ctx, in, noRetries)
	if err != nil {
		return "", s.mapError("put", key, err, etag != "")
	}
	if aws.ToString(out.ETag) == "" {
		return "", store.Permanent(fmt.Errorf("s3store: put s3://%s/%s: the store returned no ETag; s3lect needs one for conditional writes", s.bucket, key))
	}
	return aws.ToString(out.ETag), nil
}

// ErrNoConditionalWrites is wrapped by the permanent error a Store returns
// when its bucket ignores If-None-Match or If-Match.
var ErrNoConditionalWrites = errors.New("s3store: the store ignores conditional writes (If-None-Match / If-Match); electing on it would be unsafe")

// check verifies, once per Store, that the bucket honours conditional
// writes: a second create of the probe object, and a replace with a wrong
// ETag, must both be refused. A transient failure is not remembered.
func (s *Store) check(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.passed || s.checked != nil {
		return s.checked
	}
	probe := key + ".s3lect-probe"
	body := []byte(`{"probe":"s3lect checks conditional writes here","at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`)
	if _, err := s.put(ctx, probe, body, ""); err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
		return s.remember(err)
	}
	_, err := s.put(ctx, probe, body, "")
	if err == nil {
		return s.remember(store.Permanent(fmt.Errorf("%w: a second If-None-Match create of s3://%s/%s succeeded", ErrNoConditionalWrites, s.bucket, probe)))
	}
	if !errors.Is(err, store.ErrPreconditionFailed) {
		return s.remember(err)
	}
	_, err = s.put(ctx, probe, body, `"00000000000000000000000000000000"`)
	if err == nil {
		return s.remember(store.Permanent(fmt.Errorf("%w: an If-Match put with a wrong ETag on s3://%s/%s succeeded", ErrNoConditionalWrites, s.bucket, probe)))
	}
	if !errors.Is(err, store.ErrPreconditionFailed) {
		return s.remember(err)
	}
	s.passed = true
	return nil
}

// remember keeps a permanent verdict; other errors are returned as they are.
func (s *Store) remember(err error) error {
	if store.IsPermanent(err) {
		s.checked = err
	}
	return err
}

// mapError turns an SDK error into the store contract's errors. It looks at
// error types and API error codes only, never at message text.
func (s *Store) mapError(op, key string, err error, ifMatch bool) error {
	where := fmt.Sprintf("s3store: %s s3://%s/%s", op, s.bucket, key)
	var (
		api   smithy.APIError
		opErr *smithy.OperationError
		resp  *smithyhttp.ResponseError
		send  *smithyhttp.RequestSendError
	)
	if !errors.As(err, &api) {
		if errors.As(err, &opErr) && !errors.As(err, &resp) && !errors.As(err, &send) &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			// The request was never sent: the client could not build or
			// sign it. That is configuration, not weather.
			return store.Permanent(fmt.Errorf("%s: the request could not be made; check the AWS credentials, region and endpoint: %w", where, err))
		}
		return fmt.Errorf("%s: %w", where, err) // network or context: worth retrying
	}
	code := api.ErrorCode()
	switch code {
	case "NoSuchKey", "NotFound":
		if op == "get" {
			return fmt.Errorf("%s: %w", where, store.ErrNotFound)
		}
		if ifMatch {
			return fmt.Errorf("%s: object absent: %w", where, store.ErrPreconditionFailed)
		}
	case "PreconditionFailed", "ConditionalRequestConflict":
		return fmt.Errorf("%s: %s: %w", where, code, store.ErrPreconditionFailed)
	}
	if fix, ok := permanent[code]; ok {
		return store.Permanent(fmt.Errorf("%s: %s: %s: %w", where, code, fix, err))
	}
	return fmt.Errorf("%s: %w", where, err)
}

// permanent lists the API error codes that retrying will not fix, with
// what to do about each.
var permanent = map[string]string{
	"NoSuchBucket":                 "the bucket does not exist; create it or fix the bucket name",
	"InvalidBucketName":            "the bucket name is not valid",
	"AccessDenied":                 "access denied; grant s3:GetObject and s3:PutObject on the lockfile and its .s3lect-probe",
	"AllAccessDisabled":            "all access to this object has been disabled",
	"InvalidAccessKeyId":           "the access key is not known to the store; check the credentials",
	"SignatureDoesNotMatch":        "the request signature was rejected; check the secret key",
	"AuthorizationHeaderMalformed": "the request was signed for the wrong region; set AWS_REGION to the bucket's region",
	"PermanentRedirect":            "the bucket is in another region or needs another endpoint; set AWS_REGION or AWS_ENDPOINT_URL_S3",
	"NotImplemented":               "the store does not implement a feature s3lect needs (conditional writes)",
}
