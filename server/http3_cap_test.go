package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// A QUIC connection past the cap is closed with H3_EXCESSIVE_LOAD as soon
// as it is accepted; once one closes, the next is taken.
func TestHTTP3ConnectionsAreCapped(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	ln, err := tr.ListenEarly(http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	capped := &cappedListener{QUICListener: ln, max: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		for {
			if _, err := capped.Accept(ctx); err != nil {
				return
			}
		}
	}()
	try := func() (*quic.Conn, error) {
		return quic.DialAddr(ctx, pc.LocalAddr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, &quic.Config{})
	}
	dial := func() *quic.Conn {
		c, err := try()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, second := dial(), dial()
	// The third is closed during or right after its handshake.
	third, err := try()
	if err == nil {
		select {
		case <-third.Context().Done():
			err = context.Cause(third.Context())
		case <-time.After(5 * time.Second):
			t.Fatal("a third connection stayed open past a cap of two")
		}
	}
	// Closed during the handshake, the code is hidden: QUIC sends an
	// application's close then as a bare APPLICATION_ERROR.
	var ae *quic.ApplicationError
	var te *quic.TransportError
	switch {
	case errors.As(err, &ae) && ae.Remote && ae.ErrorCode == h3ExcessiveLoad:
	case errors.As(err, &te) && te.Remote && te.ErrorCode == quic.ApplicationErrorErrorCode:
	default:
		t.Fatalf("the connection past the cap ended with %v, want the server's H3_EXCESSIVE_LOAD", err)
	}
	if first.Context().Err() != nil || second.Context().Err() != nil {
		t.Fatal("a connection within the cap was closed")
	}
	first.CloseWithError(0, "")
	deadline := time.Now().Add(5 * time.Second)
	for capped.open.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections counted open after one of two closed", capped.open.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fourth := dial()
	select {
	case <-fourth.Context().Done():
		t.Fatalf("a connection within the cap again was closed: %v", context.Cause(fourth.Context()))
	case <-time.After(300 * time.Millisecond):
	}
	second.CloseWithError(0, "")
	fourth.CloseWithError(0, "")
}

// One source holds at most its allowance of QUIC connections, handshakes
// included: the one past it is refused before its handshake, while
// another source still connects; once one of the source's connections
// closes, it may open another. Past half its allowance a source proves its
// address with a Retry first, which a real client passes.
func TestHTTP3ConnectionsAreCappedPerSource(t *testing.T) {
	sources := &sourceLimiter{max: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pc := listenCappedHTTP3(t, ctx, sources)
	from := func(ip string) func() (*quic.Conn, error) {
		cpc, err := net.ListenPacket("udp", ip+":0")
		if err != nil {
			t.Skipf("cannot bind %s: %v", ip, err)
		}
		ctr := &quic.Transport{Conn: cpc}
		t.Cleanup(func() { ctr.Close() })
		return func() (*quic.Conn, error) {
			dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
			defer dcancel()
			return ctr.Dial(dctx, pc.LocalAddr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, &quic.Config{})
		}
	}
	one, two := from("127.0.0.1"), from("127.0.0.2")
	first, err := one()
	if err != nil {
		t.Fatal(err)
	}
	second, err := one()
	if err != nil {
		t.Fatalf("the source's second connection, past a Retry: %v", err)
	}
	_, err = one()
	var te *quic.TransportError
	if !errors.As(err, &te) || !te.Remote || te.ErrorCode != quic.ConnectionRefused {
		t.Fatalf("a third connection from one source with an allowance of two: %v, want CONNECTION_REFUSED", err)
	}
	other, err := two()
	if err != nil {
		t.Fatalf("another source was refused while the first was at its allowance: %v", err)
	}
	if first.Context().Err() != nil || second.Context().Err() != nil {
		t.Fatal("a connection within the allowance was closed")
	}
	src := netip.MustParsePrefix("127.0.0.1/32")
	if n := sources.held(src); n != 2 {
		t.Fatalf("127.0.0.1 holds %d connections, want 2", n)
	}
	first.CloseWithError(0, "")
	deadline := time.Now().Add(5 * time.Second)
	for sources.held(src) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1 holds %d after one of its two closed", sources.held(src))
		}
		time.Sleep(10 * time.Millisecond)
	}
	again, err := one()
	if err != nil {
		t.Fatalf("within the allowance again: %v", err)
	}
	for _, c := range []*quic.Conn{second, other, again} {
		c.CloseWithError(0, "")
	}
}

// listenCappedHTTP3 serves QUIC on a loopback port with a self-signed
// certificate, sources limiting each source and a global cap far away,
// accepting until ctx ends. It answers the server's socket.
func listenCappedHTTP3(t *testing.T, ctx context.Context, sources *sourceLimiter) net.PacketConn {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc, ConnContext: sources.connContext, VerifySourceAddress: sources.mustVerify}
	t.Cleanup(func() { tr.Close() })
	ln, err := tr.ListenEarly(http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The global cap is far away: only the per-source one applies.
	capped := &cappedListener{QUICListener: ln, max: 100}
	go func() {
		for {
			if _, err := capped.Accept(ctx); err != nil {
				return
			}
		}
	}()
	return pc
}

// Sources are IPv4 addresses and IPv6 /64 prefixes.
func TestHTTP3SourceOf(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.7:443", "192.0.2.7/32"},
		{"[::ffff:192.0.2.7]:443", "192.0.2.7/32"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:5000", "2001:db8:1:2::/64"},
	} {
		u, _ := net.ResolveUDPAddr("udp", c.addr)
		if got := sourceOf(u).String(); got != c.want {
			t.Errorf("sourceOf(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
}
