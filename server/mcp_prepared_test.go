package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/rawhttp"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// mcpOnce sends one MCP message with the Authorization value authz (none
// when empty) on a new connection to ts's listener.
func mcpOnce(t *testing.T, ts *testServer, msg, authz string) rawhttp.Answer {
	t.Helper()
	var extra []string
	if authz != "" {
		extra = append(extra, "Authorization: "+authz+"\r\n")
	}
	raw := strings.ReplaceAll(mcpReq(msg, extra...), "{host}", ts.Addr())
	as, _ := apiExchange(t, ts.Addr(), false, raw, 0, false)
	if len(as) != 1 || as[0].Err != "" {
		t.Fatalf("no answer: %v", as)
	}
	return as[0]
}

// toolAnswer reads a tools/call response: its id as sent and the
// result's structuredContent.
func toolAnswer(t *testing.T, a rawhttp.Answer) (id string, sc json.RawMessage, isError bool) {
	t.Helper()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &m) != nil {
		t.Fatalf("not a tools/call response: %d %s", a.Status, a.Body)
	}
	return string(m.ID), m.Result.StructuredContent, m.Result.IsError
}

// A tools/call of a kept read answered once on the fast path is answered
// again from its prepared answer, for any caller and any id: the same
// answer with the message's own id, the bucket charged, a write seen at
// once, and a revoked key refused on the next call.
func TestMCPPreparedAnswers(t *testing.T) {
	ts := start(t, server.Config{RateLimits: map[string]server.RateLimit{"search": {PerSecond: 1000, Burst: 1000}}})
	a := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	b := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	const search = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["dev"]}}}`
	// The first call makes REST's kept answer, the second is answered
	// from it and prepared.
	toolAnswer(t, mcpOnce(t, ts, search, "Bearer "+a.key))
	_, first, _ := toolAnswer(t, mcpOnce(t, ts, search, "Bearer "+a.key))
	if !searchSaysAvailable(t, first, "acme.dev") {
		t.Fatalf("acme.dev taken: %s", first)
	}
	for i, c := range []struct{ id, authz string }{
		{`"x"`, "Bearer " + a.key}, {`123456789012345678901234567890`, "Bearer " + a.key},
		{`"y"`, "Bearer " + b.key}, {`-2`, ""},
	} {
		before := ts.MCPPreparedAnswers()
		id, sc, _ := toolAnswer(t, mcpOnce(t, ts, withID(search, c.id), c.authz))
		if id != c.id || string(sc) != string(first) {
			t.Errorf("call %d: id %s, want %s; %s", i, id, c.id, sc)
		}
		if n := ts.MCPPreparedAnswers() - before; n != 1 {
			t.Errorf("call %d: %d prepared answers, want 1", i, n)
		}
	}
	if err := ts.Store().Domains().Claim(context.Background(), "acme.dev", "org_x", "tsk_x", time.Now()); err != nil {
		t.Fatal(err)
	}
	before := ts.MCPPreparedAnswers()
	if _, sc, _ := toolAnswer(t, mcpOnce(t, ts, withID(search, "2"), "Bearer "+a.key)); searchSaysAvailable(t, sc, "acme.dev") {
		t.Fatalf("a prepared answer from before the claim: %s", sc)
	}
	if ts.MCPPreparedAnswers() != before+1 {
		t.Fatal("the call after the claim was not answered from the prepared call")
	}
	if err := ts.Store().Keys().Revoke(context.Background(), a.org, a.keyID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := mcpOnce(t, ts, withID(search, "3"), "Bearer "+a.key); r.Status != http.StatusUnauthorized {
		t.Fatalf("the next call with the revoked key: %d %s", r.Status, r.Body)
	}
	if _, _, isErr := toolAnswer(t, mcpOnce(t, ts, withID(search, "4"), "Bearer "+b.key)); isErr {
		t.Fatal("the other organisation's key refused")
	}
}

// A read whose answer depends on the caller (an agent's own projects) is
// never answered from a prepared answer: each organisation sees its own.
func TestMCPPreparedAnswersAreNotPerCaller(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	b := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_projects","arguments":{}}}`
	before := ts.MCPPreparedAnswers()
	for i := range 3 {
		for _, acc := range []account{a, b} {
			_, sc, isErr := toolAnswer(t, mcpOnce(t, ts, withID(list, strings.Repeat("9", i+1)), "Bearer "+acc.key))
			other := a.project
			if acc == a {
				other = b.project
			}
			if isErr || !strings.Contains(string(sc), acc.project) || strings.Contains(string(sc), other) {
				t.Fatalf("list_projects for %s: %s", acc.org, sc)
			}
		}
	}
	if n := ts.MCPPreparedAnswers() - before; n != 0 {
		t.Fatalf("%d calls of list_projects answered from prepared answers", n)
	}
}

// Prepared answers take from the caller's search bucket as REST does, and
// every message from the MCP bucket.
func TestMCPPreparedAnswersAreRateLimited(t *testing.T) {
	ts := start(t, server.Config{RateLimits: map[string]server.RateLimit{"search": {PerSecond: 0.001, Burst: 4}}})
	a := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	const search = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["dev"]}}}`
	before := ts.MCPPreparedAnswers()
	for i := range 4 {
		if _, sc, isErr := toolAnswer(t, mcpOnce(t, ts, withID(search, `"`+strings.Repeat("i", i+1)+`"`), "Bearer "+a.key)); isErr {
			t.Fatalf("search %d of a burst of 4: %s", i+1, sc)
		}
	}
	// The first makes REST's kept answer, the second prepares it.
	if n := ts.MCPPreparedAnswers() - before; n != 2 {
		t.Fatalf("%d prepared answers, want 2", n)
	}
	if _, sc, isErr := toolAnswer(t, mcpOnce(t, ts, withID(search, "5"), "Bearer "+a.key)); !isErr || !strings.Contains(string(sc), `"rate:limited"`) {
		t.Fatalf("the fifth search: isError %v, %s", isErr, sc)
	}
	if r := ts.Client.Do("GET", "/v1/domains/search?q=acme&tldAllowlist=dev", nil, a.header()); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("REST after MCP used the key's bucket: %d", r.StatusCode)
	}

	mt := start(t, server.Config{RateLimits: map[string]server.RateLimit{"mcp": {PerSecond: 0.001, Burst: 3}}})
	for i := range 3 {
		if r := mcpOnce(t, mt, withID(search, `"m`+strings.Repeat("i", i)+`"`), ""); r.Status != http.StatusOK {
			t.Fatalf("message %d of a burst of 3: %d %s", i+1, r.Status, r.Body)
		}
	}
	if r := mcpOnce(t, mt, withID(search, "4"), ""); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the fourth message: %d %s", r.Status, r.Body)
	}
}

// Behind a trusted proxy each client forwarded has its own mcp bucket on
// the fast path, as on net/http's path: the client clientaddr resolves,
// not the proxy's address.
func TestMCPFastPathBucketsByForwardedClient(t *testing.T) {
	ts := start(t, server.Config{TrustedProxies: []string{"127.0.0.1/32"},
		RateLimits: map[string]server.RateLimit{"mcp": {PerSecond: 0.001, Burst: 2}}})
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	send := func(client string) int {
		raw := strings.ReplaceAll(mcpReq(ping, "X-Forwarded-For: "+client+"\r\n"), "{host}", ts.Addr())
		as, _ := apiExchange(t, ts.Addr(), false, raw, 0, false)
		if len(as) != 1 {
			t.Fatalf("no answer: %v", as)
		}
		return as[0].Status
	}
	before := ts.APIFastAnswers()
	for i, want := range []int{200, 200, 429} {
		if got := send("198.51.100.1"); got != want {
			t.Fatalf("client A's message %d: %d, want %d", i+1, got, want)
		}
	}
	if got := send("198.51.100.2"); got != 200 {
		t.Fatalf("client B's first message: %d, as if A's bucket were B's", got)
	}
	if n := ts.APIFastAnswers() - before; n != 3 {
		t.Fatalf("%d answers on the fast path, want 3", n)
	}
}
