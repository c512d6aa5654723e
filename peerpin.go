package s3lect

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"
)

// Pinned peer mode (docs/protocol.md, section 5): the leader publishes the
// SHA-256 of its peer certificate's public key in every record it writes
// (Record.PeerPin), and followers accept the leader's TLS certificate only
// if its key has that hash, instead of verifying a chain to a certificate
// authority. Trust rests on who can write the lockfile, as everything else
// in the election does, and peer mode needs nothing but an address.

// pinPrefix starts every pin: the hash that follows is SHA-256, in hex.
const pinPrefix = "sha256:"

// maxPeerPin bounds the peerPin field; ours are 71 bytes.
const maxPeerPin = 128

// PeerPin returns the pin of a certificate as records carry it (the
// peerPin field): "sha256:" and the hex SHA-256 of its
// SubjectPublicKeyInfo, the DER form of its public key. The same hash,
// from a PEM file:
//
//	openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | sha256sum
func PeerPin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinPrefix + hex.EncodeToString(sum[:])
}

// selfSigned makes the certificate a pinned elector serves when it is
// given none: a fresh ECDSA P-256 key, self-signed, for server
// authentication, naming the host of addr (an IP address or a DNS name)
// so that it reads well in a TLS trace. Followers check only its key
// against the pin, so neither its names nor its dates matter to them; it
// is valid for ten years, so that general-purpose tools do not complain
// before that.
func selfSigned(id, addr string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "s3lect peer " + id},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{host}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// peerIdentity returns the certificate a pinned elector serves and its
// pin: cfg.PeerCertificate's, or a self-signed one made now.
func peerIdentity(cfg ElectorConfig) (*tls.Certificate, string, error) {
	cert := cfg.PeerCertificate
	if cert == nil {
		c, err := selfSigned(cfg.ServerID, cfg.ServerAddr)
		if err != nil {
			return nil, "", fmt.Errorf("s3lect: make a self-signed peer certificate: %w", err)
		}
		cert = c
	}
	if len(cert.Certificate) == 0 {
		return nil, "", errors.New("s3lect: PeerCertificate holds no certificate")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, "", fmt.Errorf("s3lect: PeerCertificate: %w", err)
		}
	}
	return cert, PeerPin(leaf), nil
}

// PeerServerTLS returns the TLS configuration a pinned elector's peer
// endpoint serves with (ServePeers), presenting the certificate whose pin
// its records carry: ElectorConfig.PeerCertificate, or the self-signed
// one New made. It returns nil unless PeerPinned is set.
func (e *Elector) PeerServerTLS() *tls.Config {
	if e.peerCert == nil {
		return nil
	}
	return &tls.Config{Certificates: []tls.Certificate{*e.peerCert}, MinVersion: tls.VersionTLS12}
}

// checkPin checks that the peer answering resp presented a certificate
// with the pin the lockfile's record carries. The request was sent
// before this check, which is safe: it carries nothing secret.
func checkPin(resp *http.Response, want string) error {
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return fmt.Errorf("answered without a TLS certificate; the lockfile pins %s", want)
	}
	if got := PeerPin(resp.TLS.PeerCertificates[0]); got != want {
		return fmt.Errorf("presented a certificate with key %s, but the lockfile's record pins %s: "+
			"not the leader that wrote the record (a leftover process at its address, or something in between)", got, want)
	}
	return nil
}

// PinnedTLS returns a client TLS configuration that accepts a server only
// if its certificate has the pin pin (a record's PeerPin), whatever its
// chain, names or dates: for a tool that asks a pinned leader's peer
// endpoint (s3lect release's early-renewal request) with the pin from the
// record it read.
func PinnedTLS(pin string) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, // the pin below is the check
		MinVersion:         tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("s3lect: the peer presented no certificate; the lockfile pins %s", pin)
			}
			if got := PeerPin(cs.PeerCertificates[0]); got != pin {
				return fmt.Errorf("s3lect: the peer presented a certificate with key %s, but the lockfile pins %s", got, pin)
			}
			return nil
		},
	}
}
