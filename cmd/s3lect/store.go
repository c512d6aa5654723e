package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/storeurl"
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
	fs.StringVar(&sf.url, "store", "", "the lockfile as a URL: "+storeurl.Schemes)
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

// open parses the flags and connects to the store (package storeurl).
// Transient failures while connecting (NATS only) are printed to stderr.
func (sf storeFlags) open(ctx context.Context, stderr io.Writer) (*opened, error) {
	raw := sf.url
	switch {
	case raw != "" && (sf.bucket != "" || sf.key != ""):
		return nil, usageErr("-store and -bucket/-key both name the lockfile; use one of them")
	case raw != "":
	case sf.bucket == "" && sf.key == "":
		return nil, usageErr("no lockfile named; give -store %s (or -bucket B -key K for S3)", storeurl.Schemes)
	case sf.bucket == "":
		return nil, usageErr("no bucket named; give -store s3://bucket/key or -bucket")
	case sf.key == "":
		return nil, usageErr("no lockfile key named; give -store s3://%s/path/to/lock.json or -key", sf.bucket)
	default:
		raw = "s3://" + sf.bucket + "/" + sf.key
	}
	var last string
	var lastAt time.Time
	lf, err := storeurl.Open(ctx, raw, storeurl.Options{
		S3Endpoint: sf.endpoint, S3PathStyle: sf.pathStyle,
		Retrying: func(err error) {
			if msg := errorCause(err); msg != last || time.Since(lastAt) >= errRepeat {
				fmt.Fprintf(stderr, "s3lect: store error: %v (retrying)\n", err)
				last, lastAt = msg, time.Now()
			}
		},
	})
	if errors.Is(err, storeurl.ErrBadURL) {
		return nil, usageErr("%v", err)
	}
	if err != nil {
		return nil, err
	}
	return &opened{st: lf.Store, key: lf.Key, where: lf.URL, close: lf.Close}, nil
}

// endpointName names the store's endpoint for a person: the S3 endpoint
// set by -endpoint or the environment, AWS S3 itself when none is set, or
// else the lockfile's URL (NATS names its server there).
func (sf storeFlags) endpointName(where string) string {
	if !strings.HasPrefix(where, "s3://") {
		return where
	}
	for _, ep := range []struct{ v, from string }{{sf.endpoint, "-endpoint"}, {os.Getenv("AWS_ENDPOINT_URL_S3"), "AWS_ENDPOINT_URL_S3"}, {os.Getenv("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL"}} {
		if ep.v != "" {
			return fmt.Sprintf("%s (%s, for %s)", ep.v, ep.from, where)
		}
	}
	return fmt.Sprintf("AWS S3 (no -endpoint or AWS_ENDPOINT_URL_S3 set, for %s)", where)
}

// noAnswerFix is what to check when the store at endpoint (as
// endpointName names it) has never answered: it names only what sets
// the endpoint of the store's own kind.
func noAnswerFix(endpoint string) string {
	const reach = "and that this machine can resolve and reach it (DNS, firewall, proxy)."
	switch {
	case strings.Contains(endpoint, "s3://"):
		return "Check that the store runs and that the endpoint is right (-endpoint or AWS_ENDPOINT_URL_S3 for MinIO and other " +
			"S3-compatible stores), " + reach
	case strings.HasPrefix(endpoint, "nats://"):
		return "Check that the NATS server runs and that the host and port in the nats:// URL are right, " + reach
	}
	return "Check that the store runs and that its endpoint is right (the emulator's variable, if one is used), " + reach
}

// withoutNeverAnswered drops the library's "the store has not answered
// since this elector started" from err's text, for a line that says so
// in its own words (a watcher is no elector; run says it once).
func withoutNeverAnswered(err error) string {
	msg := err.Error()
	if errors.Is(err, s3lect.ErrNeverAnswered) {
		msg = strings.TrimPrefix(msg, s3lect.ErrNeverAnswered.Error()+": ")
	}
	return unprefixed(msg)
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

// errorCause is what tells two store errors apart for the log: the
// message without the request and host IDs the store gave the request,
// which differ on every request. The IDs are found by type (the AWS SDK's
// response errors carry them), never by parsing the message.
func errorCause(err error) string {
	msg := err.Error()
	var rid interface{ ServiceRequestID() string }
	if errors.As(err, &rid) && rid.ServiceRequestID() != "" {
		msg = strings.ReplaceAll(msg, rid.ServiceRequestID(), "")
	}
	var hid interface{ ServiceHostID() string }
	if errors.As(err, &hid) && hid.ServiceHostID() != "" {
		msg = strings.ReplaceAll(msg, hid.ServiceHostID(), "")
	}
	return msg
}

// isPermanent reports whether err is a store failure retrying will not fix.
func isPermanent(err error) bool { return store.IsPermanent(err) }
