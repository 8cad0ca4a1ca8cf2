package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/acme/acmetest"
	"github.com/pierhq/pier/server/internal/service"
)

// TestLaunchPreviewWithACME runs Pebble in-process and a server configured
// with its directory. Pebble's VA really fetches the HTTP-01 challenge from
// the server's HTTP listener (every name resolves to loopback through a
// test resolver), and the preview host is then served over TLS with a chain
// that verifies against Pebble's root and not against the local CA.
func TestLaunchPreviewWithACME(t *testing.T) {
	pebble := acmetest.New(t)
	ts := start(t, server.Config{ACMEDirectory: pebble.DirectoryURL, ACMECAFile: pebble.CAFile, ACMEEmail: "ops@example.test"})
	_, port, _ := net.SplitHostPort(ts.Addr())
	httpPort, _ := strconv.Atoi(port)
	pebble.Start(acmetest.Options{HTTPPort: httpPort, Resolver: acmetest.Resolver(t, "127.0.0.1")})

	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	bundle := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "shop", "target": "edge", "bundleId": bundle}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	done := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if done["httpsReady"].(map[string]any)["preview"] != true {
		t.Fatalf("https ready %v", done["httpsReady"])
	}
	host := strings.Split(strings.TrimPrefix(done["previewUrl"].(string), "https://"), ":")[0]

	roots := pebble.Roots()
	fetch := func(pool *x509.CertPool) (*http.Response, error) {
		c := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, ts.HTTPSAddr())
			},
		}}
		return c.Get("https://" + host + "/")
	}
	resp, err := fetch(roots)
	if err != nil {
		t.Fatalf("TLS to the preview host, trusting Pebble's root: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello from Acme") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	chain := resp.TLS.VerifiedChains[0]
	if chain[0].DNSNames[0] != host || len(chain) < 3 || !roots.Equal(poolOf(chain[len(chain)-1])) {
		t.Fatalf("chain %v does not run from %s through Pebble's intermediate to its root", names(chain), host)
	}

	// The local CA did not issue it.
	local := x509.NewCertPool()
	local.AppendCertsFromPEM(ts.CARootPEM())
	if _, err := fetch(local); err == nil {
		t.Fatal("the preview host's certificate verifies against the local CA")
	}
	// The API host, which no ACME server issues for, keeps the local CA.
	conn, err := tls.Dial("tcp", ts.HTTPSAddr(), &tls.Config{RootCAs: local, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("API host over TLS: %v", err)
	}
	conn.Close()

	// Challenges are answered only while in progress.
	req, _ := http.NewRequest("GET", "http://"+ts.Addr()+"/.well-known/acme-challenge/unknown", nil)
	req.Host = host
	cr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := io.ReadAll(cr.Body)
	cr.Body.Close()
	if cr.StatusCode != 404 || bytes.Contains(cb, []byte("Not here")) {
		t.Fatalf("unknown challenge: %d %s (must not reach the site)", cr.StatusCode, cb)
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

func names(chain []*x509.Certificate) []string {
	var out []string
	for _, c := range chain {
		out = append(out, c.Subject.CommonName)
	}
	return out
}
