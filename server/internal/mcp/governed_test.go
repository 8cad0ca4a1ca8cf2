package mcp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// The idempotencyKey argument is the Idempotency-Key header: the same key
// and arguments replay the stored answer, through either door, since both
// reach the same operation as the same caller.
func TestIdempotencyKeyOverMCP(t *testing.T) {
	s := testserver.Start(t, server.Config{})
	base := s.URL
	key := s.Key(t, "read", "quote")
	auth := http.Header{"Authorization": {"Bearer " + key}}
	args := map[string]any{
		"projectId": "prj_missing", "idempotencyKey": "mcp-key-1",
		"items": []any{map[string]any{"kind": "domain", "domain": "acme.dev"}},
	}

	first := callTool(t, base, "create_quote", args, auth)
	env := first["structuredContent"].(map[string]any)
	if first["isError"] != true || env["replayed"] != nil {
		t.Fatalf("first call: %v", first)
	}
	second := callTool(t, base, "create_quote", args, auth)
	replay := second["structuredContent"].(map[string]any)
	if replay["replayed"] != true {
		t.Fatalf("same key and arguments did not replay: %v", second)
	}
	delete(replay, "replayed")
	if !jsonEqual(replay, env) {
		t.Fatalf("replay differs:\n%v\n%v", replay, env)
	}

	body, _ := json.Marshal(map[string]any{"projectId": "prj_missing", "items": args["items"]})
	req, _ := http.NewRequest("POST", base+"/v1/quotes", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "mcp-key-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("REST with the key MCP used did not replay: %d %v", resp.StatusCode, resp.Header)
	}

	args["projectId"] = "prj_other"
	reused := callTool(t, base, "create_quote", args, auth)
	if reused["isError"] != true || reused["structuredContent"].(map[string]any)["blockedBy"] != "idempotency:key_reused" {
		t.Fatalf("same key, other arguments: %v", reused)
	}
}

// Anonymous calls are rate limited per client address, as over REST.
func TestRateLimitOverMCP(t *testing.T) {
	base := testserver.Start(t, server.Config{RateLimits: map[string]server.RateLimit{"search": {PerSecond: 0.001, Burst: 2}}}).URL
	for i := range 3 {
		res := callTool(t, base, "search_domains", map[string]any{"q": "acme"}, nil)
		env := res["structuredContent"].(map[string]any)
		if i < 2 && res["isError"] == true {
			t.Fatalf("call %d refused: %v", i, env)
		}
		if i == 2 {
			errorEnvelope(t, env)
			if res["isError"] != true || env["blockedBy"] != "rate:limited" || env["retryable"] != true {
				t.Fatalf("third call: %v", res)
			}
		}
	}
}
