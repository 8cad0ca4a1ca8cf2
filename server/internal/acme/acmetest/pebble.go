// Package acmetest runs Pebble, Let's Encrypt's test ACME server, in-process
// on loopback for tests: its directory and management endpoints over TLS
// with a certificate made for the run, wired as Pebble's own command wires
// them (memory store, CA, VA, WFE). It is for tests only.
package acmetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
)

// Pebble is an ACME server. Its listener is bound by New, so the directory
// URL is known before Start wires and serves it.
type Pebble struct {
	t   *testing.T
	srv *httptest.Server
	// DirectoryURL is the ACME directory.
	DirectoryURL string
	// CAFile holds the PEM certificate of Pebble's own TLS listener (made
	// for the run), for clients of the directory to trust.
	CAFile string
}

// Options configure the validation authority.
type Options struct {
	// HTTPPort is where the VA fetches HTTP-01 challenges.
	HTTPPort int
	// Resolver is a DNS server (host:port, TCP) the VA resolves names
	// with; empty means the system resolver.
	Resolver string
	// AlwaysValid skips validation (PEBBLE_VA_ALWAYS_VALID).
	AlwaysValid bool
}

// New binds Pebble's listener on loopback and writes CAFile, so a client
// can be configured before Pebble starts.
func New(t *testing.T) *Pebble {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	cert, certPEM := selfSigned(t)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	p := &Pebble{t: t, srv: srv, DirectoryURL: "https://" + srv.Listener.Addr().String() + wfe.DirectoryPath,
		CAFile: filepath.Join(t.TempDir(), "pebble-tls.pem")}
	if err := os.WriteFile(p.CAFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned makes the certificate of Pebble's listener, for 127.0.0.1.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "pebble test listener"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Start wires Pebble and serves it until the test ends. Pebble reads its
// switches from the environment when its parts are built, so they are set
// here with t.Setenv: no random validation sleeps, no rejected nonces, and
// every order needs a fresh authorization (so a challenge is really asked).
func (p *Pebble) Start(o Options) {
	t := p.t
	t.Helper()
	always := "0"
	if o.AlwaysValid {
		always = "1"
	}
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", always)
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0")

	logger := log.New(io.Discard, "", 0)
	if testing.Verbose() {
		w := testLog{t: t, done: &atomic.Bool{}}
		t.Cleanup(func() { w.done.Store(true) })
		logger = log.New(w, "pebble ", 0)
	}
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	validator := va.New(logger, o.HTTPPort, 0, false, o.Resolver, store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 1, 1)
	mux := http.NewServeMux()
	mux.Handle(wfe.RootCertPath, front.ManagementHandler())
	mux.Handle("/", front.Handler())
	p.srv.Config.Handler = mux
	p.srv.StartTLS()
}

// Roots fetches the root that Pebble issues under from its management
// endpoint (/roots/0).
func (p *Pebble) Roots() *x509.CertPool {
	t := p.t
	t.Helper()
	resp, err := p.srv.Client().Get(p.srv.URL + wfe.RootCertPath + "0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if resp.StatusCode != http.StatusOK || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble roots: %d %s", resp.StatusCode, b)
	}
	return pool
}

// testLog sends Pebble's log to the test's; Pebble's goroutines that log
// after the test ended are dropped, since testing panics on a late Log.
type testLog struct {
	t    *testing.T
	done *atomic.Bool
}

func (w testLog) Write(b []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

// Resolver serves DNS over TCP on loopback, answering every A question with
// ip and nothing else, so Pebble's VA reaches this machine for any name.
func Resolver(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}
