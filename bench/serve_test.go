package bench

import (
	"io"
	"log/slog"
	"testing"

	"github.com/pierhq/pier/internal/testserver"
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
