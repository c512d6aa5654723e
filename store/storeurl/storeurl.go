// Package storeurl opens the store that holds a lockfile from one URL, for
// tools that take the lockfile as a flag or a setting:
//
//	s3://bucket/path/to/lock.json          Amazon S3 or an S3-compatible store
//	gs://bucket/path/to/lock.json          Google Cloud Storage (build tag gcs)
//	azblob://container/path/to/lock.json   Azure Blob Storage
//	nats://host:4222/bucket/path/lock.json a NATS JetStream key-value bucket
//
// Each store takes its credentials from its cloud's standard chain: the
// AWS SDK's default configuration (environment, shared files, instance
// roles; AWS_ENDPOINT_URL_S3 for MinIO and other S3-compatible stores),
// Google's Application Default Credentials (STORAGE_EMULATOR_HOST for an
// emulator), and for Azure AZURE_STORAGE_CONNECTION_STRING or
// AZURE_STORAGE_ACCOUNT with DefaultAzureCredential. A NATS URL may carry
// a user and password.
//
// The package is a module of its own because it links every backend, and
// with them the clouds' SDKs; a program that needs one store imports that
// backend's package instead.
//
// Google Cloud Storage is built in only with the build tag gcs (or cloud):
// Google's client is about 45 MB of the 64 MB a program linking every
// backend weighs, which most users of S3 would carry for nothing. Without
// the tag a gs:// URL is refused with an error saying how to build it in.
// The tag noazure leaves Azure out too (about 3 MB).
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/natskv"
	"github.com/s3lect/s3lect/store/s3store"
)

// Schemes lists the URL forms Open accepts, for usage messages.
const Schemes = "s3://bucket/key, gs://bucket/key, azblob://container/key or nats://host:port/bucket/key"

// ErrBadURL is wrapped by Open's error when the URL itself is wrong: the
// message says what is missing and the form to write.
var ErrBadURL = errors.New("storeurl: bad store URL")

// Lockfile is an opened store and the lockfile's key in it.
type Lockfile struct {
	Store store.Store
	// Key is the lockfile's path inside the store: ElectorConfig.LockfilePath.
	Key string
	// URL names the lockfile in messages, without credentials.
	URL string
	// Close releases the store's connections. Call it after the electors
	// on the store are closed.
	Close func()
}

// Options adjust how Open reaches a store.
type Options struct {
	// S3Endpoint replaces the S3 endpoint (default: AWS_ENDPOINT_URL_S3,
	// or AWS), such as http://127.0.0.1:9000 for MinIO.
	S3Endpoint string
	// S3PathStyle addresses S3 buckets in the URL's path, as MinIO and
	// most self-hosted stores need.
	S3PathStyle bool
	// Retrying, if not nil, is called with each failure to reach a NATS
	// server, and Open keeps trying (every two seconds) until ctx ends.
	// With Retrying nil, Open returns the first failure.
	Retrying func(err error)
}

// Open opens the store that rawURL names. Errors in the URL wrap
// ErrBadURL; a store that refuses for good (a missing bucket, no
// credentials) gives an error that store.IsPermanent reports.
func Open(ctx context.Context, rawURL string, o Options) (*Lockfile, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: %q is not a URL; write %s", ErrBadURL, rawURL, Schemes)
	}
	if o.S3Endpoint != "" || o.S3PathStyle {
		if u.Scheme != "s3" {
			return nil, fmt.Errorf("%w: an S3 endpoint and path-style addressing are for s3:// URLs, not %s://", ErrBadURL, u.Scheme)
		}
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(rawURL, "?") || strings.HasSuffix(rawURL, "#") {
		// A ? or # in a key would silently cut it short, and two groups
		// could share one lockfile.
		return nil, fmt.Errorf("%w: %q has a query or fragment (?, #); write the key without them, or percent-encode them (%%3F, %%23)", ErrBadURL, rawURL)
	}
	container, key := u.Host, strings.TrimPrefix(u.Path, "/")
	if strings.HasSuffix(key, "/") {
		// S3, GCS and Azure would take it as an object named like a
		// folder, which no tool shows as a file; it is always a slip.
		return nil, fmt.Errorf("%w: %q names a folder (the key ends in /); name the lockfile itself, e.g. %s%s", ErrBadURL, rawURL, strings.TrimSuffix(rawURL, "/")+"/", "lock.json")
	}
	switch u.Scheme {
	case "s3", "gs", "azblob":
		if container == "" || key == "" || u.User != nil || u.Port() != "" {
			return nil, fmt.Errorf("%w: %q: want %s://%s/path/to/lock.json", ErrBadURL, rawURL, u.Scheme, orName(u.Hostname(), u.Scheme))
		}
	case "nats":
		b, k, _ := strings.Cut(key, "/")
		if u.Host == "" || b == "" || k == "" {
			return nil, fmt.Errorf("%w: %q: want nats://host:port/bucket/path/to/lock.json", ErrBadURL, rawURL)
		}
		return openNATS(ctx, u, b, k, o.Retrying)
	default:
		return nil, fmt.Errorf("%w: %q: the %s:// scheme is not supported; write %s", ErrBadURL, rawURL, u.Scheme, Schemes)
	}
	where := u.Scheme + "://" + container + "/" + key
	switch u.Scheme {
	case "s3":
		st, closer, err := openS3(ctx, container, o)
		if err != nil {
			return nil, err
		}
		return &Lockfile{Store: st, Key: key, URL: where, Close: closer}, nil
	case "gs":
		return openGCS(ctx, container, key, where)
	default:
		return openAzure(ctx, container, key, where)
	}
}

func orName(container, scheme string) string {
	switch {
	case container != "":
		return container
	case scheme == "azblob":
		return "container"
	}
	return "bucket"
}

// openS3 builds an S3 store from the AWS SDK's default configuration.
func openS3(ctx context.Context, bucket string, o Options) (store.Store, func(), error) {
	if o.S3Endpoint != "" {
		u, err := url.Parse(o.S3Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, fmt.Errorf("%w: S3 endpoint %q is not an http:// or https:// URL, e.g. http://127.0.0.1:9000", ErrBadURL, o.S3Endpoint)
		}
	}
	cfg, err := s3store.LoadConfig(ctx)
	switch {
	case err != nil && !store.IsPermanent(err) && ctx.Err() == nil:
		return nil, nil, store.Permanent(fmt.Errorf("load the AWS configuration (environment and ~/.aws): %w", err))
	case err != nil:
		return nil, nil, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // MinIO and most S3-compatible stores accept any region
	}
	// An HTTP client of our own, on a copy of the transport the SDK built
	// (CA bundle included), so that its idle connections can be closed.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	}
	cfg.HTTPClient = &http.Client{Transport: tr}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = o.S3PathStyle
		if o.S3Endpoint != "" {
			so.BaseEndpoint = aws.String(o.S3Endpoint)
		}
	})
	return s3store.New(client, bucket), tr.CloseIdleConnections, nil
}

// openNATS connects to a NATS server and opens its key-value bucket,
// retrying while the server cannot be reached if o asks for it.
func openNATS(ctx context.Context, u *url.URL, bucket, key string, retrying func(error)) (*Lockfile, error) {
	server := (&url.URL{Scheme: "nats", Host: u.Host, User: u.User}).String()
	where := "nats://" + u.Host + "/" + bucket + "/" + key
	for {
		nc, err := nats.Connect(server, nats.Name("s3lect"), nats.MaxReconnects(-1))
		if err == nil {
			js, jerr := jetstream.New(nc)
			if jerr != nil {
				nc.Close()
				return nil, fmt.Errorf("%s: %w", where, jerr)
			}
			kv, kerr := js.KeyValue(ctx, bucket)
			switch {
			case kerr == nil:
				return &Lockfile{Store: natskv.New(kv), Key: key, URL: where, Close: nc.Close}, nil
			case errors.Is(kerr, jetstream.ErrBucketNotFound):
				nc.Close()
				return nil, store.Permanent(fmt.Errorf("%s: key-value bucket %q does not exist; create it (nats kv add %s) or fix the URL", where, bucket, bucket))
			case errors.Is(kerr, jetstream.ErrJetStreamNotEnabled), errors.Is(kerr, jetstream.ErrJetStreamNotEnabledForAccount),
				errors.Is(kerr, nats.ErrNoResponders):
				// A server without JetStream has nobody answering its API.
				nc.Close()
				return nil, store.Permanent(fmt.Errorf("%s: JetStream is not enabled on the server (or for this account); start nats-server with -js: %w", where, kerr))
			}
			nc.Close()
			err = kerr
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, store.Permanent(fmt.Errorf("%s: host %q not found; fix the URL", where, dnsErr.Name))
		}
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, store.Permanent(fmt.Errorf("%s: the server refused the credentials; give its user and password in the URL (nats://user:password@host:port/bucket/key): %w", where, err))
		}
		err = fmt.Errorf("%s: %w", where, err)
		if retrying == nil {
			return nil, err
		}
		retrying(err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
