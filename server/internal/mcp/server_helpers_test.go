package mcp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/internal/testkit/contracttest"
)

// mcpHeaders are what a streamable HTTP client sends with every POST.
func mcpHeaders() http.Header {
	return http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// post sends a raw body to /mcp and checks the exchange against the
// contract (every error must be the typed envelope).
func post(t *testing.T, base string, body string, header http.Header) response {
	t.Helper()
	return send(t, "POST", base+"/mcp", body, header)
}

func send(t *testing.T, method, url, body string, header http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if vs := resp.Header.Values("Mcp-Session-Id"); len(vs) > 0 {
		t.Errorf("%s %s answered with Mcp-Session-Id %v; the endpoint is stateless", method, url, vs)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		// The contract describes one message; batch answers are arrays.
		if body != "" {
			req.Body = io.NopCloser(strings.NewReader(body))
		}
		contracttest.Check(t, req, &contracttest.Response{Response: resp, Body: b})
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// rpc sends one JSON-RPC request and returns its decoded response.
func rpc(t *testing.T, base, method string, params any, header http.Header) map[string]any {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method}
	if params != nil {
		msg["params"] = params
	}
	b, _ := json.Marshal(msg)
	h := mcpHeaders()
	for k, vs := range header {
		h[k] = vs
	}
	r := post(t, base, string(b), h)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: %d %s %s", method, r.status, r.header.Get("Content-Type"), r.body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%s: %v: %s", method, err, r.body)
	}
	if m["jsonrpc"] != "2.0" || m["id"] != float64(1) {
		t.Fatalf("%s: not a response to id 1: %s", method, r.body)
	}
	return m
}

// callTool returns the result of tools/call, failing on a JSON-RPC error.
func callTool(t *testing.T, base, name string, args any, header http.Header) map[string]any {
	t.Helper()
	m := rpc(t, base, "tools/call", map[string]any{"name": name, "arguments": args}, header)
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("tools/call %s: no result: %v", name, m)
	}
	return res
}

// restJSON fetches the REST answer for comparison.
func restJSON(t *testing.T, base, method, path string, body any, header http.Header) (int, any) {
	t.Helper()
	c := &contracttest.Client{T: t, BaseURL: base}
	r := c.Do(method, path, body, header)
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r.StatusCode, v
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func errorEnvelope(t *testing.T, v any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(v)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := contracttest.Schema(t, "error.json").Validate(doc); err != nil {
		t.Fatalf("not an error envelope: %v\n%s", err, b)
	}
	m, _ := v.(map[string]any)
	return m
}
