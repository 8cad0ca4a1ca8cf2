// Package tlsca is the local certificate authority that the embedded server
// uses for HTTPS: a P-256 root kept in the data directory (key 0600) that
// issues short-lived leaf certificates for preview hosts and launched
// domains on demand. `pier ca` prints the root so clients can trust it.
package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/cache"
)

// Name is the CA's identifier in CAA records.
const Name = "pier.local"

// CA issues certificates.
type CA struct {
	root    *x509.Certificate
	key     *ecdsa.PrivateKey
	rootPEM []byte
	now     func() time.Time

	mu    sync.Mutex // serialises issuance
	cache *cache.Cache[string, *tls.Certificate]
}

// maxCached bounds the leaves kept in memory; one is issued again when
// needed.
const maxCached = 10_000

// LoadOrCreate opens the CA in dir, creating it on first use.
func LoadOrCreate(dir string, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certPath, keyPath := filepath.Join(dir, "root.pem"), filepath.Join(dir, "root.key")
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist) {
		var err error
		certPEM, keyPEM, err = createRoot(now())
		if err != nil {
			return nil, err
		}
		// Key first, so that a crash never leaves a root without its key.
		if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := writeFile(certPath, certPEM, 0o644); err != nil {
			return nil, err
		}
	} else if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("tlsca: %s holds half a CA: %v %v", dir, err1, err2)
	}
	return FromPEM(certPEM, keyPEM, now)
}

// Files reads back what LoadOrCreate keeps: the root and its key, PEM.
func (c *CA) Files() (certPEM, keyPEM []byte, err error) {
	der, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		return nil, nil, err
	}
	return c.rootPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Save writes the CA into dir, replacing what is there: a replica adopting
// the CA its database holds.
func (c *CA) Save(dir string) error {
	certPEM, keyPEM, err := c.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "root.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "root.pem"), certPEM, 0o644)
}

// FromPEM is a CA from its root certificate and key.
func FromPEM(certPEM, keyPEM []byte, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("tlsca: unreadable PEM")
	}
	root, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &CA{root: root, key: key, rootPEM: certPEM, now: now, cache: cache.New[string, *tls.Certificate](maxCached, 0, nil)}, nil
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func createRoot(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Pier local CA", Organization: []string{"Pier"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// RootPEM is the root certificate, for clients to trust.
func (c *CA) RootPEM() []byte { return c.rootPEM }

// Pool is a certificate pool holding the root.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.root)
	return p
}

// Certificate returns a leaf for host, issuing one when none is cached or
// the cached one is within a day of expiring.
func (c *CA) Certificate(host string) (*tls.Certificate, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	c.mu.Lock()
	defer c.mu.Unlock()
	if cert, ok := c.cache.Get(host); ok && c.now().Before(cert.Leaf.NotAfter.Add(-24*time.Hour)) {
		return cert, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := c.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(0, 0, 30),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.root, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	cert := &tls.Certificate{Certificate: [][]byte{der, c.root.Raw}, PrivateKey: key, Leaf: leaf}
	c.cache.Put(host, cert)
	return cert, nil
}
