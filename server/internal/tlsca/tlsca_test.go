package tlsca

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateKeepsOneRoot(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("root.key mode %v, want 0600", mode)
	}
	again, err := LoadOrCreate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.RootPEM()) != string(ca.RootPEM()) {
		t.Error("reopening the data directory made a second root")
	}
	if !strings.HasPrefix(string(ca.RootPEM()), "-----BEGIN CERTIFICATE-----") {
		t.Errorf("RootPEM is not a PEM certificate: %.40q", ca.RootPEM())
	}
}

func TestLoadOrCreateRefusesHalfACA(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "root.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(dir, nil); err == nil || !strings.Contains(err.Error(), "half a CA") {
		t.Fatalf("a root without its key: err %v, want half a CA", err)
	}
}

func TestCertificateVerifiesInATLSHandshake(t *testing.T) {
	ca, err := LoadOrCreate(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return ca.Certificate(h.ServerName)
	}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	for _, host := range []string{"site-1.preview.pier.test", "Acme.Dev."} {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: strings.TrimSuffix(host, ".")})
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		leaf := conn.ConnectionState().PeerCertificates[0]
		conn.Close()
		if want := strings.ToLower(strings.TrimSuffix(host, ".")); len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != want {
			t.Errorf("%s: DNS names %v, want [%s]", host, leaf.DNSNames, want)
		}
		if leaf.NotAfter.Sub(leaf.NotBefore) > 31*24*time.Hour {
			t.Errorf("%s: leaf lives %v, want short-lived", host, leaf.NotAfter.Sub(leaf.NotBefore))
		}
		if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
			t.Errorf("%s: ext key usage %v", host, leaf.ExtKeyUsage)
		}
	}
	// A name the leaf was not issued for fails verification.
	cert, err := ca.Certificate("a.example")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "b.example", Roots: ca.Pool()}); err == nil {
		t.Error("a leaf for a.example verified for b.example")
	}
}

func TestCertificateRenewsNearExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := LoadOrCreate(t.TempDir(), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.Certificate("a.example")
	if err != nil {
		t.Fatal(err)
	}
	same, _ := ca.Certificate("A.EXAMPLE.")
	if same != first {
		t.Error("the same host, differently spelt, was issued again")
	}
	now = now.Add(29*24*time.Hour + 12*time.Hour) // within a day of the 30-day expiry
	renewed, err := ca.Certificate("a.example")
	if err != nil {
		t.Fatal(err)
	}
	if renewed == first || !renewed.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Error("a leaf within a day of expiring was not renewed")
	}
}
