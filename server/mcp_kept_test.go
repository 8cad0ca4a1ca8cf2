package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/server"
)

// mcpSearch calls tools/call search_domains anonymously and returns the
// result's structuredContent and whether it is an error.
func mcpSearch(t *testing.T, base, args string) (json.RawMessage, bool) {
	t.Helper()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":` + args + `}}`
	st, body := rawDo(t, base, "POST", "/mcp", "application/json", call, http.Header{"Accept": {"application/json, text/event-stream"}})
	if st != http.StatusOK {
		t.Fatalf("tools/call: %d %s", st, body)
	}
	var m struct {
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return m.Result.StructuredContent, m.Result.IsError
}

// An anonymous call of a read-only tool is answered from the REST
// handler's kept answers without the chain (httpapi AnswerKept), and stays
// what REST would answer: a name claimed between two calls shows as taken
// in the second.
func TestMCPKeptSearchSeesDomainWrites(t *testing.T) {
	ts := start(t, server.Config{})
	available := func(sc json.RawMessage) bool { return searchSaysAvailable(t, sc, "acme.dev") }
	const args = `{"q":"acme","tldAllowlist":["dev"]}`
	for i := 0; i < 3; i++ {
		if sc, isErr := mcpSearch(t, ts.URL, args); isErr || !available(sc) {
			t.Fatalf("search %d: %s", i, sc)
		}
	}
	if err := ts.Store().Domains().Claim(context.Background(), "acme.dev", "org_x", "tsk_x", time.Now()); err != nil {
		t.Fatal(err)
	}
	if sc, isErr := mcpSearch(t, ts.URL, args); isErr || available(sc) {
		t.Fatalf("a search after the claim still shows acme.dev available: %s", sc)
	}
	_, rest := rawDo(t, ts.URL, "GET", "/v1/domains/search?q=acme&tldAllowlist=dev", "", "", nil)
	sc, _ := mcpSearch(t, ts.URL, args)
	if strings.TrimSpace(rest) != string(sc) {
		t.Fatalf("MCP and REST answer differently:\n%s\n%s", sc, rest)
	}
}

// Calls answered from kept answers take from the caller's search bucket as
// REST does: the bucket runs out for MCP and REST alike.
func TestMCPKeptSearchIsRateLimited(t *testing.T) {
	ts := start(t, server.Config{RateLimits: map[string]server.RateLimit{"search": {PerSecond: 0.001, Burst: 4}}})
	const args = `{"q":"acme","tldAllowlist":["dev"]}`
	for i := 0; i < 4; i++ {
		if sc, isErr := mcpSearch(t, ts.URL, args); isErr {
			t.Fatalf("search %d of a burst of 4: %s", i+1, sc)
		}
	}
	sc, isErr := mcpSearch(t, ts.URL, args)
	if !isErr || !strings.Contains(string(sc), `"rate:limited"`) {
		t.Fatalf("the fifth search: isError %v, %s", isErr, sc)
	}
	if st, body := rawDo(t, ts.URL, "GET", "/v1/domains/search?q=acme&tldAllowlist=dev", "", "", nil); st != http.StatusTooManyRequests {
		t.Fatalf("REST after MCP used the bucket: %d %s", st, body)
	}
}
