package mcp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func envelopeOf(t *testing.T, r response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%d: not JSON: %s", r.status, r.body)
	}
	return errorEnvelope(t, m)
}

// The transport's HTTP rules, each answered with the typed error envelope.
func TestHTTPRules(t *testing.T) {
	base := testserver.Start(t, server.Config{MCPAllowedOrigins: []string{"https://console.pier.example"}}).URL
	port := base[strings.LastIndex(base, ":")+1:]
	with := func(k, v string) http.Header {
		h := mcpHeaders()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}

	for _, tc := range []struct {
		name      string
		method    string
		header    http.Header
		body      string
		status    int
		blockedBy string
	}{
		{"GET is not allowed", "GET", http.Header{"Accept": {"text/event-stream"}}, "", 405, "input:method_not_allowed"},
		{"DELETE is not allowed", "DELETE", nil, "", 405, "input:method_not_allowed"},
		{"PUT is not allowed", "PUT", mcpHeaders(), initialize, 405, "input:method_not_allowed"},
		{"no Accept", "POST", with("Accept", ""), initialize, 406, "input:not_acceptable"},
		{"Accept without text/event-stream", "POST", with("Accept", "application/json"), initialize, 406, "input:not_acceptable"},
		{"Accept without application/json", "POST", with("Accept", "text/event-stream"), initialize, 406, "input:not_acceptable"},
		{"Accept refusing one with q=0", "POST", with("Accept", "application/json, text/event-stream;q=0"), initialize, 406, "input:not_acceptable"},
		{"Accept in two headers", "POST", http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json", "text/event-stream"}}, initialize, 200, ""},
		{"Accept */*", "POST", with("Accept", "*/*"), initialize, 406, ""},
		{"Content-Type text/plain", "POST", with("Content-Type", "text/plain"), initialize, 415, "input:unsupported_media_type"},
		{"no Content-Type", "POST", with("Content-Type", ""), initialize, 415, "input:unsupported_media_type"},
		{"Content-Type with charset", "POST", with("Content-Type", "application/json; charset=utf-8"), initialize, 200, ""},
		{"foreign Origin", "POST", with("Origin", "http://evil.example"), initialize, 403, "auth:forbidden_origin"},
		{"rebound Origin on the server's port", "POST", with("Origin", "http://evil.example:"+port), initialize, 403, "auth:forbidden_origin"},
		{"preview site Origin", "POST", with("Origin", "http://site.localhost:"+port), initialize, 403, "auth:forbidden_origin"},
		{"loopback Origin on another port", "POST", with("Origin", "http://localhost:1"), initialize, 403, "auth:forbidden_origin"},
		{"opaque Origin", "POST", with("Origin", "null"), initialize, 403, "auth:forbidden_origin"},
		{"same-origin", "POST", with("Origin", base), initialize, 200, ""},
		{"loopback alias of the server", "POST", with("Origin", "http://localhost:"+port), initialize, 200, ""},
		{"configured Origin", "POST", with("Origin", "https://console.pier.example"), initialize, 200, ""},
		{"configured Origin, default port spelt out", "POST", with("Origin", "https://Console.Pier.Example:443"), initialize, 200, ""},
		{"unsupported protocol version header", "POST", with("Mcp-Protocol-Version", "2025-06-18"), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 400, "input:invalid"},
		{"negotiated protocol version header", "POST", with("Mcp-Protocol-Version", "2025-03-26"), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, ""},
		{"JSON but not a message", "POST", mcpHeaders(), `42`, 400, "input:invalid"},
		{"empty batch", "POST", mcpHeaders(), `[]`, 400, "input:invalid"},
		{"notification only", "POST", mcpHeaders(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ""},
		{"a response only", "POST", mcpHeaders(), `{"jsonrpc":"2.0","id":"s1","result":{}}`, 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, tc.method, base+"/mcp", tc.body, tc.header)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.blockedBy != "" {
				if env := envelopeOf(t, r); env["blockedBy"] != tc.blockedBy {
					t.Fatalf("blockedBy %v, want %s", env["blockedBy"], tc.blockedBy)
				}
			}
			if tc.status == 405 && r.header.Get("Allow") != "POST" {
				t.Errorf("405 with Allow %q, want POST", r.header.Get("Allow"))
			}
			if tc.status == 202 && len(r.body) != 0 {
				t.Errorf("202 with a body: %s", r.body)
			}
			if tc.status == 200 && r.header.Get("Content-Type") != "application/json" {
				t.Errorf("answered with %q; the endpoint answers JSON only", r.header.Get("Content-Type"))
			}
		})
	}
}

// Malformed JSON is a JSON-RPC parse error: -32700 with a null id, in a
// JSON-RPC body, not Pier's envelope.
func TestParseErrorIsJSONRPC(t *testing.T) {
	base := testserver.Start(t, server.Config{}).URL
	for _, body := range []string{`{"jsonrpc":`, `[{"jsonrpc":"2.0","id":1,"method":"ping"},`, "\xff"} {
		r := send(t, "POST", base+"/mcp", body, mcpHeaders())
		if r.status != 400 || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%q: status %d, %s", body, r.status, r.header.Get("Content-Type"))
		}
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("%q: not JSON: %s", body, r.body)
		}
		id, hasID := m["id"]
		e, _ := m["error"].(map[string]any)
		if m["jsonrpc"] != "2.0" || !hasID || id != nil || e["code"] != float64(-32700) || e["message"] == "" {
			t.Errorf("%q: %s, want a -32700 error with a null id", body, r.body)
		}
	}
}

// initialize negotiates 2025-03-26 whatever the client asks for.
func TestInitializeNegotiates20250326(t *testing.T) {
	base := testserver.Start(t, server.Config{}).URL
	for _, asked := range []string{"2025-03-26", "2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"} {
		m := rpc(t, base, "initialize", map[string]any{
			"protocolVersion": asked, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"},
		}, nil)
		res := m["result"].(map[string]any)
		if res["protocolVersion"] != "2025-03-26" {
			t.Errorf("asked %s, negotiated %v", asked, res["protocolVersion"])
		}
		if _, ok := res["capabilities"].(map[string]any)["tools"]; !ok {
			t.Errorf("no tools capability: %v", res["capabilities"])
		}
		if res["serverInfo"].(map[string]any)["name"] != "pier" {
			t.Errorf("serverInfo %v", res["serverInfo"])
		}
	}
	if m := rpc(t, base, "initialize", map[string]any{"capabilities": map[string]any{}}, nil); m["error"].(map[string]any)["code"] != float64(-32602) {
		t.Errorf("initialize without protocolVersion: %v", m)
	}
}

func TestJSONRPCMethods(t *testing.T) {
	base := testserver.Start(t, server.Config{}).URL
	if m := rpc(t, base, "ping", nil, nil); !jsonEqual(m["result"], map[string]any{}) {
		t.Errorf("ping: %v", m)
	}
	for _, tc := range []struct {
		method string
		params any
		code   float64
	}{
		{"resources/list", nil, -32601},
		{"logging/setLevel", map[string]any{"level": "info"}, -32601},
		{"tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}}, -32602},
		{"tools/call", map[string]any{"arguments": map[string]any{}}, -32602},
		{"tools/call", map[string]any{"name": 7}, -32602},
		{"tools/call", map[string]any{"name": "search_domains", "arguments": "q=acme"}, -32602},
	} {
		m := rpc(t, base, tc.method, tc.params, nil)
		e, ok := m["error"].(map[string]any)
		if !ok || e["code"] != tc.code {
			t.Errorf("%s %v: %v, want error %v", tc.method, tc.params, m, tc.code)
		}
	}

	// A lone message that is not a valid request is refused at the HTTP
	// level, since its id cannot be answered to.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","method":7}`,
	} {
		r := post(t, base, body, mcpHeaders())
		if r.status != 400 || envelopeOf(t, r)["blockedBy"] != "input:invalid" {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
}

// 2025-03-26 lets a client batch messages; notifications get no answer.
func TestBatch(t *testing.T) {
	base := testserver.Start(t, server.Config{}).URL
	r := post(t, base, `[`+initialize+`,{"jsonrpc":"2.0","method":"notifications/initialized"},`+
		`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme"}}},`+
		`{"jsonrpc":"2.0","id":3,"method":"nope"},{"jsonrpc":"1.0","id":4,"method":"ping"}]`, mcpHeaders())
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
		t.Fatalf("%d %v %s", r.status, err, r.body)
	}
	if len(out) != 4 || out[0]["id"] != float64(1) || out[1]["id"] != "b" || out[2]["id"] != float64(3) || out[3]["id"] != nil {
		t.Fatalf("batch answers %s", r.body)
	}
	if out[1]["result"].(map[string]any)["isError"] == true || out[2]["error"].(map[string]any)["code"] != float64(-32601) ||
		out[3]["error"].(map[string]any)["code"] != float64(-32600) {
		t.Fatalf("batch answers %s", r.body)
	}
	if r := post(t, base, `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, mcpHeaders()); r.status != 202 {
		t.Fatalf("batch of notifications: %d %s", r.status, r.body)
	}
}

// tools/list entries carry only the members the MCP schema defines for a
// tool and its annotations; anything of Pier's own would go under _meta.
func TestToolsListCarriesOnlyMCPFields(t *testing.T) {
	base := testserver.Start(t, server.Config{}).URL
	toolFields := map[string]bool{"name": true, "title": true, "description": true, "inputSchema": true, "outputSchema": true, "annotations": true, "_meta": true}
	annotationFields := map[string]bool{"title": true, "readOnlyHint": true, "destructiveHint": true, "idempotentHint": true, "openWorldHint": true}
	m := rpc(t, base, "tools/list", map[string]any{}, nil)
	tools := m["result"].(map[string]any)["tools"].([]any)
	if len(tools) == 0 {
		t.Fatal("no tools")
	}
	for _, x := range tools {
		tool := x.(map[string]any)
		for k := range tool {
			if !toolFields[k] {
				t.Errorf("tool %v carries %q, which the MCP schema does not define", tool["name"], k)
			}
		}
		if a, ok := tool["annotations"].(map[string]any); ok {
			for k := range a {
				if !annotationFields[k] {
					t.Errorf("tool %v: annotation %q is not an MCP annotation", tool["name"], k)
				}
			}
		}
		if s, _ := tool["inputSchema"].(map[string]any); s["type"] != "object" {
			t.Errorf("tool %v: inputSchema type %v", tool["name"], s["type"])
		}
	}
}
