package server

import (
	"context"
	"strings"

	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/oauth"
	"github.com/pierhq/pier/server/internal/sandbox"
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
// the MCP endpoint and the REST API accept its tokens.
func (s *Server) newOAuth() *oauth.Server {
	return oauth.New(oauth.Config{Store: s.store, Log: s.log, Now: s.cfg.Now, Issuer: s.BaseURL, Resource: s.MCPURL})
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
func (s *Server) purgeOAuth(ctx context.Context) {
	if n, err := s.store.OAuth().Purge(ctx, s.cfg.Now()); err != nil {
		s.log.Warn("purging OAuth records", "err", err)
	} else if n > 0 {
		s.log.Info("purged OAuth records", "count", n)
	}
}
