package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// tlsClients are an HTTP/2 client, an HTTP/1.1 client (which the edge's
// fast path answers) and an HTTP/3 client, all reaching the server's
// listeners for any host name and trusting only its local CA.
func tlsClients(t *testing.T, ts *testServer) (h2, h1, h3 *http.Client) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ts.CARootPEM())
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, ts.HTTPSAddr())
	}
	h2 = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DialContext: dial, ForceAttemptHTTP2: true}}
	h1 = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DialContext: dial,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, ts.HTTP3Addr(), tc, qc)
		},
	}
	t.Cleanup(func() { tr.Close() })
	return h2, h1, &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type answer struct {
	proto  int
	status int
	header http.Header
	body   []byte
}

func fetch(t *testing.T, c *http.Client, url string, h http.Header) answer {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return answer{resp.ProtoMajor, resp.StatusCode, resp.Header, b}
}

// TestHTTP3ServesSitesAsHTTP2 launches a site and asks for its files over
// HTTP/3 and over HTTP/2 (and HTTP/1.1): the same status, headers that
// describe the body and bytes; answers over TLS announce HTTP/3 with
// Alt-Svc; an unknown host gets the same answer over both; shutdown closes
// the UDP socket.
func TestHTTP3ServesSitesAsHTTP2(t *testing.T) {
	ts := start(t, server.Config{})
	_, port, _ := net.SplitHostPort(ts.HTTPSAddr())
	if _, p3, _ := net.SplitHostPort(ts.HTTP3Addr()); p3 != port {
		t.Fatalf("HTTP/3 on %s, HTTPS on %s: want the same port", ts.HTTP3Addr(), ts.HTTPSAddr())
	}
	wantAltSvc := `h3=":` + port + `"; ma=86400`

	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	files := map[string]string{}
	for k, v := range siteFiles {
		files[k] = v
	}
	files["big.txt"] = strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	bundle := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, files), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	done := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	host := strings.Split(strings.TrimPrefix(done["previewUrl"].(string), "https://"), ":")[0]

	h2, h1, h3 := tlsClients(t, ts)
	gz := http.Header{"Accept-Encoding": {"gzip"}}
	for _, c := range []struct {
		url string
		h   http.Header
	}{
		{"https://" + host + "/", nil},
		{"https://" + host + "/style.css", nil},
		{"https://" + host + "/style.css", gz},
		{"https://" + host + "/big.txt", nil},
		{"https://" + host + "/big.txt", gz},
		{"https://" + host + "/missing", nil},
		{"https://nobody.localhost/", nil},
		{"https://nobody.localhost/x", gz},
	} {
		over2 := fetch(t, h2, c.url, c.h)
		over1 := fetch(t, h1, c.url, c.h)
		over3 := fetch(t, h3, c.url, c.h)
		if over2.proto != 2 || over1.proto != 1 || over3.proto != 3 {
			t.Fatalf("%s: protocols %d, %d, %d", c.url, over2.proto, over1.proto, over3.proto)
		}
		for _, o := range []answer{over1, over3} {
			if o.status != over2.status || !bytes.Equal(o.body, over2.body) {
				t.Errorf("%s %v over HTTP/%d: %d, %d bytes; over h2: %d, %d bytes", c.url, c.h, o.proto, o.status, len(o.body), over2.status, len(over2.body))
			}
			for _, k := range []string{"Content-Type", "Content-Encoding", "Content-Length", "Etag", "Vary", "Cache-Control"} {
				if o.header.Get(k) != over2.header.Get(k) {
					t.Errorf("%s %v: %s over HTTP/%d %q, over h2 %q", c.url, c.h, k, o.proto, o.header.Get(k), over2.header.Get(k))
				}
			}
		}
		if over2.header.Get("Alt-Svc") != wantAltSvc || over1.header.Get("Alt-Svc") != wantAltSvc {
			t.Errorf("%s: Alt-Svc over h2 %q, over HTTP/1.1 %q; want %q", c.url, over2.header.Get("Alt-Svc"), over1.header.Get("Alt-Svc"), wantAltSvc)
		}
		if v := over3.header.Get("Alt-Svc"); v != "" {
			t.Errorf("%s: Alt-Svc over h3 %q", c.url, v)
		}
	}
	if b := fetch(t, h3, "https://"+host+"/big.txt", nil).body; string(b) != files["big.txt"] {
		t.Fatalf("big.txt over h3: %d bytes", len(b))
	}

	// Shutdown closes the HTTP/3 listener: no answer, and its port is free.
	addr := ts.HTTP3Addr()
	ts.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := quic.DialAddr(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, nil); err == nil {
		t.Fatal("a QUIC handshake succeeded after shutdown")
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("the HTTP/3 port is still bound after shutdown: %v", err)
	}
	pc.Close()
}

// TestHTTP3Off: --http3-addr off binds no UDP socket and announces
// nothing.
func TestHTTP3Off(t *testing.T) {
	ts := start(t, server.Config{HTTP3Addr: "off"})
	if a := ts.HTTP3Addr(); a != "" {
		t.Fatalf("HTTP/3 listening on %s", a)
	}
	h2, h1, _ := tlsClients(t, ts)
	for _, c := range []*http.Client{h2, h1} {
		if o := fetch(t, c, "https://nobody.localhost/", nil); o.status != 404 || o.header.Get("Alt-Svc") != "" {
			t.Fatalf("HTTP/%d: %d, Alt-Svc %q", o.proto, o.status, o.header.Get("Alt-Svc"))
		}
	}
}
