package acme_test

import (
	"bytes"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/acme"
	"github.com/pierhq/pier/server/internal/acme/acmetest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func issuer(t *testing.T, p *acmetest.Pebble, dir string, now func() time.Time) *acme.Issuer {
	t.Helper()
	i, err := acme.New(acme.Config{Directory: p.DirectoryURL, CAFile: p.CAFile, Email: "ops@example.test", Dir: dir, Now: now, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func verify(t *testing.T, roots *x509.CertPool, host string, chain [][]byte) *x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	for _, der := range chain[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("chain for %s does not verify against Pebble's root: %v", host, err)
	}
	return leaf
}

// TestObtainCacheAndRenew obtains a certificate from Pebble, finds it again
// after a restart without asking Pebble, and renews it once the clock is
// within 30 days of its expiry.
func TestObtainCacheAndRenew(t *testing.T) {
	p := acmetest.New(t)
	p.Start(acmetest.Options{AlwaysValid: true})
	roots := p.Roots()
	dir := t.TempDir()
	const host = "shop--prj-abc.example.test"

	first := issuer(t, p, dir, nil)
	cert, err := first.Certificate(host)
	if err != nil {
		t.Fatal(err)
	}
	leaf := verify(t, roots, host, cert.Certificate)
	again, _ := first.Certificate(host)
	if again != cert {
		t.Fatal("a second call obtained another certificate instead of using the cached one")
	}

	// Keys on disk are readable by the owner only.
	var keys int
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(path) == ".key" {
			keys++
			if fi, _ := d.Info(); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v", path, fi.Mode().Perm())
			}
		}
		return nil
	})
	if keys != 2 { // the account key and the certificate's key
		t.Fatalf("%d key files", keys)
	}

	// A restarted server reads the certificate from its directory.
	restarted := issuer(t, p, dir, nil)
	cached, err := restarted.Certificate(host)
	if err != nil || !bytes.Equal(cached.Certificate[0], cert.Certificate[0]) {
		t.Fatalf("after a restart: %v, same leaf %v", err, err == nil && bytes.Equal(cached.Certificate[0], cert.Certificate[0]))
	}

	// Within 30 days of expiry the old certificate is still served while a
	// renewal runs, and the renewed one follows.
	late := leaf.NotAfter.Add(-acme.RenewBefore + time.Hour)
	renewing := issuer(t, p, dir, func() time.Time { return late })
	old, err := renewing.Certificate(host)
	if err != nil || !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		t.Fatalf("during renewal: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := renewing.Certificate(host)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.Certificate[0], cert.Certificate[0]) {
			verify(t, roots, host, c.Certificate)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not renewed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRefusesNonDNSNames(t *testing.T) {
	i, err := acme.New(acme.Config{Directory: "https://127.0.0.1:1/dir", Dir: t.TempDir(), Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"", "../etc", "a/b", "exa mple.test", "..test"} {
		if _, err := i.Certificate(h); err == nil {
			t.Errorf("%q: issued", h)
		}
	}
}

// TestChallengeHandler answers only tokens in progress, for their host.
func TestChallengeHandler(t *testing.T) {
	p := acmetest.New(t)
	// The VA fetches challenges from this handler, with every name
	// resolving to loopback.
	var issuerRef *acme.Issuer
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { issuerRef.ServeHTTP(w, r) }))
	defer hs.Close()
	_, port, _ := splitPort(hs.Listener.Addr().String())
	p.Start(acmetest.Options{HTTPPort: port, Resolver: acmetest.Resolver(t, "127.0.0.1")})
	issuerRef = issuer(t, p, t.TempDir(), nil)

	const host = "validated.example.test"
	cert, err := issuerRef.Certificate(host)
	if err != nil {
		t.Fatalf("real HTTP-01 validation through the handler: %v", err)
	}
	verify(t, p.Roots(), host, cert.Certificate)

	// Nothing is in progress now, so no token answers.
	req, _ := http.NewRequest("GET", hs.URL+acme.ChallengePrefix+"anything", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown token: %d", resp.StatusCode)
	}
}

func splitPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	return host, n, err
}
