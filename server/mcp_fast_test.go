package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server/internal/ratelimit"
)

// mcpReq is a POST /mcp of body with the headers an MCP client sends,
// and extra.
func mcpReq(body string, extra ...string) string {
	return apiReq("POST", "/mcp", append([]string{fmt.Sprintf("Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", len(body))}, extra...)...) + body
}

// preparedCases are the keyed search again with ids of every kind, and
// with its arguments in another order or spacing: answered from prepared
// answers with the message's own id, or by net/http when the id is not a
// string or a number.
func preparedCases(search string, call func(tool, args string) string, key string) []fastCase {
	one := []bool{false}
	return []fastCase{
		// The same message with ids of every kind, answered from the
		// prepared answer with the message's own id.
		{name: "search with a key, id 0", raw: mcpReq(withID(search, `0`), key), heads: one, fast: 1},
		{name: "search with a key, negative id", raw: mcpReq(withID(search, `-7`), key), heads: one, fast: 1},
		{name: "search with a key, big id", raw: mcpReq(withID(search, `123456789012345678901234567890`), key), heads: one, fast: 1},
		{name: "search with a key, id with exponent", raw: mcpReq(withID(search, `-1.5e300`), key), heads: one, fast: 1},
		{name: "search with a key, string id", raw: mcpReq(withID(search, `"abc"`), key), heads: one, fast: 1},
		{name: "search with a key, empty string id", raw: mcpReq(withID(search, `""`), key), heads: one, fast: 1},
		{name: "search with a key, escaped string id", raw: mcpReq(withID(search, `"a\"b\\c\u00e9\n"`), key), heads: one, fast: 1},
		{name: "search with a key, UTF-8 string id", raw: mcpReq(withID(search, `"é—✓"`), key), heads: one, fast: 1},
		{name: "search with a key, id after a space", raw: mcpReq(strings.Replace(search, `"id":1`, `"id":  42`, 1), key), heads: one, fast: 1},
		{name: "search with a key, space before the colon", raw: mcpReq(strings.Replace(search, `"id":1`, `"id" : 43`, 1), key), heads: one, fast: 1},
		{name: "search with a key, id last", raw: mcpReq(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev","io"]}},"id":"last"}`, key), heads: one, fast: 1},
		{name: "search with a key, id null", raw: mcpReq(withID(search, `null`), key), heads: one},
		{name: "search with a key, id true", raw: mcpReq(withID(search, `true`), key), heads: one},
		{name: "search with a key, id an object", raw: mcpReq(withID(search, `{"a":1}`), key), heads: one},
		{name: "search with a key, id 01", raw: mcpReq(withID(search, `01`), key), heads: one},
		{name: "search with a key, id with a control character", raw: mcpReq(withID(search, "\"a\x01\""), key), heads: one},
		{name: "search with a key, id unterminated", raw: mcpReq(withID(search, `"a`), key), heads: one},
		// Arguments in another order or spacing: the same REST request,
		// the same answer.
		{name: "search with a key, arguments reordered", raw: mcpReq(call("search_domains", `{"tldAllowlist":["com","dev","io"],"q":"acme"}`), key), heads: one, fast: 1},
		{name: "search with a key, arguments reordered again", raw: mcpReq(withID(call("search_domains", `{"tldAllowlist":["com","dev","io"],"q":"acme"}`), `"r"`), key), heads: one, fast: 1},
		{name: "search with a key, arguments spaced", raw: mcpReq(call("search_domains", ` { "q" : "acme" ,  "tldAllowlist" : [ "com" , "dev" , "io" ] } `), key), heads: one, fast: 1},
		{name: "search with a key, arguments spaced again", raw: mcpReq(withID(call("search_domains", ` { "q" : "acme" ,  "tldAllowlist" : [ "com" , "dev" , "io" ] } `), `7`), key), heads: one, fast: 1},
		{name: "an id among the arguments", raw: mcpReq(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","id":5}},"id":2}`, key), heads: one, fast: 1},
		{name: "an id among the arguments again", raw: mcpReq(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","id":5}},"id":3}`, key), heads: one, fast: 1},
		{name: "search without a key, another id", raw: mcpReq(withID(search, `"anon"`)), heads: one, fast: 1},
	}
}

// withID is msg, a message with "id":1, with id instead.
func withID(msg, id string) string { return strings.Replace(msg, `"id":1`, `"id":`+id, 1) }

// The fast path answers the MCP endpoint's reads (initialize, ping,
// tools/list, tools/call of a read-only tool, with a key or without)
// exactly as net/http and the handler do, and hands everything else to
// net/http: a table of requests sent to a server with the fast path and
// to one without, in the same order on the same clock.
func TestMCPFastPathMatchesNetHTTP(t *testing.T) {
	p := startFastPair(t, map[string]ratelimit.Policy{"search": {PerSecond: 1, Burst: 1000}})
	keys := map[*testserver.Server]string{p.slow: p.slow.Key(t, "read", "quote"), p.fast: p.fast.Key(t, "read", "quote")}
	call := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	}
	search := call("search_domains", `{"q":"acme","tldAllowlist":["com","dev","io"]}`)
	key := "Authorization: Bearer {key}\r\n"
	one := []bool{false}
	cases := []fastCase{
		{name: "initialize", raw: mcpReq(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), heads: one, fast: 1},
		{name: "ping", raw: mcpReq(`{"jsonrpc":"2.0","id":"a","method":"ping"}`, "MCP-Protocol-Version: 2025-03-26\r\n"), heads: one, fast: 1},
		{name: "tools/list", raw: mcpReq(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), heads: one, fast: 1},
		{name: "search", raw: mcpReq(search), heads: one, fast: 1},
		{name: "search again", raw: mcpReq(search), heads: one, fast: 1},
		{name: "search with a key", raw: mcpReq(search, key), heads: one, fast: 1},
		{name: "search with a key again, pipelined", raw: mcpReq(search, key) + mcpReq(search, key), heads: []bool{false, false}, fast: 2},
	}
	cases = append(cases, preparedCases(search, call, key)...)
	cases = append(cases, []fastCase{
		{name: "estimate with a key", raw: mcpReq(call("estimate", `{"workload":"database_backed_app"}`), key), heads: one, fast: 1},
		{name: "arguments refused", raw: mcpReq(call("search_domains", `{"nope":1}`), key), heads: one, fast: 1},
		{name: "estimate", raw: mcpReq(call("estimate", `{"workload":"static_site"}`)), heads: one, fast: 1},
		{name: "a REST read", raw: apiReq("GET", "/v1/domains/search?q=acme&tldAllowlist=com,dev,io"), heads: one},
		{name: "a REST read then MCP", raw: apiReq("GET", "/v1/domains/search?q=acme&tldAllowlist=com,dev,io") + mcpReq(search), heads: []bool{false, false}, fast: 2},
		{name: "list projects without a key", raw: mcpReq(call("list_projects", `{}`)), heads: one},
		{name: "wrong key", raw: mcpReq(search, "Authorization: Bearer agk_"+strings.Repeat("x", 40)+"\r\n"), heads: one},
		{name: "wrong key, ping", raw: mcpReq(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization: Bearer agk_nope\r\n"), heads: one},
		{name: "not a key", raw: mcpReq(search, "Authorization: Basic eDp5\r\n"), heads: one},
		{name: "two keys", raw: mcpReq(search, key, key), heads: one},
		{name: "a write", raw: mcpReq(call("create_quote", `{"projectId":"prj_x","items":[{"kind":"domain","domain":"acme.dev"}]}`), key), heads: one},
		{name: "unknown tool", raw: mcpReq(call("nope", `{}`)), heads: one},
		{name: "unknown method", raw: mcpReq(`{"jsonrpc":"2.0","id":1,"method":"nope"}`), heads: one},
		{name: "notification", raw: mcpReq(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), heads: one},
		{name: "batch", raw: mcpReq(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), heads: one},
		{name: "not JSON", raw: mcpReq(`{"jsonrpc":`), heads: one},
		{name: "Origin", raw: mcpReq(search, "Origin: https://evil.example\r\n"), heads: one},
		{name: "Accept */*", raw: apiReq("POST", "/mcp", fmt.Sprintf("Content-Type: application/json\r\nAccept: */*\r\nContent-Length: %d\r\n", len(search))) + search, heads: one},
		{name: "Content-Type text", raw: apiReq("POST", "/mcp", fmt.Sprintf("Content-Type: text/plain\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", len(search))) + search, heads: one},
		{name: "old protocol version", raw: mcpReq(search, "MCP-Protocol-Version: 2024-11-05\r\n"), heads: one},
		{name: "newer protocol version", raw: mcpReq(search, "MCP-Protocol-Version: 2026-07-28\r\n"), heads: one, fast: 1},
		{name: "query", raw: strings.Replace(mcpReq(search), "/mcp", "/mcp?x=1", 1), heads: one},
		{name: "close", raw: mcpReq(search, "Connection: close\r\n"), heads: one, fast: 1},
		{name: "over TLS", raw: mcpReq(search, key), heads: one, tls: true, fast: 1},
		{name: "GET", raw: apiReq("GET", "/mcp"), heads: one},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { p.run(t, c, keys) })
	}
	// The repeated searches (every id, the reordered and spaced
	// arguments once seen) come from prepared answers.
	if n := p.fast.MCPPreparedAnswers(); n != 18 {
		t.Errorf("%d answers from prepared answers, want 18", n)
	}
}
