package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// serveOn runs a real server on dir, on ephemeral loopback ports, until the
// benchmark ends. Its log is discarded: a benchmark's log is always shown.
func serveOn(b testing.TB, dir string) *server.Server {
	b.Helper()
	s, stop, err := testserver.Serve(server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stop() })
	return s
}

// siteClient reaches the server's TLS listener for any host name,
// trusting only its local CA; every request is a new visitor (no
// kept-alive connections).
func siteClient(s *server.Server) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CARootPEM())
	tlsAddr := s.HTTPSAddr()
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, tlsAddr)
		},
	}}
}
