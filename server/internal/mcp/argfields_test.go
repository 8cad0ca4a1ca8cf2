package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// A refusal the REST validator makes names the tool's argument over MCP
// (arguments.email), where REST names the request's member (body.email):
// an agent fixes the argument it sent. The rest of the envelope is REST's.
func TestRESTRefusalsNameArgumentsOverMCP(t *testing.T) {
	s := testserver.Start(t, server.Config{})
	base := s.URL
	args := map[string]any{"email": "not-an-address", "organizationName": "Acme"}
	res := callTool(t, base, "create_signup", args, nil)
	env := errorEnvelope(t, res["structuredContent"])
	if res["isError"] != true || env["blockedBy"] != "input:invalid" {
		t.Fatalf("create_signup with a bad email: %v", res)
	}
	details, _ := env["details"].([]any)
	if len(details) == 0 {
		t.Fatalf("no details: %v", env)
	}
	for _, d := range details {
		if f := d.(map[string]any)["field"]; f != "arguments.email" {
			t.Errorf("detail field %v, want arguments.email", f)
		}
	}
	if msg, _ := env["message"].(string); strings.Contains(msg, "body.") {
		t.Errorf("message names the request's body: %q", msg)
	}
	status, rest := restJSON(t, base, "POST", "/v1/signup", args, nil)
	restEnv, _ := rest.(map[string]any)
	if status != 400 || !strings.Contains(fmtJSON(restEnv["details"]), `"body.email"`) {
		t.Errorf("REST: %d %v", status, rest)
	}
	if restEnv["blockedBy"] != env["blockedBy"] || !jsonEqual(restEnv["actions"], env["actions"]) || restEnv["retryable"] != env["retryable"] {
		t.Errorf("MCP's envelope differs from REST's beyond the field names:\nMCP  %v\nREST %v", env, restEnv)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
