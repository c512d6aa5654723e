package s3lect

import (
	"crypto/tls"
	"testing"

	"github.com/s3lect/s3lect/devtls"
)

// testPKI is devtls's PKI, for HTTPS between electors on loopback.
type testPKI struct{ *devtls.PKI }

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p, err := devtls.New()
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{p}
}

func (p *testPKI) serverTLS() *tls.Config { return p.ServerTLS() }
func (p *testPKI) clientTLS() *tls.Config { return p.ClientTLS() }
