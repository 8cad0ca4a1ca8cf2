package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/mcp"
)

// wire sets headers on every request the SDK client sends and keeps what
// it saw, so the test can check the transport as well as the results.
type wire struct {
	header http.Header
	base   http.RoundTripper

	mu        sync.Mutex
	exchanges []exchange
}

type exchange struct {
	method, protocolVersion string
	status                  int
	sessionID               string
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range w.header {
		r.Header[k] = vs
	}
	resp, err := w.base.RoundTrip(r)
	if err == nil {
		w.mu.Lock()
		w.exchanges = append(w.exchanges, exchange{r.Method, r.Header.Get("Mcp-Protocol-Version"), resp.StatusCode, resp.Header.Get("Mcp-Session-Id")})
		w.mu.Unlock()
	}
	return resp, err
}

func connect(t *testing.T, base string, header http.Header, opts *mcpsdk.ClientSessionOptions) (*mcpsdk.ClientSession, *wire) {
	t.Helper()
	w := &wire{header: header, base: http.DefaultTransport}
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "pier-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcpsdk.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: w},
	}, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, w
}

// structured returns a tool result's structuredContent, checking that its
// text content carries the same JSON.
func structured(t *testing.T, res *mcpsdk.CallToolResult) any {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatalf("no structuredContent: %+v", res)
	}
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(res.Content))
	}
	text, ok := res.Content[0].(*mcpsdk.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	var fromText any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		t.Fatalf("text content is not JSON: %v", err)
	}
	if !jsonEqual(fromText, res.StructuredContent) {
		t.Fatalf("text and structuredContent differ:\n%s\n%v", text.Text, res.StructuredContent)
	}
	return res.StructuredContent
}

func validate(t *testing.T, schema string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	var doc any
	json.Unmarshal(b, &doc)
	if err := contracttest.Schema(t, schema).Validate(doc); err != nil {
		t.Fatalf("does not match /schemas/%s: %v\n%s", schema, err, b)
	}
}

// The official Go SDK's client connects, lists every tool, and gets from
// each call the envelope REST answers the same input with.
func TestGoSDKClient(t *testing.T) {
	s := testserver.Start(t, server.Config{})
	base := s.URL
	key := s.Key(t, "read", "quote")

	anon, w := connect(t, base, nil, nil)
	if v := anon.InitializeResult().ProtocolVersion; v != "2025-03-26" {
		t.Fatalf("negotiated %s, want 2025-03-26", v)
	}

	t.Run("tools/list", func(t *testing.T) { toolsListMatchesTheTable(t, anon) })
	anonymous := []struct {
		name, tool   string
		args         map[string]any
		method, path string
	}{
		{"search_domains anonymously", "search_domains",
			map[string]any{"q": "acme", "tldAllowlist": []string{"org", "dev", "com"}, "maxFirstYearPriceUsd": 50, "includeExotic": false},
			"GET", "/v1/domains/search?q=acme&tldAllowlist=org,dev,com&maxFirstYearPriceUsd=50&includeExotic=false"},
		{"estimate anonymously", "estimate",
			map[string]any{"workload": "database_backed_app", "monthlyRequests": 2000000},
			"POST", "/v1/estimate"},
	}
	for _, tt := range anonymous {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.method == "POST" {
				body = tt.args
			}
			toolAnswersAsREST(t, anon, base, tt.tool, tt.args, tt.method, tt.path, body)
		})
	}

	quote := map[string]any{"projectId": "prj_x", "items": []any{map[string]any{"kind": "domain", "domain": "acme.dev"}}}
	t.Run("create_quote without a key", func(t *testing.T) { governedToolWantsSignIn(t, base, quote) })
	t.Run("create_quote with a key", func(t *testing.T) { governedToolTakesTheKey(t, base, key, quote) })
	t.Run("invalid arguments", func(t *testing.T) { unknownArgumentIsRefused(t, anon) })
	w.sessionlessAndVersioned(t)
}

// toolsListMatchesTheTable wants tools/list to name every tool of the
// table, on one page, with its title, annotations and input schema.
func toolsListMatchesTheTable(t *testing.T, cs *mcpsdk.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextCursor != "" {
		t.Errorf("tools/list is paginated (%q); all tools should fit one page", res.NextCursor)
	}
	got := map[string]*mcpsdk.Tool{}
	for _, tool := range res.Tools {
		got[tool.Name] = tool
	}
	if len(got) != len(mcp.Tools) {
		t.Errorf("%d tools listed, the table has %d", len(got), len(mcp.Tools))
	}
	for _, want := range mcp.Tools {
		tool, ok := got[want.Name]
		if !ok {
			t.Errorf("%s is not listed", want.Name)
			continue
		}
		a := tool.Annotations
		if tool.Title != want.Title || tool.Description != want.Description || a == nil || a.Title != want.Title ||
			a.ReadOnlyHint != want.ReadOnly || a.DestructiveHint == nil || *a.DestructiveHint != want.Destructive ||
			a.IdempotentHint != want.Idempotent {
			t.Errorf("%s: listed as %+v with annotations %+v, want %+v", want.Name, tool, a, want)
		}
		var schema any
		json.Unmarshal([]byte(want.InputSchema), &schema)
		if !jsonEqual(tool.InputSchema, schema) {
			t.Errorf("%s: inputSchema differs from the table's", want.Name)
		}
	}
}

// toolAnswersAsREST calls tool with args and wants the envelope REST
// answers at method and path with 200.
func toolAnswersAsREST(t *testing.T, cs *mcpsdk.ClientSession, base, tool string, args map[string]any, method, path string, body any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("isError: %v", res.StructuredContent)
	}
	status, rest := restJSON(t, base, method, path, body, nil)
	if got := structured(t, res); status != 200 || !jsonEqual(got, rest) {
		t.Fatalf("MCP and REST differ:\n%v\n%v", got, rest)
	}
	validate(t, "envelope.json", res.StructuredContent)
}

// A governed tool without credentials is refused at the transport with
// 401 and the challenge that starts an OAuth sign-in; the SDK client
// reports it as an error and closes, so it gets a connection of its own.
func governedToolWantsSignIn(t *testing.T, base string, quote map[string]any) {
	t.Helper()
	bare, _ := connect(t, base, nil, nil)
	if _, err := bare.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "create_quote", Arguments: quote}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("want Unauthorized, got %v", err)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "create_quote", "arguments": quote}})
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env any
	json.NewDecoder(resp.Body).Decode(&env)
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 401 || !strings.Contains(challenge, `/.well-known/oauth-protected-resource"`) || strings.Contains(challenge, "invalid_token") {
		t.Fatalf("%d %q", resp.StatusCode, challenge)
	}
	validate(t, "error.json", env)
	if env.(map[string]any)["blockedBy"] != "auth:missing_credentials" {
		t.Fatalf("%v", env)
	}
}

// governedToolTakesTheKey calls create_quote with a key and wants the
// envelope REST answers, from the operation rather than from auth.
func governedToolTakesTheKey(t *testing.T, base, key string, quote map[string]any) {
	t.Helper()
	keyed, _ := connect(t, base, http.Header{"Authorization": {"Bearer " + key}}, nil)
	res, err := keyed.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "create_quote", Arguments: quote})
	if err != nil {
		t.Fatal(err)
	}
	env := structured(t, res)
	status, rest := restJSON(t, base, "POST", "/v1/quotes", quote, http.Header{"Authorization": {"Bearer " + key}})
	if res.IsError != (status >= 400) || !jsonEqual(env, rest) {
		t.Fatalf("MCP and REST differ:\n%v %v\n%d %v", res.IsError, env, status, rest)
	}
	blockedBy := env.(map[string]any)["blockedBy"]
	if blockedBy == "auth:missing_credentials" || blockedBy == "auth:invalid_credentials" {
		t.Fatalf("the key did not reach the operation: %v", env)
	}
	if status == 501 && blockedBy != "plan:not_implemented" {
		t.Fatalf("501 without plan:not_implemented: %v", env)
	}
	validate(t, "error.json", env)
}

func unknownArgumentIsRefused(t *testing.T, cs *mcpsdk.ClientSession) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "search_domains", Arguments: map[string]any{"q": "acme", "colour": "blue"}})
	if err != nil {
		t.Fatal(err)
	}
	env := structured(t, res)
	validate(t, "error.json", env)
	if !res.IsError || env.(map[string]any)["blockedBy"] != "input:unknown_field" {
		t.Fatalf("isError %v: %v", res.IsError, env)
	}
}

// sessionlessAndVersioned checks the transport as the client saw it: no
// session id ever, the version it negotiated sent back on every request
// after initialize, and the standalone SSE stream (GET) refused with 405.
func (w *wire) sessionlessAndVersioned(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	sawGET := false
	for i, x := range w.exchanges {
		if x.sessionID != "" {
			t.Errorf("exchange %d carried Mcp-Session-Id %q", i, x.sessionID)
		}
		switch x.method {
		case "GET":
			sawGET = true
			if x.status != 405 {
				t.Errorf("GET answered %d, want 405", x.status)
			}
		case "POST":
			if x.status != 200 && x.status != 202 {
				t.Errorf("POST answered %d", x.status)
			}
		}
		if i > 0 && x.method == "POST" && x.protocolVersion != "2025-03-26" && x.protocolVersion != "" {
			t.Errorf("exchange %d sent MCP-Protocol-Version %q", i, x.protocolVersion)
		}
	}
	if !sawGET {
		t.Log("the client did not open a standalone SSE stream")
	}
}

// Clients asking for other protocol versions, including the SDK's own
// default (which probes the 2026-07-28 discovery first), end on 2025-03-26.
func TestGoSDKClientVersions(t *testing.T) {
	base := testserver.Start(t, server.Config{}).URL
	for _, v := range []string{"", "2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run("asking "+v, func(t *testing.T) {
			var opts *mcpsdk.ClientSessionOptions
			if v != "" {
				opts = &mcpsdk.ClientSessionOptions{ProtocolVersion: v}
			}
			cs, _ := connect(t, base, nil, opts)
			if got := cs.InitializeResult().ProtocolVersion; got != "2025-03-26" {
				t.Fatalf("negotiated %s", got)
			}
			if err := cs.Ping(context.Background(), nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "search_domains", Arguments: map[string]any{"q": "acme"}})
			if err != nil || res.IsError {
				t.Fatalf("search_domains: %v %+v", err, res)
			}
		})
	}
}
