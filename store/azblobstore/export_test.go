package azblobstore

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// URL returns the container URL of s's client, for tests.
func URL(s *Store) string { return s.client.URL() }

// Names returns the account and container that a container URL names.
func Names(containerURL string) (account, container string) { return names(containerURL) }

// TokenMarksFailures reports, for a credential that gives worked tokens
// and then fails for failFor, whether the Store would take its failure as
// a missing credential (permanent) rather than weather.
func TokenMarksFailures(worked int, failFor time.Duration) bool {
	cred := &scriptedCredential{ok: worked, err: errors.New("no response from the identity endpoint")}
	ts := newTokenSource(cred)
	start := time.Unix(1000, 0)
	ts.now = func() time.Time { return start }
	var last error
	for range worked + 1 {
		_, last = ts.GetToken(context.Background(), policy.TokenRequestOptions{})
	}
	ts.now = func() time.Time { return start.Add(failFor) }
	_, last = ts.GetToken(context.Background(), policy.TokenRequestOptions{})
	var te *tokenError
	return errors.As(last, &te)
}

type scriptedCredential struct {
	ok  int
	err error
}

func (c *scriptedCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if c.ok > 0 {
		c.ok--
		return azcore.AccessToken{Token: "t"}, nil
	}
	return azcore.AccessToken{}, c.err
}

// SetListPage sets how many blobs a page of a listing holds, so that tests
// cross pages with few blobs (tests only).
func SetListPage(s *Store, n int32) { s.listPage = n }
