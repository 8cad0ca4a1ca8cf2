package mcp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/mcp"
)

const nodeSDKVersion = "1.32.2"

// nodeSDK finds node and the TypeScript MCP SDK installed in tools/ (by
// `make tools`). Without them the test is skipped, unless CI=true or
// PIER_TEST_NODE=require, when it fails.
func nodeSDK(t *testing.T) (node, nodeModules string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_NODE") == "require" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set PIER_TEST_NODE=require to fail instead)", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed: %v", err)
	}
	nodeModules, _ = filepath.Abs(filepath.Join("..", "..", "..", "tools", "node_modules"))
	b, err := os.ReadFile(filepath.Join(nodeModules, "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil {
		missing("@modelcontextprotocol/sdk is not installed in tools/ (run npm ci --prefix tools): %v", err)
	}
	var pkg struct{ Version string }
	json.Unmarshal(b, &pkg)
	if pkg.Version != nodeSDKVersion {
		missing("tools/ has @modelcontextprotocol/sdk %s, want %s (run npm ci --prefix tools)", pkg.Version, nodeSDKVersion)
	}
	return node, nodeModules
}

type nodeResult struct {
	IsError           bool `json:"isError"`
	StructuredContent any  `json:"structuredContent"`
	Content           []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// The official TypeScript client connects, lists every tool, and gets the
// same envelopes REST answers.
func TestTypeScriptSDKClient(t *testing.T) {
	node, nodeModules := nodeSDK(t)
	s := testserver.Start(t, server.Config{})
	base := s.URL
	key := s.Key(t, "read", "quote")

	out := runNodeClient(t, node, nodeModules, base, key)
	out.negotiatedAndListedEveryTool(t)
	out.callsAnswerAsREST(t, base, key)
	out.exchangesSessionlessAndJSON(t)
}

// nodeClientRun is what jstest/client.mjs prints: what the TypeScript
// client negotiated, listed and got from each call, and the HTTP
// exchanges it made.
type nodeClientRun struct {
	ProtocolVersion string  `json:"protocolVersion"`
	SessionID       *string `json:"sessionId"`
	ServerInfo      struct {
		Name string `json:"name"`
	} `json:"serverInfo"`
	Tools []struct {
		Name        string         `json:"name"`
		Title       string         `json:"title"`
		InputSchema any            `json:"inputSchema"`
		Annotations map[string]any `json:"annotations"`
	} `json:"tools"`
	NextCursor      *string    `json:"nextCursor"`
	Search          nodeResult `json:"search"`
	Estimate        nodeResult `json:"estimate"`
	QuoteWithoutKey struct {
		Thrown  bool   `json:"thrown"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"quoteWithoutKey"`
	UnauthorizedExchange *struct {
		Status          int    `json:"status"`
		WWWAuthenticate string `json:"wwwAuthenticate"`
	} `json:"unauthorizedExchange"`
	QuoteWithKey nodeResult `json:"quoteWithKey"`
	Exchanges    []struct {
		Method      string  `json:"method"`
		Status      int     `json:"status"`
		ContentType *string `json:"contentType"`
		SessionID   *string `json:"sessionId"`
	} `json:"exchanges"`
}

// runNodeClient runs jstest/client.mjs against base with key and answers
// what it printed.
func runNodeClient(t *testing.T, node, nodeModules, base, key string) nodeClientRun {
	t.Helper()
	// The script imports the SDK by name, so it runs from a directory whose
	// node_modules is the one in tools/.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("jstest", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nodeModules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"))
	cmd.Env = append(os.Environ(), "PIER_MCP_URL="+base+"/mcp", "PIER_API_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.Bytes())
	}
	var out nodeClientRun
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node printed %v: %s\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	return out
}

// negotiatedAndListedEveryTool wants 2025-03-26 without a session, and
// every tool of the table listed on one page as the table has it.
func (out nodeClientRun) negotiatedAndListedEveryTool(t *testing.T) {
	t.Helper()
	if out.ProtocolVersion != "2025-03-26" || out.SessionID != nil || out.ServerInfo.Name != "pier" {
		t.Errorf("negotiated %q, session %v, server %q", out.ProtocolVersion, out.SessionID, out.ServerInfo.Name)
	}
	if out.NextCursor != nil || len(out.Tools) != len(mcp.Tools) {
		t.Errorf("%d tools listed (cursor %v), the table has %d", len(out.Tools), out.NextCursor, len(mcp.Tools))
	}
	listed := map[string]int{}
	for i, tool := range out.Tools {
		listed[tool.Name] = i
	}
	for _, want := range mcp.Tools {
		i, ok := listed[want.Name]
		if !ok {
			t.Errorf("%s is not listed", want.Name)
			continue
		}
		tool := out.Tools[i]
		var schema any
		json.Unmarshal([]byte(want.InputSchema), &schema)
		a := tool.Annotations
		if tool.Title != want.Title || !jsonEqual(tool.InputSchema, schema) || a["readOnlyHint"] != want.ReadOnly ||
			a["destructiveHint"] != want.Destructive || a["idempotentHint"] != want.Idempotent {
			t.Errorf("%s listed as %+v", want.Name, tool)
		}
	}
}

// callsAnswerAsREST compares each call the client made with REST's answer
// to the same input, and the call without a key with the sign-in challenge.
func (out nodeClientRun) callsAnswerAsREST(t *testing.T, base, key string) {
	t.Helper()
	status, rest := restJSON(t, base, "GET", "/v1/domains/search?q=acme&tldAllowlist=org,dev,com&maxFirstYearPriceUsd=50", nil, nil)
	sameAsREST(t, "search_domains", out.Search, 200, status, rest)
	status, rest = restJSON(t, base, "POST", "/v1/estimate", map[string]any{"workload": "database_backed_app", "monthlyRequests": 2000000}, nil)
	sameAsREST(t, "estimate", out.Estimate, 200, status, rest)
	quote := map[string]any{"projectId": "prj_x", "items": []any{map[string]any{"kind": "domain", "domain": "acme.dev"}}}
	if q := out.QuoteWithoutKey; !q.Thrown || q.Code != 401 || !strings.Contains(q.Message, "auth:missing_credentials") {
		t.Errorf("create_quote without a key: %+v", q)
	}
	if x := out.UnauthorizedExchange; x == nil || x.Status != 401 || !strings.Contains(x.WWWAuthenticate, `/.well-known/oauth-protected-resource"`) {
		t.Errorf("the 401 exchange: %+v", x)
	}
	status, rest = restJSON(t, base, "POST", "/v1/quotes", quote, http.Header{"Authorization": {"Bearer " + key}})
	sameAsREST(t, "create_quote with a key", out.QuoteWithKey, status, status, rest)
	if env, _ := out.QuoteWithKey.StructuredContent.(map[string]any); env["blockedBy"] == "auth:missing_credentials" || env["blockedBy"] == "auth:invalid_credentials" {
		t.Errorf("the key did not reach the operation: %v", env)
	}
}

// sameAsREST wants a tool result whose text and structuredContent agree,
// and which matches REST's answer, given with restStatus, to wantStatus.
func sameAsREST(t *testing.T, name string, res nodeResult, wantStatus int, restStatus int, rest any) {
	t.Helper()
	if len(res.Content) != 1 || res.Content[0].Type != "text" {
		t.Errorf("%s: content %+v", name, res.Content)
		return
	}
	var fromText any
	json.Unmarshal([]byte(res.Content[0].Text), &fromText)
	if !jsonEqual(fromText, res.StructuredContent) {
		t.Errorf("%s: text and structuredContent differ", name)
	}
	if restStatus != wantStatus || res.IsError != (restStatus >= 400) || !jsonEqual(res.StructuredContent, rest) {
		t.Errorf("%s: MCP (isError %v) and REST (%d) differ:\n%v\n%v", name, res.IsError, restStatus, res.StructuredContent, rest)
	}
}

// exchangesSessionlessAndJSON wants no session id on any exchange, JSON
// answers only, and one 401: the governed call without credentials.
func (out nodeClientRun) exchangesSessionlessAndJSON(t *testing.T) {
	t.Helper()
	unauthorized := 0
	for i, x := range out.Exchanges {
		if x.SessionID != nil {
			t.Errorf("exchange %d carried Mcp-Session-Id %q", i, *x.SessionID)
		}
		switch {
		case x.Method == "POST" && x.Status == 200:
			if x.ContentType == nil || *x.ContentType != "application/json" {
				t.Errorf("exchange %d answered with %v; the endpoint answers JSON only", i, x.ContentType)
			}
		case x.Method == "POST" && x.Status == 202, x.Method == "GET" && x.Status == 405:
		case x.Method == "POST" && x.Status == 401:
			unauthorized++ // the governed call without credentials
		default:
			t.Errorf("exchange %d: %s answered %d", i, x.Method, x.Status)
		}
	}
	if unauthorized != 1 {
		t.Errorf("%d exchanges answered 401, want the one call without credentials", unauthorized)
	}
}
