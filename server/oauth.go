package server

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/oauth"
	"github.com/pierhq/pier/server/internal/sandbox"
	"github.com/pierhq/pier/server/internal/store"
)

// MCPURL is the MCP endpoint's URL: the protected resource that OAuth
// access tokens name as their audience.
func (s *Server) MCPURL() string {
	u := s.cfg.APIURL
	if u == "" {
		u = s.BaseURL()
	}
	return strings.TrimRight(u, "/") + "/mcp"
}

// newOAuth builds the authorization server. Its issuer is the base URL;
// the MCP endpoint (resource) and the REST API accept its tokens.
func newOAuth(st *store.Store, log *slog.Logger, now func() time.Time, issuer, resource func() string) *oauth.Server {
	return oauth.New(oauth.Config{Store: st, Log: log, Now: now, Issuer: issuer, Resource: resource})
}

// mcpCredentials checks the credential an MCP request carries before any
// of it is served, so that a dead key or token is a 401 that sends the
// client to sign in again. A sandbox capability is no agent credential:
// only the sandbox operation it is sent to can check it.
func mcpCredentials(api *httpapi.Handler) func(ctx context.Context, header string) error {
	return func(ctx context.Context, header string) error {
		if _, token, ok := strings.Cut(header, " "); ok && strings.HasPrefix(token, sandbox.CapabilityPrefix) {
			return nil
		}
		_, err := api.Authenticate(ctx, header)
		return err
	}
}

// purgeOAuth drops expired authorization requests and tokens.
func purgeOAuth(ctx context.Context, st *store.Store, now time.Time, log *slog.Logger) {
	if n, err := st.OAuth().Purge(ctx, now); err != nil {
		log.Warn("purging OAuth records", "err", err)
	} else if n > 0 {
		log.Info("purged OAuth records", "count", n)
	}
}
