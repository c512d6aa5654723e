// Package gcsstore is a store.Store on a Google Cloud Storage bucket, using
// the official client, cloud.google.com/go/storage, over GCS's JSON API.
//
// GCS gives every write of an object a new generation number, and a write
// can be made conditional on it: ifGenerationMatch=0 creates the object
// only if it is absent, and ifGenerationMatch=G replaces it only while its
// generation is G. The generation, as a decimal string, is the Store's
// ETag. Generations are never reused for an object's name, so an ETag
// never comes back for other bytes.
//
// Before its first write a Store checks that the bucket honours these
// conditions, on a probe object next to the lockfile (the lockfile's name
// with ".s3lect-probe" appended).
//
// The client's own retries are off for every call the Store makes: s3lect
// retries by its own fixed policy, and a retry inside the client of a
// conditional write would hide whether the first try landed.
//
// # Credentials and permissions
//
// FromEnvironment uses Application Default Credentials: the
// GOOGLE_APPLICATION_CREDENTIALS file, `gcloud auth application-default
// login`, or the metadata server on Google Cloud (GKE workload identity,
// Compute Engine, Cloud Run). With STORAGE_EMULATOR_HOST set it talks to
// that emulator instead, without credentials.
//
// The principal needs storage.objects.get and storage.objects.create on
// the lockfile and its probe, and storage.objects.delete, which GCS
// requires for overwriting an object: roles/storage.objectUser on the
// bucket grants all three. List (store.Lister, which package pool uses to
// watch its workers' sessions) needs storage.objects.list, which that role
// grants too.
package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"cloud.google.com/go/compute/metadata"
	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/s3lect/s3lect/internal/condcheck"
	"github.com/s3lect/s3lect/store"
)

// Store is a store.Store on one GCS bucket. It is safe for concurrent use.
type Store struct {
	bucket *storage.BucketHandle
	name   string
	check  condcheck.Check
	idle   func() // closes the idle connections of a transport the Store built

	// bucketSeen is set once the bucket is known to exist: a call on it
	// succeeded, or a listing found it. Until then a read answered "no
	// such object" lists the bucket once to tell a missing bucket apart,
	// since the client reports both as ErrObjectNotExist.
	bucketSeen atomic.Bool

	listPage int // objects per page of a listing; 0 is GCS's default (1,000); tests set it small
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// errNoPreconditions is the permanent error a Store returns, wrapping
// store.ErrNoConditionalWrites, when its bucket does not honour generation
// preconditions.
var errNoPreconditions = fmt.Errorf("gcsstore: the bucket ignores generation preconditions (ifGenerationMatch): %w", store.ErrNoConditionalWrites)

// New returns a Store on the bucket named bucket. The client may be shared
// with other code: the Store turns retries off for its own calls only.
func New(client *storage.Client, bucket string) *Store {
	s := &Store{bucket: client.Bucket(bucket), name: bucket, idle: func() {}}
	s.check = condcheck.Check{Where: s.where, WrongETag: wrongGeneration, Unsafe: errNoPreconditions}
	return s
}

// wrongGeneration is a generation no object carries: real generations are
// timestamps in microseconds.
const wrongGeneration = "1"

// FromEnvironment returns a Store on bucket with a client built from the
// environment: Application Default Credentials, or, when
// STORAGE_EMULATOR_HOST is set (host:port or a URL), that emulator without
// credentials. ctx bounds the search for credentials only; the Store
// outlives it. The Store owns the client's HTTP transport:
// CloseIdleConnections releases it.
func FromEnvironment(ctx context.Context, bucket string) (*Store, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	var opts []option.ClientOption
	if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
		if !strings.Contains(host, "://") {
			host = "http://" + host
		}
		opts = append(opts, option.WithoutAuthentication(), option.WithEndpoint(strings.TrimSuffix(host, "/")+"/storage/v1/"),
			option.WithHTTPClient(&http.Client{Transport: base}))
	} else {
		// The credentials keep the context they are found with, for every
		// token refresh: it must outlive the caller's opening deadline.
		rt, err := htransport.NewTransport(context.WithoutCancel(ctx), base, option.WithScopes(storage.ScopeReadWrite))
		if err != nil {
			return nil, store.Permanent(fmt.Errorf("gcsstore: no Google Cloud credentials (Application Default Credentials): set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, or run on Google Cloud with a service account: %w", err))
		}
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))
	}
	client, err := storage.NewClient(context.WithoutCancel(ctx), opts...)
	if err != nil {
		return nil, fmt.Errorf("gcsstore: create the storage client: %w", err)
	}
	s := New(client, bucket)
	s.idle = base.CloseIdleConnections
	return s, nil
}

// CloseIdleConnections closes the idle connections of the transport that
// FromEnvironment built; on a Store from New it does nothing.
func (s *Store) CloseIdleConnections() { s.idle() }

func (s *Store) where(key string) string { return "gs://" + s.name + "/" + key }

// object is the handle for key with the client's retries off.
func (s *Store) object(key string) *storage.ObjectHandle {
	return s.bucket.Object(key).Retryer(storage.WithPolicy(storage.RetryNever))
}

// Get implements store.Store. It reads at most store.MaxObjectSize+1 bytes
// of the object.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	r, err := s.object(key).NewReader(ctx)
	if err != nil {
		err = s.mapError("get", key, err, false)
		if errors.Is(err, store.ErrNotFound) && !s.bucketSeen.Load() {
			if berr := s.bucketExists(ctx, key); berr != nil {
				return nil, "", berr
			}
		}
		return nil, "", err
	}
	defer r.Close()
	s.bucketSeen.Store(true)
	data, err := io.ReadAll(io.LimitReader(r, store.MaxObjectSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("gcsstore: get %s: read body: %w", s.where(key), err)
	}
	if r.Attrs.Generation <= 0 {
		return nil, "", store.Permanent(fmt.Errorf("gcsstore: get %s: the store returned no generation (X-Goog-Generation); s3lect needs one for conditional writes", s.where(key)))
	}
	return data, strconv.FormatInt(r.Attrs.Generation, 10), nil
}

// PutIfMatch implements store.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := s.check.Before(ctx, ops{s}, key); err != nil {
		return "", err
	}
	return s.put(ctx, key, data, etag)
}

// ops are the Store's calls without the check, for the check itself.
type ops struct{ s *Store }

func (o ops) Get(ctx context.Context, key string) ([]byte, string, error) { return o.s.Get(ctx, key) }
func (o ops) Put(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return o.s.put(ctx, key, data, etag)
}

func (s *Store) put(ctx context.Context, key string, data []byte, etag string) (string, error) {
	cond := storage.Conditions{DoesNotExist: true}
	if etag != "" {
		gen, err := strconv.ParseInt(etag, 10, 64)
		if err != nil || gen <= 0 {
			// Not a generation: no object has it.
			return "", fmt.Errorf("gcsstore: put %s: ETag %q is not a GCS generation: %w", s.where(key), etag, store.ErrPreconditionFailed)
		}
		cond = storage.Conditions{GenerationMatch: gen}
	}
	w := s.object(key).If(cond).NewWriter(ctx)
	w.ChunkSize = 0 // one request: no resumable upload session
	w.ContentType = "application/json"
	// Never served from a cache, even if the bucket is public: a stale
	// read would refuse renewals and stall takeovers.
	w.CacheControl = "no-store"
	if _, err := w.Write(data); err != nil {
		w.Close()
		return "", s.mapError("put", key, err, etag != "")
	}
	if err := w.Close(); err != nil {
		return "", s.mapError("put", key, err, etag != "")
	}
	s.bucketSeen.Store(true)
	attrs := w.Attrs()
	if attrs == nil || attrs.Generation == 0 {
		return "", store.Permanent(fmt.Errorf("gcsstore: put %s: the store returned no generation; s3lect needs one for conditional writes", s.where(key)))
	}
	return strconv.FormatInt(attrs.Generation, 10), nil
}

// List implements store.Lister with GCS's objects.list on prefix (live
// objects only, asking for their names and generations), following its
// page tokens: one request per 1,000 objects, ctx bounding them all, the
// client's retries off as for Get. Each entry's ETag is the
// object's generation, as Get returns it. It needs storage.objects.list
// on the bucket (roles/storage.objectUser has it). The Store's own probe
// objects (names ending in ".s3lect-probe") are left out.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Generation"}); err != nil {
		return nil, fmt.Errorf("gcsstore: list %s: %w", s.where(prefix), err)
	}
	it := s.bucket.Retryer(storage.WithPolicy(storage.RetryNever)).Objects(ctx, q)
	it.PageInfo().MaxSize = s.listPage
	var entries []store.Entry
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, s.mapError("list", prefix, err, false)
		}
		if strings.HasSuffix(attrs.Name, condcheck.ProbeSuffix) {
			continue
		}
		if attrs.Generation <= 0 {
			return nil, store.Permanent(fmt.Errorf("gcsstore: list %s: the store listed %s without a generation; s3lect needs one for conditional writes", s.where(prefix), attrs.Name))
		}
		entries = append(entries, store.Entry{Key: attrs.Name, ETag: strconv.FormatInt(attrs.Generation, 10)})
	}
	s.bucketSeen.Store(true)
	return entries, nil
}

// bucketExists tells a missing bucket from a missing object, after a
// read of key was answered "not found": it lists the bucket at key's
// prefix, which needs only storage.objects.list (roles/storage.objectUser
// and objectViewer have it; storage.buckets.get, which the bucket's
// attributes need, they do not). A missing bucket is a permanent error
// naming the fix; a listing that fails otherwise (a role without list, an
// outage) says nothing, and the read stays "not found".
func (s *Store) bucketExists(ctx context.Context, key string) error {
	it := s.bucket.Retryer(storage.WithPolicy(storage.RetryNever)).Objects(ctx, &storage.Query{Prefix: key})
	it.PageInfo().MaxSize = 1
	_, err := it.Next()
	switch {
	case err == nil || errors.Is(err, iterator.Done):
		s.bucketSeen.Store(true)
		return nil
	case errors.Is(err, storage.ErrBucketNotExist):
		return store.Permanent(fmt.Errorf("gcsstore: get %s: %s: %w", s.where(key), fixMissingBucket(s.name), err))
	}
	var api *googleapi.Error
	if errors.As(err, &api) && api.Code == http.StatusNotFound {
		return store.Permanent(fmt.Errorf("gcsstore: get %s: %s: %w", s.where(key), fixMissingBucket(s.name), err))
	}
	return nil
}

// mapError turns a client error into the store contract's errors. It looks
// at error values, types and HTTP status codes, never at message text.
func (s *Store) mapError(op, key string, err error, ifMatch bool) error {
	where := fmt.Sprintf("gcsstore: %s %s", op, s.where(key))
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", where, err)
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return store.Permanent(fmt.Errorf("%s: %s: %w", where, fixMissingBucket(s.name), err))
	}
	if errors.Is(err, storage.ErrObjectNotExist) {
		if op == "get" {
			return fmt.Errorf("%s: %w", where, store.ErrNotFound)
		}
		return fmt.Errorf("%s: object absent: %w", where, store.ErrPreconditionFailed)
	}
	var (
		tokenErr *oauth2.RetrieveError
		mdErr    *metadata.Error
	)
	switch {
	case errors.As(err, &tokenErr) && tokenErr.Response != nil && refused(tokenErr.Response.StatusCode):
		return store.Permanent(fmt.Errorf("%s: the credentials could not get an access token; check Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login): %w", where, err))
	case errors.As(err, &mdErr) && refused(mdErr.Code):
		return store.Permanent(fmt.Errorf("%s: the metadata server refused a token; check the service account bound to this VM, or the Kubernetes service account's workload identity binding: %w", where, err))
	}
	var api *googleapi.Error
	if !errors.As(err, &api) {
		return fmt.Errorf("%s: %w", where, err) // network: worth retrying
	}
	switch api.Code {
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w", where, store.ErrPreconditionFailed)
	case http.StatusNotFound:
		switch {
		case op == "get":
			return fmt.Errorf("%s: %w", where, store.ErrNotFound)
		case ifMatch:
			// The object, or its bucket, is absent. The caller reads next
			// and then creates, which tells a missing bucket apart.
			return fmt.Errorf("%s: object absent: %w", where, store.ErrPreconditionFailed)
		default:
			// A create can only miss the bucket.
			return store.Permanent(fmt.Errorf("%s: %s: %w", where, fixMissingBucket(s.name), err))
		}
	case http.StatusUnauthorized:
		return store.Permanent(fmt.Errorf("%s: the credentials were rejected; check Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login): %w", where, err))
	case http.StatusForbidden:
		if op == "list" {
			return store.Permanent(fmt.Errorf("%s: access denied; grant storage.objects.list on the bucket (roles/storage.objectUser): %w", where, err))
		}
		return store.Permanent(fmt.Errorf("%s: access denied; grant storage.objects.get, storage.objects.create and storage.objects.delete on the bucket (roles/storage.objectUser): %w", where, err))
	case http.StatusBadRequest:
		return store.Permanent(fmt.Errorf("%s: the request was refused as invalid; check the bucket name and the LockfilePath: %w", where, err))
	}
	return fmt.Errorf("%s: %w", where, err) // 429, 5xx: worth retrying
}

// refused reports whether an HTTP status refuses a request for good: a
// 4xx other than 408 (timeout) and 429 (slow down).
func refused(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

func fixMissingBucket(bucket string) string {
	return fmt.Sprintf("the bucket does not exist; create it (gcloud storage buckets create gs://%s) or fix the bucket name", bucket)
}
