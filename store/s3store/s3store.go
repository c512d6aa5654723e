// Package s3store is a store.Store on Amazon S3 and S3-compatible object
// stores (MinIO, Cloudflare R2, ...) using aws-sdk-go-v2.
//
// Writes use PutObject with If-None-Match: * (create) or If-Match (replace).
// The store must honour both: before its first write, a Store checks that
// it does, on a probe object next to the lockfile (the lockfile's key with
// ".s3lect-probe" appended): a second create and a replace naming a wrong
// ETag must be refused, and a replace naming the right ETag must succeed.
// Some stores (Ceph RGW) refuse the ETag in If-Match in its quoted form
// and accept it bare; the Store then sends it bare for that bucket and logs
// this once. A store that passes neither form is refused.
//
// A conditional write answered 5xx may or may not have landed (Ceph RGW
// answers 500 to the losers of a race). The Store reads the object back:
// its own bytes there mean the write won; another writer's bytes, or a
// version other than the one it named, mean it lost
// (store.ErrPreconditionFailed); an unchanged object means nothing
// happened, and the write is tried again, a bounded number of times.
//
// IAM: s3:GetObject and s3:PutObject on the lockfile, its term object
// (the lockfile's key with ".term" appended, which s3lect writes on every
// takeover), its term claims (the lockfile's key with ".term." and 20
// digits appended, one created by every takeover) and the probe. The
// probe is named after the first key a Store writes; an elector's first
// write is a takeover's term claim, whose probe is the term object's, so
// for s3lect it is "<lockfile>.term.s3lect-probe". Without
// s3:ListBucket, AWS answers a read of a missing key with 403 AccessDenied
// instead of 404; the Store then reports the lockfile as absent, so that a
// fresh group creates it with If-None-Match. If that create finds the
// object present (412), the denial was real and the write fails with a
// permanent error naming s3:GetObject.
//
// List (store.Lister, which package pool uses to watch its workers'
// sessions with one request) sends ListObjectsV2 and needs s3:ListBucket
// on the bucket, which may be limited to the prefix with the
// s3:prefix condition key.
//
// Options add headers or SDK options to every request, for stores that
// need them (Tigris: WithHeader("X-Tigris-Consistent", "true")).
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
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3lect/s3lect/internal/condcheck"
	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/store"
)

func init() {
	defaultstore.Register(func(ctx context.Context, bucket string, pathStyle bool) (store.Store, error) {
		st, err := FromEnvironment(ctx, bucket, pathStyle)
		if err != nil {
			return nil, err // not a nil *Store in a non-nil interface
		}
		return st, nil
	})
}

// Store is a store.Store on one S3 bucket. It is safe for concurrent use.
type Store struct {
	client *s3.Client
	bucket string
	opts   []func(*s3.Options) // applied to every call
	log    *slog.Logger

	checkMu sync.Mutex // one conditional-write check at a time
	mu      sync.Mutex
	checked error     // the check's verdict that the bucket ignores conditional writes, or a denial until retryAt
	retryAt time.Time // a denial (a permanent error that is not a verdict) is checked again from then on
	denials int       // denials in a row, for the backoff
	passed  bool
	bare    bool            // send If-Match ETags without their quotes
	denied  map[string]bool // keys whose read was denied and taken as absent
	written map[string]bool // keys this Store has written: they exist

	listPage int32 // keys per ListObjectsV2 page; 0 is the store's default (1,000 on S3); tests set it small

	// identified is set once the SDK has found credentials for a call:
	// from then on a failure to refresh them is retried, as a passing
	// outage of the role's endpoint; before it, it is permanent.
	identified atomic.Bool
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithHeader adds an HTTP header to every request the Store sends, such as
// Tigris's X-Tigris-Consistent: true, which makes Tigris check conditional
// writes on the bucket's leader region. It is part of the signed request.
func WithHeader(name, value string) Option {
	return WithS3Options(func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(name, value))
	})
}

// WithS3Options applies SDK options to every call the Store makes, after
// its own (which turn the SDK's retries off). Use it for settings a store
// needs per request; settings for the whole client belong in the
// s3.Client given to New.
func WithS3Options(fns ...func(*s3.Options)) Option {
	return func(s *Store) { s.opts = append(s.opts, fns...) }
}

// WithLogger sets where the Store logs what it adapts to (once per Store),
// such as sending If-Match ETags bare. The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.log = l }
}

// New returns a Store on bucket. The client's own retries are turned off
// for the Store's calls: s3lect retries by its fixed policy, and an SDK
// retry of a conditional write would hide whether the first try landed.
//
// When the client's endpoint (BaseEndpoint, or AWS_ENDPOINT_URL_S3) is a
// host that cannot carry the bucket as a subdomain (localhost, an IP
// address, a one-label name such as a container's "minio"), the Store
// addresses the bucket in the path, as if UsePathStyle were set: the
// SDK's default, bucket.localhost, names no host.
//
// A client that finds no credentials at all (the SDK's default chain came
// up empty) gets an error wrapping ErrNoCredentials at its first call,
// permanent, naming the variables to set. Once a call has had
// credentials, a later failure to refresh them is retried like any outage.
func New(client *s3.Client, bucket string, opts ...Option) *Store {
	s := &Store{client: client, bucket: bucket, log: slog.Default(),
		denied: map[string]bool{}, written: map[string]bool{}}
	s.opts = []func(*s3.Options){noRetries, pathStyleForLocalHosts, s.watchIdentity}
	for _, o := range opts {
		o(s)
	}
	return s
}

// FromEnvironment builds a Store on bucket from the SDK's default
// configuration: the standard AWS environment variables, shared config
// files and instance roles, including AWS_ENDPOINT_URL_S3 for MinIO or R2.
// It looks the credentials up once (CheckCredentials), so that none at all
// is an error here, naming what to set.
// pathStyle addresses the bucket in the URL's path, as MinIO needs; an
// endpoint on localhost, an IP address or a one-label host name gets it
// anyway (see New). s3lect.New uses it when ElectorConfig.Bucket is set.
func FromEnvironment(ctx context.Context, bucket string, pathStyle bool) (*Store, error) {
	cfg, err := LoadConfig(ctx)
	if err != nil {
		return nil, err
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

// pathStyleForLocalHosts addresses the bucket in the path when the
// endpoint's host cannot carry it as a subdomain.
func pathStyleForLocalHosts(o *s3.Options) {
	if o.UsePathStyle || o.BaseEndpoint == nil {
		return
	}
	if u, err := url.Parse(*o.BaseEndpoint); err == nil && u.Host != "" && !bucketSubdomains(u.Hostname()) {
		o.UsePathStyle = true
	}
}

// bucketSubdomains reports whether host is a DNS name under which
// bucket.host can exist: not an IP address, not localhost, and of more
// than one label.
func bucketSubdomains(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return net.ParseIP(h) == nil && h != "localhost" && !strings.HasSuffix(h, ".localhost") && strings.Contains(h, ".")
}

// awsHost reports whether host is one of AWS's own names (amazonaws.com,
// and amazonaws.com.cn in China), whose S3 endpoints carry buckets as
// subdomains.
func awsHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn")
}

// ErrNoCredentials is wrapped by the permanent error of a Store whose
// client found no AWS credentials for its first call.
var ErrNoCredentials = errors.New("no AWS credentials found")

// credentialsFix says where the SDK's default chain looks for credentials.
const credentialsFix = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN for temporary keys), " +
	"or AWS_PROFILE naming a profile in ~/.aws/config or ~/.aws/credentials (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE), " +
	"or run where a role is provided (EC2 instance profile, ECS task role, EKS IRSA or Pod Identity)"

// credentialsLookup bounds CheckCredentials' lookup: the SDK's chain may
// try the EC2 metadata endpoint several times before it gives up.
const credentialsLookup = 30 * time.Second

// CheckCredentials looks up cfg's credentials once, with a bound of its
// own (30 s) rather than the election's per-call timeout, which can be
// shorter than the SDK's walk down its chain (the EC2 metadata endpoint is
// tried several times). When none is found it returns a permanent error
// wrapping ErrNoCredentials that names the variables to set; when ctx ends
// first, ctx's error.
func CheckCredentials(ctx context.Context, cfg aws.Config) error {
	if cfg.Credentials == nil {
		return store.Permanent(fmt.Errorf("s3store: %w: the configuration has no credentials provider; %s", ErrNoCredentials, credentialsFix))
	}
	lctx, cancel := context.WithTimeout(ctx, credentialsLookup)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(lctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return store.Permanent(fmt.Errorf("s3store: %w: %s: %w", ErrNoCredentials, credentialsFix, err))
	}
	return nil
}

// credentialsError is a call that failed before it had credentials.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// identitySeen is set, in a call's stack values, once the SDK's identity
// step has found credentials.
type identitySeen struct{ ok bool }

type identityKey struct{}

// watchIdentity wraps the SDK's GetIdentity step: a call that fails
// before that step succeeded failed for want of credentials, and its
// error is marked as such. It looks at where in the stack the call
// failed, never at the error's text.
func (s *Store) watchIdentity(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		if _, ok := stack.Finalize.Get("GetIdentity"); !ok {
			return nil // another SDK layout: errors keep their plain mapping
		}
		around := middleware.FinalizeMiddlewareFunc("s3lect.CredentialsAround", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			seen := &identitySeen{}
			out, md, err := next.HandleFinalize(middleware.WithStackValue(ctx, identityKey{}, seen), in)
			if err != nil && !seen.ok && ctx.Err() == nil {
				err = &credentialsError{err: err}
			}
			return out, md, err
		})
		after := middleware.FinalizeMiddlewareFunc("s3lect.CredentialsFound", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if seen, ok := middleware.GetStackValue(ctx, identityKey{}).(*identitySeen); ok {
				seen.ok = true
			}
			s.identified.Store(true)
			return next.HandleFinalize(ctx, in)
		})
		if err := stack.Finalize.Insert(around, "GetIdentity", middleware.Before); err != nil {
			return err
		}
		return stack.Finalize.Insert(after, "GetIdentity", middleware.After)
	})
}

// Get implements store.Store. It reads at most store.MaxObjectSize+1 bytes
// of the object.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	return s.get(ctx, key, nil)
}

// get is Get; seen, if set, is shown the response before its body is read.
func (s *Store) get(ctx context.Context, key string, seen func(*s3.GetObjectOutput)) ([]byte, string, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}, s.opts...)
	if err != nil {
		err = s.mapError("get", key, err, false)
		if isAccessDenied(err) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.written[key] {
				// Without s3:ListBucket, AWS answers 403 for a missing
				// key. Take it as absent: the caller's next step is an
				// If-None-Match create, which tells the two apart.
				s.denied[key] = true
				return nil, "", fmt.Errorf("s3store: get s3://%s/%s: AccessDenied, taken as absent (without s3:ListBucket a missing key reads as denied): %w", s.bucket, key, store.ErrNotFound)
			}
			return nil, "", store.Permanent(fmt.Errorf("s3store: get s3://%s/%s: AccessDenied although the object exists: grant s3:GetObject on it: %w", s.bucket, key, err))
		}
		return nil, "", err
	}
	defer out.Body.Close()
	if seen != nil {
		seen(out)
	}
	data, err := io.ReadAll(io.LimitReader(out.Body, store.MaxObjectSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("s3store: get s3://%s/%s: read body: %w", s.bucket, key, err)
	}
	return data, aws.ToString(out.ETag), nil
}

// GetSighting implements store.Sighter: Get, with the object's version ID
// as the token where the bucket is versioned (every write, a restore of an
// old version included, makes a new version), and its Last-Modified time
// otherwise. Last-Modified counts whole seconds on S3 and MinIO: a write
// of exact earlier bytes within the same second as the write a reader
// last saw, on an unversioned bucket, keeps the token, and so does a
// store that keeps Last-Modified on a copy (docs/stores.md states the
// limit; the conformance suite finds such a store).
func (s *Store) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	var token string
	data, etag, err := s.get(ctx, key, func(out *s3.GetObjectOutput) {
		switch {
		case aws.ToString(out.VersionId) != "" && aws.ToString(out.VersionId) != "null":
			token = "v:" + aws.ToString(out.VersionId)
		case out.LastModified != nil:
			token = "t:" + out.LastModified.UTC().Format(time.RFC3339Nano)
		}
	})
	return data, etag, token, err
}

// List implements store.Lister with ListObjectsV2 on prefix, following
// its continuation tokens through every page (S3 returns up to 1,000 keys
// a page), so that a listing costs one LIST request per 1,000 keys; ctx
// bounds the whole listing, every page (a caller's per-call timeout
// covers them all), and the SDK's retries are off as for Get. Each
// entry's ETag is the listing's, in the form Get returns it (quoted on
// S3). It needs s3:ListBucket on the bucket, for the prefix.
//
// The Store's own probe objects (keys ending in ".s3lect-probe", written by
// the check of conditional writes) are left out: they sit next to the
// first key a Store writes, under the same prefix.
//
// S3 and most compatible stores list keys in order; directory buckets (S3
// Express One Zone) do not, so List sorts what it gathered.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix}
	if s.listPage > 0 {
		in.MaxKeys = aws.Int32(s.listPage)
	}
	var entries []store.Entry
	for {
		out, err := s.client.ListObjectsV2(ctx, in, s.opts...)
		if err != nil {
			return nil, s.mapError("list", prefix, err, false)
		}
		for _, o := range out.Contents {
			if key := aws.ToString(o.Key); !strings.HasSuffix(key, condcheck.ProbeSuffix) {
				entries = append(entries, store.Entry{Key: key, ETag: aws.ToString(o.ETag)})
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		if aws.ToString(out.NextContinuationToken) == "" {
			return nil, fmt.Errorf("s3store: list s3://%s/%s: the store answered a truncated page without a continuation token after %d keys", s.bucket, prefix, len(entries))
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	slices.SortFunc(entries, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	return entries, nil
}

// putAttempts bounds how often a write answered 5xx, whose read-back shows
// that nothing changed, is sent again.
const putAttempts = 3

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := s.check(ctx, key); err != nil {
		return "", err
	}
	tag, err := s.write(ctx, key, data, etag)
	if err == nil {
		s.mu.Lock()
		s.written[key] = true
		s.mu.Unlock()
		return tag, nil
	}
	if errors.Is(err, store.ErrPreconditionFailed) && etag == "" {
		s.mu.Lock()
		denied := s.denied[key]
		s.mu.Unlock()
		if denied {
			// The 412 proves the object exists. Read it again: another
			// member may have created it after our denied read, and then
			// the read succeeds; a denial now is real.
			s.mu.Lock()
			s.written[key], s.denied[key] = true, false
			s.mu.Unlock()
			if _, _, gerr := s.Get(ctx, key); gerr != nil && store.IsPermanent(gerr) {
				return "", store.Permanent(fmt.Errorf("s3store: s3://%s/%s exists (an If-None-Match create was refused) but reading it was denied: grant s3:GetObject on it: %w", s.bucket, key, gerr))
			}
		}
	}
	return "", err
}

// write is put, with 5xx answers settled by reading the object back.
func (s *Store) write(ctx context.Context, key string, data []byte, etag string) (string, error) {
	var err error
	for attempt := range putAttempts {
		var tag string
		tag, err = s.put(ctx, key, data, etag)
		if attempt > 0 && errors.Is(err, store.ErrPreconditionFailed) {
			// A write answered 5xx can land after its read-back showed
			// nothing: this retry is then refused by our own write.
			if got, cur, gerr := s.Get(ctx, key); gerr == nil && bytes.Equal(got, data) {
				return cur, nil
			}
		}
		if err == nil || !serverError(err) {
			return tag, err
		}
		// 5xx: the write may have landed. Read back to learn.
		s.log.Debug("s3store: a conditional write was answered 5xx; reading back to learn whether it landed",
			"settled", "5xx answers to writes settled by reading back", "key", key, "err", err)
		got, cur, gerr := s.Get(ctx, key)
		switch {
		case gerr == nil && bytes.Equal(got, data):
			return cur, nil // it landed
		case gerr == nil && strings.Trim(cur, `"`) != strings.Trim(etag, `"`):
			return "", fmt.Errorf("s3store: put s3://%s/%s: answered 5xx, and another write holds the object: %w (the 5xx was: %v)", s.bucket, key, store.ErrPreconditionFailed, err)
		case errors.Is(gerr, store.ErrNotFound) && etag != "":
			return "", fmt.Errorf("s3store: put s3://%s/%s: answered 5xx, and the object is absent: %w (the 5xx was: %v)", s.bucket, key, store.ErrPreconditionFailed, err)
		case gerr == nil || errors.Is(gerr, store.ErrNotFound):
			continue // unchanged: nothing happened, send it again
		default:
			return "", err // cannot tell: the caller retries by its policy
		}
	}
	return "", err
}

// serverError reports whether err is an HTTP 5xx answer.
func serverError(err error) bool {
	var resp *smithyhttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 && !store.IsPermanent(err)
}

func isAccessDenied(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "AccessDenied"
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
		s.mu.Lock()
		bare := s.bare
		s.mu.Unlock()
		if bare {
			etag = strings.Trim(etag, `"`)
		}
		in.IfMatch = aws.String(etag)
	}
	out, err := s.client.PutObject(ctx, in, s.opts...)
	if err != nil {
		return "", s.mapError("put", key, err, etag != "")
	}
	if aws.ToString(out.ETag) == "" {
		return "", store.Permanent(fmt.Errorf("s3store: put s3://%s/%s: the store returned no ETag; s3lect needs one for conditional writes", s.bucket, key))
	}
	return aws.ToString(out.ETag), nil
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
	var creds *credentialsError
	if errors.As(err, &creds) {
		if !s.identified.Load() {
			return store.Permanent(fmt.Errorf("%s: %w: %s: %w", where, ErrNoCredentials, credentialsFix, creds.err))
		}
		return fmt.Errorf("%s: refresh the AWS credentials: %w", where, creds.err) // they worked before: an outage
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound && awsHost(dns.Name) {
		// AWS's own endpoints serve every bucket as a subdomain: a name
		// under them that does not resolve says this machine cannot
		// resolve AWS's names (no DNS, no network), or that the store
		// meant is not AWS at all. Retried: DNS can come back.
		return fmt.Errorf("%s: host %q not found: this machine cannot resolve AWS's S3 host names (no DNS server or no network route to one?); "+
			"if the store is not AWS S3, set its endpoint (AWS_ENDPOINT_URL_S3, or the command's -endpoint): %w", where, dns.Name, err)
	}
	if errors.As(err, &dns) && dns.IsNotFound && strings.HasPrefix(dns.Name, s.bucket+".") {
		// Virtual-host addressing on an endpoint without a wildcard DNS
		// name for its buckets: no retry will make the name resolve.
		return store.Permanent(fmt.Errorf("%s: host %q not found: the endpoint does not serve buckets as subdomains; use path-style addressing (s3.Options.UsePathStyle, ElectorConfig.S3PathStyle, the command's -path-style): %w", where, dns.Name, err))
	}
	if !errors.As(err, &api) {
		// The answer's status line arrived but its body could not be read
		// (Ceph RGW may close the connection while a 412's body is still
		// being read): the status alone answers the question.
		if errors.As(err, &resp) {
			switch code := resp.HTTPStatusCode(); {
			case code == http.StatusPreconditionFailed:
				return fmt.Errorf("%s: status 412: %w", where, store.ErrPreconditionFailed)
			case code == http.StatusNotFound && op == "get":
				return fmt.Errorf("%s: status 404: %w", where, store.ErrNotFound)
			}
		}
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
		if code == "AccessDenied" && op == "list" {
			fix = "access denied; grant s3:ListBucket on the bucket, for this prefix"
		}
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
	"NotImplemented":               "the store does not implement a feature s3lect needs (conditional writes); use a store that supports If-None-Match and If-Match on PutObject",
	"XAdminUserNotFound":           "the access key is not known to the store (versitygw); check the credentials",
	"InvalidObjectName":            "the store refuses this object key; choose a LockfilePath of plain characters",
	"XMinioInvalidObjectName":      "the store refuses this object key; choose a LockfilePath of plain characters",
	"KeyTooLongError":              "the object key is too long; choose a shorter LockfilePath",
}
