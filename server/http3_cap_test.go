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
