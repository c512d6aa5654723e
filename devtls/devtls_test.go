package devtls_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/s3lect/s3lect/devtls"
)

// handshake connects a client with cc to a server with sc on loopback and
// returns the client's handshake error.
func handshake(t *testing.T, sc, cc *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.(*tls.Conn).Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cc)
	if err == nil {
		err = c.Handshake()
		c.Close()
	}
	<-done
	return err
}

func TestClientTrustsServer(t *testing.T) {
	pki, err := devtls.New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if err := handshake(t, pki.ServerTLS(), pki.ClientTLS()); err != nil {
		t.Errorf("handshake with the PKI's own authority = %v; want nil", err)
	}
}

func TestOtherAuthorityRefused(t *testing.T) {
	a, err := devtls.New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := devtls.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, a.ServerTLS(), b.ClientTLS()); err == nil {
		t.Error("a client trusting another throw-away authority accepted the server; want a verification error")
	}
}

func TestServerNamesLoopback(t *testing.T) {
	pki, err := devtls.New()
	if err != nil {
		t.Fatal(err)
	}
	leaf := pki.Server.Leaf
	if leaf == nil {
		t.Fatal("Server.Leaf is nil")
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("server certificate VerifyHostname(127.0.0.1) = %v; want nil", err)
	}
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("server certificate IPs = %v; want [127.0.0.1]", leaf.IPAddresses)
	}
}
