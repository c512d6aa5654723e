package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lect/s3lect/internal/s3test"
)

// selfSigned writes a certificate for 127.0.0.1 that is its own CA, and
// its key, as PEM files in dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3lect test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "peer.pem"), filepath.Join(dir, "peer-key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return cert, key
}

// TestPeerMode runs two runners in peer mode: the follower names the
// leader's address, and a SIGTERM still hands over through the release.
func TestPeerMode(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t), s3test.Bucket(t)
	key, dir := freshKey("cli/peer.json"), t.TempDir()
	cert, pkey := selfSigned(t, dir)
	peer := func(port string) []string {
		return []string{"-peer-addr", "127.0.0.1:" + port, "-peer-cert", cert, "-peer-key", pkey, "-peer-ca", cert}
	}
	portA, portB := freePort(t), freePort(t)
	a := start(t, runArgs(endpoint, bucket, key, "a", peer(portA), childScript(dir, "a", false))...)
	waitFor(t, eventually, "a's command to start", func() bool { return started(t, dir, "a") }, a)
	b := start(t, runArgs(endpoint, bucket, key, "b", peer(portB), childScript(dir, "b", false))...)
	b.waitLine(t, eventually, "waiting: a at 127.0.0.1:"+portA+" leads (term")

	// release -to an ID nobody runs is refused before anything is
	// written, once a has heard from b for two FrequentIntervals.
	client, err := peerClient(cert, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	waitFor(t, eventually, "a's member list to be complete", func() bool {
		l, err := fetchMembers(t.Context(), client, "127.0.0.1:"+portA, key, "")
		return err == nil && l.Complete && strings.Join(l.Members, ",") == "a,b"
	}, a, b)
	before, _ := lockfile(t, bucket, key)
	where := []string{"-store", "s3://" + bucket + "/" + key, "-endpoint", endpoint, "-path-style", "-peer-ca", cert}
	out, err := runBin(append(append([]string{"release"}, where...), "-to", "web-9", "-wait", "0s")...)
	if binStatus(err) != exitUsage {
		t.Errorf("release -to web-9 (runs nowhere) in peer mode = %q, %v; want refused, status %d", out, err, exitUsage)
	}
	if !strings.Contains(out, "no member with that -id runs on this lockfile") || !strings.Contains(out, "a, b") {
		t.Errorf("release -to web-9 said %q; want it to name the members a, b", out)
	}
	if after, _ := lockfile(t, bucket, key); after.Term != before.Term || after.LeaderID != "a" || after.StepDown != "" {
		t.Errorf("lockfile after a refused release: %+v; want a still leading term %d, no request written", after, before.Term)
	}

	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.status(t); code != 0 {
		t.Errorf("a exited %d; want 0\n%s", code, a.stderr.String())
	}
	waitFor(t, eventually, "b's command to start", func() bool { return started(t, dir, "b") }, a, b)
	checkNoOverlap(t, dir, "a", "b")
}
