// Package devtls makes a throw-away certificate authority with a server
// certificate for 127.0.0.1 and a client certificate, valid for a day, so
// that tests, demos and measurements of peer mode speak real, verified TLS
// on loopback without any files:
//
//	pki, err := devtls.New()
//	...
//	cfg.PeerTLS = pki.ClientTLS()                              // followers
//	go s3lect.ServePeers(ctx, ln, s3lect.PeerHandler(e), pki.ServerTLS()) // every candidate
//
// Its keys live only in memory. Never use it outside tests: production
// peers need certificates from your own authority.
package devtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"time"
)

// PKI is a CA and two certificates it issued, valid for a day.
type PKI struct {
	Pool   *x509.CertPool  // holds the CA
	Server tls.Certificate // for 127.0.0.1, server authentication
	Client tls.Certificate // client authentication
}

// New makes a PKI with fresh keys.
func New() (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3lect development CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	issue := func(serial int64, usage x509.ExtKeyUsage) (tls.Certificate, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "s3lect development"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return tls.Certificate{}, err
		}
		leaf, err := x509.ParseCertificate(der)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, err
	}
	p := &PKI{Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	if p.Server, err = issue(2, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.Client, err = issue(3, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	return p, nil
}

// ServerTLS is a server configuration presenting the server certificate.
func (p *PKI) ServerTLS() *tls.Config { return &tls.Config{Certificates: []tls.Certificate{p.Server}} }

// ClientTLS is a client configuration that trusts the CA.
func (p *PKI) ClientTLS() *tls.Config { return &tls.Config{RootCAs: p.Pool} }
