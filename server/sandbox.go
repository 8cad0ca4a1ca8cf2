package server

import (
	"context"
	"log/slog"

	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/store"
)

// openSandbox loads the sandbox's keys (created on first use) and publishes
// the reference release when none is published yet, as a first start does.
// A failed publication leaves the manifest pending and the server running.
func openSandbox(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger, baseURL func() string) (*sandbox.Service, error) {
	sb, err := newSandbox(ctx, cfg, st, log, baseURL)
	if err != nil {
		return nil, err
	}
	if err := sb.EnsureReference(ctx); err != nil {
		log.Error("publishing the sandbox reference release; the manifest stays pending", "err", err)
	}
	return sb, nil
}
