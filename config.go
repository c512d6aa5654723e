package s3lect

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/s3lect/s3lect/internal/defaultstore"
	"github.com/s3lect/s3lect/internal/lease"
	"github.com/s3lect/s3lect/store"
)

// ElectorConfig configures an Elector. Zero values mean the defaults.
type ElectorConfig struct {
	// Store is the coordination store. Set Store, or set Bucket to use S3.
	Store store.Store

	// Bucket, when Store is nil, makes New build an S3 store on this
	// bucket from the standard AWS environment (credentials, AWS_REGION,
	// AWS_ENDPOINT_URL_S3 for MinIO or R2, shared config files). The S3
	// backend must be linked in: import package
	// github.com/s3lect/s3lect/store/s3store, if only as
	// import _ "github.com/s3lect/s3lect/store/s3store".
	Bucket string

	// S3PathStyle addresses the bucket as https://endpoint/bucket/key
	// instead of https://bucket.endpoint/key. MinIO and most self-hosted
	// stores need it. Used with Bucket only.
	S3PathStyle bool

	// LockfilePath is the object key of the lockfile, for example
	// "leader/my-group.json". Every instance of one election group uses the
	// same key. Required: valid UTF-8 without NUL bytes, and at most 998
	// bytes, as the term claims' keys (LockfilePath + ".term." and 20
	// digits) must fit the stores' 1024.
	LockfilePath string

	// ServerID identifies this instance; it must be unique in the group.
	// Required.
	ServerID string

	// ServerAddr is the host:port advertised to followers for peer checks.
	// Required with PeerMode.
	ServerAddr string

	// FrequentInterval is how often a leader renews and how often a
	// follower reads the lockfile while leadership is changing. It is also
	// the timeout of a single store call. Default 5s.
	FrequentInterval time.Duration

	// InfrequentInterval is how often a follower checks on a leader that
	// has been renewing steadily. Default 30s; it must not be below
	// FrequentInterval.
	InfrequentInterval time.Duration

	// LeaderTimeout is this instance's lease. As leader, it steps down when
	// LeaderTimeout minus a tenth has passed since the start of its last
	// successful write, and its records state LeaderTimeout (the ttl
	// field). As follower, it takes over a record only after seeing it
	// unchanged for the longer of its own LeaderTimeout and the record's
	// ttl, so instances with different LeaderTimeouts can share a
	// lockfile, and a rolling change of it is safe. It must exceed two
	// FrequentIntervals. Default 15s. Like every timing here, it may be
	// at most ten years: New refuses a longer one (time.Duration's
	// maximum, Go's usual "no timeout", included) rather than let the
	// lease arithmetic overflow.
	//
	// A record without ttl (written by the original s3lect or by s3lect
	// before protocol version 3), and unreadable content, is waited out
	// with the longest lease this instance can assume: the longest of its
	// own LeaderTimeout, 15s (the default of every version) and every ttl
	// it has read on this lockfile. A writer without ttl configured with a
	// longer LeaderTimeout than all of these can be taken over while its
	// lease is live: during a rolling upgrade from an older version, keep
	// LeaderTimeout unchanged until every instance runs version 3
	// (docs/protocol.md, 1.2 and 3.1).
	LeaderTimeout time.Duration

	// PeerMode makes stable followers ask the leader over HTTPS instead of
	// reading the store.
	PeerMode bool

	// PeerHealthPath is the HTTP path of the leader's health endpoint; it
	// starts with /. Default "/health/leadership".
	PeerHealthPath string

	// PeerTimeout bounds one peer request (beyond the time a long-poll
	// request is asked to wait). Default 3s.
	PeerTimeout time.Duration

	// PeerTLS configures followers' HTTPS requests to the leader: RootCAs
	// to verify it, Certificates for mutual TLS. Nil means the system's
	// roots. Used with PeerMode; set PeerTLS or PeerClient, not both.
	PeerTLS *tls.Config

	// PeerClient, if set, makes the followers' peer requests instead of a
	// client built from PeerTLS. It should not follow redirects.
	PeerClient *http.Client

	// PeerPinned, with PeerMode, makes peer mode need no certificate
	// authority: this instance's records carry the pin of its peer
	// certificate (the SHA-256 of its public key, Record.PeerPin), and as
	// a follower it accepts a leader's peer endpoint only if it presents a
	// certificate with the key its record pins, instead of verifying a
	// chain. Serve the endpoint with PeerServerTLS. Trust rests on who can
	// write the lockfile, as every other rule of the election does. A
	// leader whose record pins nothing (an instance without PeerPinned, an
	// older version) is watched through the store. Every member of a
	// group should use the same mode: a follower that verifies chains
	// cannot verify a pinned leader's self-signed certificate. Set
	// PeerTLS or PeerPinned, not both (docs/protocol.md, section 5).
	PeerPinned bool

	// PeerCertificate is the certificate a pinned instance serves and
	// pins. Nil means a self-signed one (ECDSA P-256) that New makes, with
	// a new key at every start. Only with PeerPinned.
	PeerCertificate *tls.Certificate

	// PeerWait is how long a follower's peer request may wait at the
	// leader for its next write (a long-poll), so that followers hear of
	// every renewal and of a resignation as they happen. Default
	// LeaderTimeout/2, or a minute if that is less; at most a minute, the
	// longest a leader waits. A
	// negative PeerWait turns long-polling off: followers then ask once
	// per InfrequentInterval.
	PeerWait time.Duration

	// Logger receives the elector's events. Default slog.Default().
	Logger *slog.Logger
}

// maxKeyLen is the longest object key S3 (and the other stores) accept.
const maxKeyLen = 1024

// termSuffix is appended to LockfilePath to name the lockfile's term
// object: the highest term any takeover of the lockfile has used, kept so
// that terms never repeat even when the lockfile is deleted or written by
// a writer without terms (docs/protocol.md, 1.1). Electors read and write
// it, with conditional writes, only when they take over; it needs the
// same permissions as the lockfile. The package doc and docs/stores.md
// name it as LockfilePath + ".term", which is part of the wire format.
const termSuffix = ".term"

// claimKeyLen is how many bytes a term claim's key adds to LockfilePath:
// the term suffix, a dot and the term in 20 digits (claimKey).
const claimKeyLen = len(termSuffix) + 1 + 20

// claimKey names the claim of term: the object a takeover at that term
// creates, once, before it writes (docs/protocol.md, 1.1), as
// LockfilePath + ".term." + the term zero-padded to 20 digits. It is part
// of the wire format. Not ".term/": on a file-backed gateway (versitygw's
// posix backend) an object and a "directory" of one name cannot both
// exist, and the term object is "<lockfile>.term".
func (e *Elector) claimKey(term uint64) string {
	return fmt.Sprintf("%s.%020d", e.termKey, term)
}

// withDefaults returns cfg with every zero field set to its default.
func (cfg ElectorConfig) withDefaults() ElectorConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.FrequentInterval, DefaultFrequentInterval)
	def(&cfg.InfrequentInterval, DefaultInfrequentInterval)
	def(&cfg.LeaderTimeout, DefaultLeaderTimeout)
	def(&cfg.PeerTimeout, defaultPeerTimeout)
	def(&cfg.PeerWait, min(cfg.LeaderTimeout/2, maxPeerWait))
	if cfg.PeerHealthPath == "" {
		cfg.PeerHealthPath = defaultPeerHealthPath
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// validate checks a config that already has its defaults.
func (cfg ElectorConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("s3lect: invalid config: "+format, args...)
	}
	tooLong := func(field string, d time.Duration) error {
		return bad("%s %v is too long: the largest allowed is %v (ten years), beyond which the lease arithmetic could overflow; "+
			"for a lease that practically never ends, use %v", field, d, lease.MaxTiming, lease.MaxTiming)
	}
	switch {
	case cfg.Store == nil && cfg.Bucket == "":
		return bad("Store is nil and Bucket is empty; set one of them")
	case cfg.Store != nil && cfg.Bucket != "":
		return bad("both Store and Bucket are set; set one of them")
	case cfg.Store == nil && defaultstore.Get() == nil:
		return bad("Bucket is set but the S3 backend is not linked in; import _ %q", "github.com/s3lect/s3lect/store/s3store")
	case cfg.LockfilePath == "":
		return bad("LockfilePath is empty")
	case strings.ContainsRune(cfg.LockfilePath, 0):
		return bad("LockfilePath %q contains a NUL byte, which no object store accepts in a key", cfg.LockfilePath)
	case len(cfg.LockfilePath)+claimKeyLen > maxKeyLen:
		return bad("LockfilePath is %d bytes long; object stores accept keys of at most %d bytes, and the term claims' keys add %d (%q + a slash and 20 digits): at most %d bytes",
			len(cfg.LockfilePath), maxKeyLen, claimKeyLen, termSuffix, maxKeyLen-claimKeyLen)
	case !utf8.ValidString(cfg.LockfilePath):
		return bad("LockfilePath %q is not valid UTF-8, which S3 requires of keys", cfg.LockfilePath)
	case cfg.ServerID == "":
		return bad("ServerID is empty")
	case cfg.FrequentInterval > lease.MaxTiming:
		return tooLong("FrequentInterval", cfg.FrequentInterval)
	case cfg.InfrequentInterval > lease.MaxTiming:
		return tooLong("InfrequentInterval", cfg.InfrequentInterval)
	case cfg.LeaderTimeout > lease.MaxTiming:
		return tooLong("LeaderTimeout", cfg.LeaderTimeout)
	case cfg.PeerTimeout > lease.MaxTiming:
		return tooLong("PeerTimeout", cfg.PeerTimeout)
	case cfg.FrequentInterval < 0:
		return bad("FrequentInterval %v is negative", cfg.FrequentInterval)
	case cfg.InfrequentInterval < 0:
		return bad("InfrequentInterval %v is negative", cfg.InfrequentInterval)
	case cfg.LeaderTimeout < 0:
		return bad("LeaderTimeout %v is negative", cfg.LeaderTimeout)
	case cfg.PeerTimeout < 0:
		return bad("PeerTimeout %v is negative", cfg.PeerTimeout)
	case cfg.PeerWait > maxPeerWait:
		return bad("PeerWait %v is above the %v a leader waits at most", cfg.PeerWait, maxPeerWait)
	case cfg.LeaderTimeout <= 2*cfg.FrequentInterval:
		return bad("LeaderTimeout %v must exceed two FrequentIntervals (2 × %v)", cfg.LeaderTimeout, cfg.FrequentInterval)
	case cfg.InfrequentInterval < cfg.FrequentInterval:
		return bad("InfrequentInterval %v is below FrequentInterval %v", cfg.InfrequentInterval, cfg.FrequentInterval)
	case cfg.PeerMode && cfg.ServerAddr == "":
		return bad("PeerMode needs ServerAddr, the host:port followers reach this instance at")
	case cfg.PeerPinned && !cfg.PeerMode:
		return bad("PeerPinned needs PeerMode")
	case cfg.PeerPinned && cfg.PeerTLS != nil:
		return bad("both PeerTLS and PeerPinned are set; PeerPinned checks the leader's certificate against the pin in the lockfile, so PeerTLS's roots would not be used: set one")
	case cfg.PeerCertificate != nil && !cfg.PeerPinned:
		return bad("PeerCertificate is set without PeerPinned; for a certificate authority's chain, serve it with ServePeers and give followers PeerTLS")
	case cfg.PeerTLS != nil && cfg.PeerClient != nil:
		return bad("both PeerTLS and PeerClient are set; put the TLS settings in PeerClient's transport")
	case !strings.HasPrefix(cfg.PeerHealthPath, "/"):
		return bad("PeerHealthPath %q must start with /", cfg.PeerHealthPath)
	}
	return nil
}
