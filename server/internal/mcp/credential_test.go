package mcp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// TestCredentialRefusedWhateverTheMessage: a lone message's credential
// check waits for the REST answer (a success proves the key), yet a key
// that does not authenticate is still a 401 with the invalid_token
// challenge for every message, whether REST refused it, never saw it
// (another method, arguments refused first) or would have answered
// without a key; a valid key is answered as before.
func TestCredentialRefusedWhateverTheMessage(t *testing.T) {
	s := testserver.Start(t, server.Config{})
	key := s.Key(t, "read", "quote")
	search := map[string]any{"name": "search_domains", "arguments": map[string]any{"q": "acme", "tldAllowlist": []string{"com"}}}
	messages := []struct {
		name   string
		method string
		params any
	}{
		{"initialize", "initialize", map[string]any{"protocolVersion": "2025-03-26", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}},
		{"ping", "ping", nil},
		{"tools/list", "tools/list", nil},
		{"anonymous tool", "tools/call", search},
		{"agent tool", "tools/call", map[string]any{"name": "list_projects", "arguments": map[string]any{}}},
		{"arguments refused", "tools/call", map[string]any{"name": "search_domains", "arguments": map[string]any{"nope": 1}}},
		{"unknown tool", "tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}}},
		{"unknown method", "nope", nil},
	}
	for _, m := range messages {
		msg := map[string]any{"jsonrpc": "2.0", "id": 7, "method": m.method}
		if m.params != nil {
			msg["params"] = m.params
		}
		body, _ := json.Marshal(msg)
		for _, bad := range []string{"Bearer agk_" + strings.Repeat("x", 40), "Bearer nonsense", "Basic eDp5"} {
			t.Run(m.name+"/"+bad, func(t *testing.T) {
				h := mcpHeaders()
				h.Set("Authorization", bad)
				r := post(t, s.URL, string(body), h)
				var env map[string]any
				json.Unmarshal(r.body, &env)
				if r.status != http.StatusUnauthorized || env["blockedBy"] != "auth:invalid_credentials" ||
					!strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token") {
					t.Fatalf("%d %q %s", r.status, r.header.Get("WWW-Authenticate"), r.body)
				}
			})
		}
		t.Run(m.name+"/valid key", func(t *testing.T) {
			h := mcpHeaders()
			h.Set("Authorization", "Bearer "+key)
			if r := post(t, s.URL, string(body), h); r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	// A batch is checked before any of it runs, as before.
	h := mcpHeaders()
	h.Set("Authorization", "Bearer agk_"+strings.Repeat("y", 40))
	if r := post(t, s.URL, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, h); r.status != http.StatusUnauthorized {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
}
