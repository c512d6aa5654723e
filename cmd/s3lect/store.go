package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/natskv"
	"github.com/s3lect/s3lect/store/s3store"
)

// storeFlags names the lockfile and the store that holds it.
type storeFlags struct {
	url       string
	bucket    string
	key       string
	endpoint  string
	pathStyle bool
}

func (sf *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&sf.url, "store", "", "the lockfile as a URL: s3://bucket/key or nats://host:port/bucket/key")
	fs.StringVar(&sf.bucket, "bucket", "", "S3 bucket holding the lockfile (instead of -store)")
	fs.StringVar(&sf.key, "key", "", "lockfile key, e.g. leader/backup.json (with -bucket)")
	fs.StringVar(&sf.endpoint, "endpoint", "", "S3 endpoint URL, e.g. http://127.0.0.1:9000 for MinIO (default: AWS_ENDPOINT_URL_S3 or AWS)")
	fs.BoolVar(&sf.pathStyle, "path-style", false, "path-style bucket addressing (MinIO and most self-hosted stores)")
}

// opened is a store ready for an elector.
type opened struct {
	st    store.Store
	key   string
	where string // the lockfile as a URL, for messages
	close func()
}

// errUsage marks an error in the flags: the exit status is exitUsage.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usageErr(format string, args ...any) error { return errUsage{fmt.Sprintf(format, args...)} }

// open parses the flags and connects to the store. Progress and transient
// failures while connecting (NATS only) are printed to stderr.
func (sf storeFlags) open(ctx context.Context, stderr io.Writer) (*opened, error) {
	scheme, bucket, key := "s3", sf.bucket, sf.key
	if sf.url != "" {
		if sf.bucket != "" || sf.key != "" {
			return nil, usageErr("-store and -bucket/-key both name the lockfile; use one of them")
		}
		u, err := url.Parse(sf.url)
		if err != nil || u.Scheme == "" {
			return nil, usageErr("-store %q is not a URL; write s3://bucket/key or nats://host:port/bucket/key", sf.url)
		}
		scheme = u.Scheme
		switch scheme {
		case "s3":
			bucket, key = u.Host, strings.TrimPrefix(u.Path, "/")
		case "nats":
			b, k, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
			if u.Host == "" || b == "" || k == "" {
				return nil, usageErr("-store %q: want nats://host:port/bucket/key", sf.url)
			}
			return sf.openNATS(ctx, u, b, k, stderr)
		default:
			return nil, usageErr("-store %q: the %s:// scheme is not supported; s3lect supports s3:// (and S3-compatible stores with -endpoint) and nats://", sf.url, scheme)
		}
	}
	switch {
	case bucket == "" && key == "":
		return nil, usageErr("no lockfile named; give -store s3://bucket/key (or -bucket B -key K)")
	case bucket == "":
		return nil, usageErr("no bucket named; give -store s3://bucket/key or -bucket")
	case key == "":
		return nil, usageErr("no lockfile key named; give -store s3://%s/path/to/lock.json or -key", bucket)
	}
	if sf.endpoint != "" {
		u, err := url.Parse(sf.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErr("-endpoint %q is not an http:// or https:// URL, e.g. http://127.0.0.1:9000", sf.endpoint)
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, store.Permanent(fmt.Errorf("load the AWS configuration (environment and ~/.aws): %w", err))
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
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = sf.pathStyle
		if sf.endpoint != "" {
			o.BaseEndpoint = aws.String(sf.endpoint)
		}
	})
	st := s3store.New(client, bucket)
	return &opened{st: st, key: key, where: "s3://" + bucket + "/" + key, close: tr.CloseIdleConnections}, nil
}

// openNATS connects to a NATS server and opens its key-value bucket,
// retrying (and saying so) while the server cannot be reached.
func (sf storeFlags) openNATS(ctx context.Context, u *url.URL, bucket, key string, stderr io.Writer) (*opened, error) {
	if sf.endpoint != "" || sf.pathStyle {
		return nil, usageErr("-endpoint and -path-style are for S3; a nats:// store names its server in the URL")
	}
	server := (&url.URL{Scheme: "nats", Host: u.Host, User: u.User}).String()
	where := "nats://" + u.Host + "/" + bucket + "/" + key
	var last string
	var lastAt time.Time
	say := func(err error) {
		if msg := err.Error(); msg != last || time.Since(lastAt) >= errRepeat {
			fmt.Fprintf(stderr, "s3lect: store error: %s: %v (retrying)\n", where, err)
			last, lastAt = msg, time.Now()
		}
	}
	for {
		nc, err := nats.Connect(server, nats.Name("s3lect"), nats.MaxReconnects(-1))
		if err == nil {
			js, err := jetstream.New(nc)
			if err != nil {
				nc.Close()
				return nil, err
			}
			kv, err := js.KeyValue(ctx, bucket)
			switch {
			case err == nil:
				return &opened{st: natskv.New(kv), key: key, where: where, close: nc.Close}, nil
			case errors.Is(err, jetstream.ErrBucketNotFound):
				nc.Close()
				return nil, store.Permanent(fmt.Errorf("%s: key-value bucket %q does not exist; create it (nats kv add %s) or fix the URL", where, bucket, bucket))
			case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
				nc.Close()
				return nil, store.Permanent(fmt.Errorf("%s: JetStream is not enabled on the server; start nats-server with -js", where))
			}
			nc.Close()
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, store.Permanent(fmt.Errorf("%s: host %q not found; fix the URL", where, dnsErr.Name))
		}
		say(err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// errRepeat is how often a store error that persists unchanged is printed
// again.
const errRepeat = 30 * time.Second

// hint adds what to check to a transient store error whose cause is
// clear: an endpoint nobody answers on, or a host name that does not
// resolve.
func hint(err error) string {
	var (
		op  *net.OpError
		dns *net.DNSError
	)
	switch {
	case errors.As(err, &dns):
		return " (check the endpoint's host name: -endpoint, -store or AWS_ENDPOINT_URL_S3)"
	case errors.As(err, &op) && op.Op == "dial":
		return " (is the store up, and is the endpoint right? -endpoint, -store or AWS_ENDPOINT_URL_S3)"
	}
	return ""
}

// isPermanent reports whether err is a store failure retrying will not fix.
func isPermanent(err error) bool { return store.IsPermanent(err) }
