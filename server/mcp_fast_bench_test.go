package server_test

import (
	"net/http"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/edge/fastpath"
)

// BenchmarkFastAPIRead is the server's own work for a kept read on the
// listener's fast path, the request already read and the answer not yet
// written: the keyed REST search against the keyed tools/call
// search_domains (a prepared answer), and both without a key. bench/mcp.sh
// measures the same over real HTTP, with the kernel's part.
func BenchmarkFastAPIRead(b *testing.B) {
	ts := start(b, server.Config{RateLimits: map[string]server.RateLimit{"search": {PerSecond: 1e9, Burst: 1e9}, "mcp": {PerSecond: 1e9, Burst: 1e9}}})
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev","io"],"maxFirstYearPriceUsd":50}}}`
	rest := func(authz []byte) *fastpath.APIRequest {
		return &fastpath.APIRequest{Method: "GET", Path: []byte("/v1/domains/search"), Query: []byte("q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50"),
			Authorization: authz != nil, AuthorizationValue: authz, ClientIP: "127.0.0.1", RemoteAddr: "127.0.0.1:40000", Host: ts.Addr()}
	}
	mcp := func(authz []byte) *fastpath.APIRequest {
		return &fastpath.APIRequest{Method: "POST", Path: []byte("/mcp"), Accept: []byte("application/json, text/event-stream"),
			ContentType: []byte("application/json"), MCPProtocolVersion: []byte("2025-03-26"), Body: []byte(call),
			Authorization: authz != nil, AuthorizationValue: authz, ClientIP: "127.0.0.1", RemoteAddr: "127.0.0.1:40000", Host: ts.Addr()}
	}
	key := []byte("Bearer " + ts.Key(b, "read"))
	r, err := http.Get(ts.URL + "/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50")
	if err != nil || r.StatusCode != 200 {
		b.Fatalf("search: %v %v", r, err)
	}
	r.Body.Close()
	for _, c := range []struct {
		name string
		q    *fastpath.APIRequest
	}{{"rest-key", rest(key)}, {"mcp-key", mcp(key)}, {"rest-anon", rest(nil)}, {"mcp-anon", mcp(nil)}} {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 64<<10)
			var scratch []byte
			for range 3 { // the answers kept and prepared
				c.q.Scratch = scratch
				ts.APIRead(dst[:0], c.q)
				scratch = c.q.Scratch
			}
			b.ReportAllocs()
			for b.Loop() {
				c.q.Scratch = scratch
				if _, _, ok := ts.APIRead(dst[:0], c.q); !ok {
					b.Fatal("not answered on the fast path")
				}
				scratch = c.q.Scratch
			}
		})
	}
}
