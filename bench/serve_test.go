package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/pierhq/pier/server"
)

// serveOn runs a real server on dir, on ephemeral loopback ports, until the
// benchmark ends.
func serveOn(b testing.TB, dir string) *server.Server {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return s
}
