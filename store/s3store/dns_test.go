package s3store_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// TestNoDNSForAWS: on a machine that cannot resolve AWS's names (no
// AWS_ENDPOINT_URL_S3, no DNS), the error names that cause and the
// endpoint setting, is retried (DNS can come back), and does not send the
// user to path-style addressing, which AWS does not need. A name of
// another endpoint's bucket subdomain still gets the path-style advice.
func TestNoDNSForAWS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoint  string // "" : AWS's own
		want      string
		permanent bool
	}{
		{"AWS", "", "cannot resolve AWS's S3 host names", false},
		{"other endpoint", "https://objects.example.test", "use path-style addressing", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
				host, _, _ := net.SplitHostPort(addr)
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}}
			defer tr.CloseIdleConnections()
			client := s3.New(s3.Options{Region: "us-east-1", HTTPClient: &http.Client{Transport: tr},
				Credentials: credentials.NewStaticCredentialsProvider("key", "secret", "")}, func(o *s3.Options) {
				if tc.endpoint != "" {
					o.BaseEndpoint = aws.String(tc.endpoint)
				}
			})
			_, _, err := s3store.New(client, "jobs").Get(t.Context(), "leader/x.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) || store.IsPermanent(err) != tc.permanent {
				t.Errorf("Get() = %v (permanent %v); want %q, permanent %v", err, store.IsPermanent(err), tc.want, tc.permanent)
			}
			if tc.endpoint == "" && strings.Contains(err.Error(), "path-style") {
				t.Errorf("Get() = %v; path-style addressing is not the fix on AWS", err)
			}
		})
	}
}
