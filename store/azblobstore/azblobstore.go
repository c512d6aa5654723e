// Package azblobstore is a store.Store on one Azure Blob Storage container,
// using the Azure SDK for Go (azblob).
//
// # How it maps the store contract
//
// Each lockfile is a block blob named by its key. Get downloads the blob
// (Get Blob) and returns its content, at most store.MaxObjectSize+1 bytes
// of it, with the blob's ETag as Azure sends it (quoted, such as
// "0x8DC9A1B2C3D4E5F"). PutIfMatch uploads the whole blob in one request
// (Put Blob): with If-None-Match: * to create it only if it is absent,
// and with If-Match: <etag> to replace it only if it is unchanged. Azure
// refuses such a create with 409 BlobAlreadyExists and such a replace with
// 412 ConditionNotMet (or 404 BlobNotFound when the blob is gone); all
// three become store.ErrPreconditionFailed. Azure gives every write a new
// ETag, even of the same bytes.
//
// Before its first write, a Store checks that the service honours those
// conditions, on a probe blob next to the lockfile (the key with
// ".s3lect-probe" appended): a second create and a replace naming a wrong
// ETag must be refused, and a replace naming the right ETag must succeed.
//
// Errors are told apart by the service's error code (x-ms-error-code) and
// HTTP status, never by message text. Failures that retrying cannot fix
// are wrapped with store.Permanent, and their message says what to do: a
// missing container, a refused key or token, a missing role, an invalid
// name, or a lease someone else holds on the blob. Everything else (5xx,
// 429 and 503 ServerBusy, network errors) is returned as it is, for
// s3lect's own retry policy.
//
// # Retries
//
// Every call the Store makes turns the SDK's retries off: s3lect retries by
// its own fixed policy, and an SDK retry of a conditional write would hide
// whether the first try landed (the retry would be refused by the first
// try's own write). This is done per call, so a client given to New may
// keep its own retry options for its other uses. A credential's own token
// requests keep their retries.
//
// # Credentials
//
// FromEnvironment reads two environment variables:
//
//   - AZURE_STORAGE_CONNECTION_STRING, when set, is used as it is: with an
//     account key (AccountName=...;AccountKey=...), a SAS
//     (BlobEndpoint=...;SharedAccessSignature=...), or Azurite's
//     development account with its BlobEndpoint (the SDK does not read
//     "UseDevelopmentStorage=true").
//   - Otherwise AZURE_STORAGE_ACCOUNT names the account, reached at
//     https://ACCOUNT.blob.core.windows.net/ with a Microsoft Entra token
//     from azidentity.DefaultAzureCredential: environment variables
//     (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_CLIENT_SECRET, ...), workload
//     identity, managed identity, or a developer's `az login`.
//
// # Permissions
//
// With Microsoft Entra credentials the identity needs to read and write
// blobs in the container: the built-in role "Storage Blob Data
// Contributor" assigned on the container (or on the account), or a custom
// role with Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read
// and .../blobs/write. A SAS needs read, create and write permissions, and
// list for List (store.Lister, which package pool uses to watch its
// workers' sessions). The container must exist; the Store never creates
// it.
//
// # Cost
//
// At s3lect's default intervals (a leader renews every 5 s, a follower
// reads every 30 s) a group makes 720 writes an hour, plus 120 reads an
// hour per follower. At Hot-tier prices of $0.065 per 10,000 write
// operations and $0.005 per 10,000 read operations (list prices for US
// East, LRS, as we read them in 2025 and could not check again: verify
// them for your region) and 730 hours a month, that is about $3.42 a month for the leader's writes and
// $0.044 per follower: $3.50 for a group of 3, $3.81 for 10, $7.75 for 100.
// Storage of two blobs under 1 KiB is negligible. Check the current prices
// for your region and redundancy on Azure's Blob Storage pricing page.
package azblobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/s3lect/s3lect/internal/condcheck"
	"github.com/s3lect/s3lect/store"
)

// The environment variables FromEnvironment reads.
const (
	// EnvConnectionString holds a storage connection string. When set, it
	// wins over EnvAccount.
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	// EnvAccount names the storage account to reach with Microsoft Entra
	// credentials (azidentity.DefaultAzureCredential).
	EnvAccount = "AZURE_STORAGE_ACCOUNT"
)

// errNoConditions is the permanent error a Store returns, wrapping
// store.ErrNoConditionalWrites, when the service ignores If-None-Match or
// If-Match on Put Blob.
var errNoConditions = fmt.Errorf("azblobstore: the service ignores If-None-Match / If-Match on Put Blob: %w", store.ErrNoConditionalWrites)

// Store is a store.Store on one Azure Blob Storage container. It is safe
// for concurrent use.
type Store struct {
	client    *container.Client
	container string // the container's name, for messages
	account   string // the account's name, for messages
	owned     *http.Client
	check     condcheck.Check
	listPage  int32 // blobs per page of a listing; 0 is Azure's default (5,000); tests set it small
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// New returns a Store on the container that client addresses. The Store
// turns the SDK's retries off for each of its calls, whatever the client's
// own retry options are. The container must exist.
//
// A container.Client, rather than an azblob.Client and a container name,
// because it is what a SAS or a role scoped to one container gives, and
// it is all the Store needs.
//
// A Store from New cannot tell a credential that has no token to give
// (azidentity does not export that error's type) from a network failure:
// such failures are retried. FromEnvironment's credential reports them
// as permanent.
func New(client *container.Client) *Store {
	s := &Store{client: client}
	s.account, s.container = names(client.URL())
	s.check = condcheck.Check{
		Where:     s.where,
		WrongETag: `"0x8D0000000000000"`,
		Unsafe:    errNoConditions,
	}
	return s
}

// FromEnvironment builds a Store on the container named containerName from
// the environment: AZURE_STORAGE_CONNECTION_STRING if it is set, else the
// account that AZURE_STORAGE_ACCOUNT names, with a token from
// azidentity.DefaultAzureCredential. It fails when neither is set. Building
// the Store sends no request; ctx is there for symmetry with the other
// backends' constructors.
//
// The Store's HTTP client is its own: CloseIdleConnections releases it.
func FromEnvironment(ctx context.Context, containerName string) (*Store, error) {
	if containerName == "" {
		return nil, errors.New("azblobstore: no container name: name the container that holds the lockfile")
	}
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	opts := &container.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: boundedTransport{hc},
		// MaxRetries -1 means a single try. Each call also says so (see
		// once); this keeps the client's other uses without retries too.
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}
	if cs := os.Getenv(EnvConnectionString); cs != "" {
		c, err := container.NewClientFromConnectionString(cs, containerName, opts)
		if err != nil {
			// The SDK's message does not repeat the connection string,
			// which holds the account key.
			return nil, fmt.Errorf("azblobstore: %s is not a usable connection string; copy it from the portal (Access keys) or `az storage account show-connection-string`: %w", EnvConnectionString, err)
		}
		s := New(c)
		s.owned = hc
		return s, nil
	}
	account := os.Getenv(EnvAccount)
	if account == "" {
		return nil, fmt.Errorf("azblobstore: no Azure storage configured: set %s (an account key, a SAS or Azurite's) or %s (an account name, reached with Microsoft Entra credentials)", EnvConnectionString, EnvAccount)
	}
	if !accountName.MatchString(account) {
		return nil, fmt.Errorf("azblobstore: %s=%q is not a storage account name (3 to 24 lowercase letters and digits)", EnvAccount, account)
	}
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: policy.ClientOptions{Transport: boundedTransport{hc}},
	})
	if err != nil {
		return nil, fmt.Errorf("azblobstore: Microsoft Entra credentials for account %s: %w", account, err)
	}
	u := "https://" + account + ".blob.core.windows.net/" + url.PathEscape(containerName)
	c, err := container.NewClient(u, newTokenSource(cred), opts)
	if err != nil {
		return nil, fmt.Errorf("azblobstore: client for %s: %w", u, err)
	}
	s := New(c)
	s.owned = hc
	return s, nil
}

var accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)

// names returns the account and container that a container URL names, for
// messages: https://ACCOUNT.blob.core.windows.net/CONTAINER, or
// http://HOST/ACCOUNT/CONTAINER for Azurite and other path-style
// endpoints. The container is always the last segment of the path.
func names(containerURL string) (account, container string) {
	u, err := url.Parse(containerURL)
	if err != nil {
		return "", ""
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	container = segs[len(segs)-1]
	if len(segs) >= 2 {
		return segs[len(segs)-2], container
	}
	account, _, _ = strings.Cut(u.Hostname(), ".")
	return account, container
}

// CloseIdleConnections closes the idle connections of the HTTP client that
// FromEnvironment made for the Store. For a Store from New it does
// nothing: the client's owner closes its connections.
func (s *Store) CloseIdleConnections() {
	if s.owned != nil {
		s.owned.CloseIdleConnections()
	}
}

// maxResponse bounds any response body that FromEnvironment's client
// reads, error bodies included; a lockfile is far smaller.
const maxResponse = 1 << 20

// boundedTransport makes every response body fail after maxResponse bytes.
type boundedTransport struct{ c *http.Client }

func (t boundedTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.c.Do(req)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxResponse}
	}
	return resp, err
}

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("azblobstore: response body exceeds %d bytes", maxResponse)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// tokenSource marks the errors of the credential FromEnvironment made, so
// that a credential that cannot get a token at all (azidentity does not
// export that error's type) is told apart from weather. A failure is
// marked only while the credential has never given a token and has been
// failing for tokenPatience: a managed-identity endpoint that does not
// answer yet (a VM still booting, a sidecar not ready) is retried, and
// once a token has come, later failures are always retried.
type tokenSource struct {
	cred      azcore.TokenCredential
	worked    *atomic.Bool
	firstFail *atomic.Int64 // unix nanoseconds of the first failure; 0: none yet
	now       func() time.Time
}

// tokenPatience is how long a credential that never gave a token may fail
// before its failures are reported as permanent.
const tokenPatience = time.Minute

func newTokenSource(cred azcore.TokenCredential) tokenSource {
	return tokenSource{cred: cred, worked: new(atomic.Bool), firstFail: new(atomic.Int64), now: time.Now}
}

func (t tokenSource) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := t.cred.GetToken(ctx, o)
	if err == nil {
		t.worked.Store(true)
		return tok, nil
	}
	if t.worked.Load() {
		return tok, err
	}
	now := t.now().UnixNano()
	t.firstFail.CompareAndSwap(0, now)
	if time.Duration(now-t.firstFail.Load()) >= tokenPatience {
		err = &tokenError{err}
	}
	return tok, err
}

type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// once turns the SDK's retries off for one call.
func once(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}

// where names a blob in messages, in the form the store URLs use.
func (s *Store) where(key string) string {
	return "azblob://" + s.container + "/" + key
}

// Get implements store.Store. It reads at most store.MaxObjectSize+1 bytes
// of the blob.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	resp, err := s.client.NewBlobClient(key).DownloadStream(once(ctx), nil)
	if err != nil {
		return nil, "", s.mapError("get", key, err, "")
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, store.MaxObjectSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("azblobstore: get %s: read body: %w", s.where(key), err)
	}
	if resp.ETag == nil || *resp.ETag == "" {
		return nil, "", store.Permanent(fmt.Errorf("azblobstore: get %s: the service returned no ETag; s3lect needs one for conditional writes", s.where(key)))
	}
	return data, string(*resp.ETag), nil
}

// List implements store.Lister with List Blobs on prefix (committed blobs
// only: no snapshots, versions or deleted blobs), following its markers:
// one request per page of up to 5,000 blobs (Azure may end a page early,
// even empty, with a marker to go on from); ctx bounds them all, and the
// SDK's retries are off as for Get. Azure lists a blob's ETag
// without the quotes that Get Blob's ETag header has; List quotes it, so
// that an entry's ETag is the one Get returns. The Store's own probe blobs
// (names ending in ".s3lect-probe") are left out. The identity needs
// blobs/read on the container, or a SAS the list permission.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	opts := &container.ListBlobsFlatOptions{Prefix: &prefix}
	if s.listPage > 0 {
		opts.MaxResults = &s.listPage
	}
	pager := s.client.NewListBlobsFlatPager(opts)
	var entries []store.Entry
	for pager.More() {
		page, err := pager.NextPage(once(ctx))
		if err != nil {
			return nil, s.mapError("list", prefix, err, "")
		}
		if page.Segment == nil {
			continue
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || strings.HasSuffix(*b.Name, condcheck.ProbeSuffix) {
				continue
			}
			if b.Properties == nil || b.Properties.ETag == nil || *b.Properties.ETag == "" {
				return nil, store.Permanent(fmt.Errorf("azblobstore: list %s: the service listed %s without an ETag; s3lect needs one for conditional writes", s.where(prefix), *b.Name))
			}
			entries = append(entries, store.Entry{Key: *b.Name, ETag: quoted(string(*b.Properties.ETag))})
		}
	}
	return entries, nil
}

// quoted returns etag in the quoted form of an ETag header.
func quoted(etag string) string {
	if len(etag) >= 2 && strings.HasPrefix(etag, `"`) && strings.HasSuffix(etag, `"`) {
		return etag
	}
	return `"` + etag + `"`
}

// PutIfMatch implements store.Store. Before the Store's first write it
// checks, once, that the service honours conditional writes.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := s.check.Before(ctx, rawOps{s}, key); err != nil {
		return "", err
	}
	return s.put(ctx, key, data, etag)
}

// rawOps are the Store's calls without the check in front of its writes.
type rawOps struct{ s *Store }

func (o rawOps) Get(ctx context.Context, key string) ([]byte, string, error) {
	return o.s.Get(ctx, key)
}

func (o rawOps) Put(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return o.s.put(ctx, key, data, etag)
}

func (s *Store) put(ctx context.Context, key string, data []byte, etag string) (string, error) {
	cond := &blob.ModifiedAccessConditions{}
	if etag == "" {
		cond.IfNoneMatch = to(azcore.ETagAny)
	} else {
		cond.IfMatch = to(azcore.ETag(etag))
	}
	resp, err := s.client.NewBlockBlobClient(key).Upload(once(ctx), nopCloser{bytes.NewReader(data)}, &blockblob.UploadOptions{
		HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: to("application/json")},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
	})
	if err != nil {
		return "", s.mapError("put", key, err, etag)
	}
	if resp.ETag == nil || *resp.ETag == "" {
		return "", store.Permanent(fmt.Errorf("azblobstore: put %s: the service returned no ETag; s3lect needs one for conditional writes", s.where(key)))
	}
	return string(*resp.ETag), nil
}

func to[T any](v T) *T { return &v }

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

// serviceError is an error answer from the service, told by its status and
// error code. Its message is short; the SDK's full error, with the
// response, is what it wraps.
type serviceError struct {
	status int
	code   string
	fix    string // what to do, for permanent errors
	err    *azcore.ResponseError
}

func (e *serviceError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d)", e.code, e.status)
	if e.code == "" {
		msg = fmt.Sprintf("HTTP %d", e.status)
	}
	if e.fix != "" {
		msg += ": " + e.fix
	}
	if e.err != nil && e.err.RawResponse != nil {
		if id := e.err.RawResponse.Header.Get("x-ms-request-id"); id != "" {
			msg += " (request " + id + ")"
		}
	}
	return msg
}

func (e *serviceError) Unwrap() error { return e.err }

// mapError turns an SDK error into the store contract's errors. It looks at
// error types, error codes and HTTP statuses only, never at message text.
// etag is the ETag a put named ("" for a create or a get).
func (s *Store) mapError(op, key string, err error, etag string) error {
	where := fmt.Sprintf("azblobstore: %s %s", op, s.where(key))
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", where, err)
	}
	var resp *azcore.ResponseError
	if errors.As(err, &resp) {
		return s.mapResponse(where, op, key, resp, etag)
	}
	var failed *azidentity.AuthenticationFailedError
	if errors.As(err, &failed) {
		if r := failed.RawResponse; r != nil && r.StatusCode >= 400 && r.StatusCode < 500 &&
			r.StatusCode != http.StatusTooManyRequests && r.StatusCode != http.StatusRequestTimeout {
			return store.Permanent(fmt.Errorf("%s: Microsoft Entra refused the credential's token request; check AZURE_CLIENT_ID, AZURE_TENANT_ID and the secret, certificate or managed identity they name: %w", where, err))
		}
		return fmt.Errorf("%s: getting a token: %w", where, err) // the identity service was unreachable or busy
	}
	var required *azidentity.AuthenticationRequiredError
	var tokenErr *tokenError
	if errors.As(err, &required) || errors.As(err, &tokenErr) {
		return store.Permanent(fmt.Errorf("%s: no credential could get a token; set %s, or give this process an identity (AZURE_CLIENT_ID with AZURE_TENANT_ID and a secret, workload or managed identity, or `az login`): %w", where, EnvConnectionString, err))
	}
	return fmt.Errorf("%s: %w", where, err) // network: worth retrying
}

func (s *Store) mapResponse(where, op, key string, resp *azcore.ResponseError, etag string) error {
	code := bloberror.Code(resp.ErrorCode)
	se := &serviceError{status: resp.StatusCode, code: resp.ErrorCode, err: resp}
	switch {
	case code == bloberror.BlobNotFound && op == "get":
		return fmt.Errorf("%s: %w: %w", where, se, store.ErrNotFound)
	case code == bloberror.BlobNotFound && etag != "":
		return fmt.Errorf("%s: the blob is absent: %w: %w", where, se, store.ErrPreconditionFailed)
	case code == bloberror.BlobAlreadyExists && op == "put" && etag == "":
		return fmt.Errorf("%s: %w: %w", where, se, store.ErrPreconditionFailed)
	case code == bloberror.ConditionNotMet,
		code == "" && resp.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w: %w", where, se, store.ErrPreconditionFailed)
	}
	if fix := s.fix(code, key); fix != "" {
		se.fix = fix
		if op == "list" && resp.StatusCode == http.StatusForbidden {
			se.fix += "; listing needs blobs/read, or a SAS with the list permission"
		}
		return store.Permanent(fmt.Errorf("%s: %w", where, se))
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		se.fix = "access was refused; check the credentials and that the identity has the role Storage Blob Data Contributor on container " + s.container
		if op == "list" {
			se.fix += "; listing needs blobs/read, or a SAS with the list permission"
		}
		return store.Permanent(fmt.Errorf("%s: %w", where, se))
	}
	if resp.StatusCode == http.StatusBadRequest {
		// A request the service finds malformed stays malformed when sent
		// again (an API version an older Azure Stack refuses, say).
		se.fix = "the service refused the request as invalid; check the endpoint, and that the service supports the Blob API version the SDK sends"
		return store.Permanent(fmt.Errorf("%s: %w", where, se))
	}
	return fmt.Errorf("%s: %w", where, se)
}

// fix says what to do about an error code that retrying will not fix, or
// returns "" for codes that may pass.
func (s *Store) fix(code bloberror.Code, key string) string {
	c, a := s.container, s.account
	switch code {
	case bloberror.ContainerNotFound:
		return fmt.Sprintf("container %q does not exist in account %s; create it (az storage container create -n %s --account-name %s) or fix the container name", c, a, c, a)
	case bloberror.ContainerBeingDeleted, bloberror.ContainerDisabled:
		return fmt.Sprintf("container %q is being deleted or is disabled; create it again once it is gone, or use another container", c)
	case bloberror.ResourceNotFound:
		return fmt.Sprintf("the account %s or container %q was not found; check the endpoint and the container name", a, c)
	case bloberror.AuthenticationFailed, bloberror.InvalidAuthenticationInfo, bloberror.NoAuthenticationInformation:
		return fmt.Sprintf("the service could not authenticate the request; check the account key, SAS or token (the connection string in %s, if set) and that this machine's clock is right", EnvConnectionString)
	case bloberror.AuthorizationFailure:
		return fmt.Sprintf("the request was not authorized; check the account key or SAS (the connection string in %s, if set), the identity's role (Storage Blob Data Contributor on container %s) and the account's firewall rules", EnvConnectionString, c)
	case bloberror.AuthorizationPermissionMismatch, bloberror.InsufficientAccountPermissions, bloberror.UnauthorizedBlobOverwrite:
		return fmt.Sprintf("the identity may not read and write blobs here; assign it the role Storage Blob Data Contributor on container %s (or a custom role with blobs/read and blobs/write), or use a SAS with read, create and write permissions", c)
	case bloberror.AuthorizationResourceTypeMismatch, bloberror.AuthorizationServiceMismatch, bloberror.AuthorizationProtocolMismatch, bloberror.AuthorizationSourceIPMismatch:
		return "the SAS does not allow this request (resource type, service, protocol or source IP); issue one for blob objects over HTTPS with read, create and write permissions"
	case "KeyBasedAuthenticationNotPermitted":
		return fmt.Sprintf("the account does not allow shared-key access; use Microsoft Entra credentials (%s and an identity) instead of a key", EnvAccount)
	case bloberror.AccountIsDisabled:
		return fmt.Sprintf("the storage account %s is disabled", a)
	case bloberror.InvalidResourceName, bloberror.OutOfRangeInput, bloberror.InvalidURI:
		return fmt.Sprintf("the service refuses the name %q in container %q; use a container name of 3 to 63 lowercase letters, digits and single hyphens, and a LockfilePath of plain characters under 1,024", key, c)
	case bloberror.LeaseIDMissing, bloberror.LeaseIDMismatchWithBlobOperation, bloberror.LeaseNotPresentWithBlobOperation:
		return fmt.Sprintf("the blob has a lease that s3lect does not hold; break it (az storage blob lease break -c %s -b %s) and do not lease the lockfile", c, key)
	case bloberror.BlobImmutableDueToPolicy, bloberror.BlobArchived, bloberror.BlobBeingRehydrated:
		return "the blob cannot be overwritten (an immutability policy, legal hold or the archive tier); use a container without them for the lockfile"
	}
	return ""
}
