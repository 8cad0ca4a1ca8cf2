package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// A launched site is served over h2 by the edge's fast path: files, the
// answers of the handler for other methods, 421 for another host on the
// site's connection; the API's host over h2 is net/http's.
func TestLaunchedSiteOverH2(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	bundle := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	done := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	host := strings.Split(strings.TrimPrefix(done["previewUrl"].(string), "https://"), ":")[0]

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ts.CARootPEM())
	addr := ts.HTTPSAddr()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		Protocols:       new(http.Protocols),
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	tr.Protocols.SetHTTP2(true)
	c := &http.Client{Transport: tr}
	do := func(method, url, hostHeader string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if hostHeader != "" {
			req.Host = hostHeader
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: %s", method, url, resp.Proto)
		}
		return resp, string(b)
	}
	if resp, body := do("GET", "https://"+host+"/", ""); resp.StatusCode != 200 || !strings.Contains(body, "Hello from Acme") || resp.Header.Get("Date") == "" {
		t.Fatalf("index: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := do("POST", "https://"+host+"/", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, body := do("GET", "https://"+host+"/missing", ""); resp.StatusCode != 404 || !strings.Contains(body, "Not here") {
		t.Fatalf("404 page: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do("GET", "https://"+host+"/", "localhost"); resp.StatusCode != 421 {
		t.Fatalf("another host on the site's connection: %d", resp.StatusCode)
	}
	if resp, _ := do("GET", "https://localhost/healthz", ""); resp.StatusCode != 200 {
		t.Fatalf("API over h2: %d", resp.StatusCode)
	}
}
