package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/openapi/schemaset"
)

// The MCP protocol version Pier negotiates (SPEC.md §9 rule 3).
const mcpProtocolVersion = "2025-03-26"

var wireProbes = []probe{
	{"wire.error-envelope", "SPEC.md §2.2, §7 rule 1", probeErrorEnvelope},
	{"wire.actions-typed", "SPEC.md §7 rule 1", probeActionsTyped},
	{"wire.unknown-route", "SPEC.md §2.2", probeUnknownRoute},
	{"wire.method-not-allowed", "SPEC.md §2.2", probeMethodNotAllowed},
	{"wire.malformed-json", "SPEC.md §2.2", probeMalformedJSON},
	{"wire.mcp-accept-406", "SPEC.md §7 rule 3, §4 rule 1", probeMCPAccept},
	{"wire.mcp-origin", "SPEC.md §4 rule 1, §9 rule 3 (MCP 2025-03-26 streamable HTTP, which validates Origin)", probeMCPOrigin},
	{"wire.mcp-protocol-version", "SPEC.md §9 rule 3, §4 rule 1", probeMCPVersion},
	{"wire.mcp-no-session", "SPEC.md §4 rule 1", probeMCPNoSession},
	{"wire.mcp-parse-error", "SPEC.md §4 (POST /mcp is JSON-RPC 2.0, whose parse error is -32700 with id null)", probeMCPParseError},
	{"wire.rate-limit-429", "SPEC.md §7 rule 2, §8", probeRateLimit},
	{"wire.idempotency-replay", "SPEC.md §7 rule 4", probeIdempotencyReplay},
}

var (
	publishedOnce sync.Once
	published     map[string]*jsonschema.Schema
	publishedErr  error
)

// conformsTo validates a body against one of the published schemas the
// runner carries (its own copy of the contract, not the target's).
func conformsTo(name string, body []byte) error {
	publishedOnce.Do(func() { published, publishedErr = schemaset.Compile() })
	if publishedErr != nil {
		return publishedErr
	}
	s, ok := published[name]
	if !ok {
		return fmt.Errorf("no published schema %s", name)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %.120q", body)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("does not match %s: %s", name, strings.Join(strings.Fields(err.Error()), " "))
	}
	return nil
}

// expectError checks an error answer: the status, the envelope's schema,
// and the blockedBy code when want is not empty.
func expectError(x *response, status int, want string) error {
	if x.status != status {
		return fmt.Errorf("status %d, want %d: %.200s", x.status, status, x.body)
	}
	if err := conformsTo("error.json", x.body); err != nil {
		return fmt.Errorf("error envelope %w", err)
	}
	if want != "" {
		if got, _ := x.json()["blockedBy"].(string); got != want {
			return fmt.Errorf("blockedBy %q, want %q", got, want)
		}
	}
	return nil
}

func probeErrorEnvelope(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "GET", "/v1/projects", nil, nil)
	if err != nil {
		return err
	}
	if err := expectError(x, 401, ""); err != nil {
		return err
	}
	if retry, ok := x.json()["retryable"].(bool); !ok || retry {
		return fmt.Errorf("a missing credential must read retryable: false")
	}
	return nil
}

func probeActionsTyped(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "GET", "/v1/projects", http.Header{"Authorization": {"Bearer pier_conformance_not_a_key"}}, nil)
	if err != nil {
		return err
	}
	if err := expectError(x, 401, ""); err != nil {
		return err
	}
	actions, _ := x.json()["actions"].([]any)
	if len(actions) == 0 {
		return fmt.Errorf("no actions on an error")
	}
	for i, a := range actions {
		b, _ := json.Marshal(a)
		if err := conformsTo("action.json", b); err != nil {
			return fmt.Errorf("action %d %w", i, err)
		}
	}
	return nil
}

func probeUnknownRoute(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "GET", "/v1/conformance-no-such-route", nil, nil)
	if err != nil {
		return err
	}
	return expectError(x, 404, "")
}

func probeMethodNotAllowed(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "PUT", "/v1/estimate", nil, []byte(`{}`))
	if err != nil {
		return err
	}
	if err := expectError(x, 405, ""); err != nil {
		return err
	}
	if !strings.Contains(x.header.Get("Allow"), "POST") {
		return fmt.Errorf("405 without an Allow header naming POST (Allow: %q)", x.header.Get("Allow"))
	}
	return nil
}

func probeMalformedJSON(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "POST", "/v1/estimate", nil, []byte(`{"capabilities": [`))
	if err != nil {
		return err
	}
	if err := expectError(x, 400, ""); err != nil {
		return err
	}
	if retry, _ := x.json()["retryable"].(bool); retry {
		return fmt.Errorf("malformed JSON must read retryable: false")
	}
	return nil
}

var mcpAccept = http.Header{"Accept": {"application/json, text/event-stream"}, "Content-Type": {"application/json"}}

func initializeBody(id int) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"pier-conformance","version":"1"}}}`, id, mcpProtocolVersion))
}

func probeMCPAccept(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "POST", "/mcp", http.Header{"Accept": {"application/json"}}, initializeBody(1))
	if err != nil {
		return err
	}
	if x.status != 406 {
		return fmt.Errorf("an Accept without text/event-stream answered %d, want 406", x.status)
	}
	return nil
}

func probeMCPOrigin(ctx context.Context, r *runner, p *probeRun) error {
	h := mcpAccept.Clone()
	h.Set("Origin", "https://conformance.invalid")
	x, err := r.do(ctx, p, "POST", "/mcp", h, initializeBody(1))
	if err != nil {
		return err
	}
	if x.status != 403 {
		return fmt.Errorf("a foreign Origin answered %d, want 403", x.status)
	}
	return nil
}

// mcpResult decodes a JSON-RPC answer sent as JSON or as one SSE event.
func mcpResult(x *response) (map[string]any, error) {
	body := x.body
	if strings.HasPrefix(x.header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "data:") {
				body = []byte(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
				break
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("not a JSON-RPC answer: %.200s", x.body)
	}
	return m, nil
}

func probeMCPVersion(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "POST", "/mcp", mcpAccept, initializeBody(7))
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("initialize answered %d: %.200s", x.status, x.body)
	}
	m, err := mcpResult(x)
	if err != nil {
		return err
	}
	res, _ := m["result"].(map[string]any)
	if v, _ := res["protocolVersion"].(string); v != mcpProtocolVersion {
		return fmt.Errorf("negotiated protocol version %q, want %s", v, mcpProtocolVersion)
	}
	if id, _ := m["id"].(float64); id != 7 {
		return fmt.Errorf("answer id %v, want 7", m["id"])
	}
	return nil
}

func probeMCPNoSession(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "POST", "/mcp", mcpAccept, initializeBody(1))
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("initialize answered %d", x.status)
	}
	if s := x.header.Get("Mcp-Session-Id"); s != "" {
		return fmt.Errorf("the server started a session (Mcp-Session-Id %q); Pier's MCP endpoint is stateless", s)
	}
	// A tool listing works without any session.
	x, err = r.do(ctx, p, "POST", "/mcp", mcpAccept, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	if err != nil {
		return err
	}
	if x.status != 200 {
		return fmt.Errorf("tools/list without a session answered %d", x.status)
	}
	return nil
}

func probeMCPParseError(ctx context.Context, r *runner, p *probeRun) error {
	x, err := r.do(ctx, p, "POST", "/mcp", mcpAccept, []byte(`{"jsonrpc":"2.0","id":1,"method":`))
	if err != nil {
		return err
	}
	m, err := mcpResult(x)
	if err != nil {
		return err
	}
	e, _ := m["error"].(map[string]any)
	if code, _ := e["code"].(float64); code != -32700 {
		return fmt.Errorf("malformed JSON got error code %v, want -32700", e["code"])
	}
	if id, present := m["id"]; !present || id != nil {
		return fmt.Errorf("a parse error's id must be null, got %v", id)
	}
	return nil
}

func probeRateLimit(ctx context.Context, r *runner, p *probeRun) error {
	// Search is rate-limited per caller; a bounded burst must meet a 429.
	p.want429 = true
	for i := 0; i < 400; i++ {
		x, err := r.do(ctx, p, "GET", fmt.Sprintf("/v1/domains/search?q=conformance%d", i), nil, nil)
		if err != nil {
			return err
		}
		if x.status == 200 {
			continue
		}
		if err := expectError(x, 429, "rate:limited"); err != nil {
			return err
		}
		if retry, _ := x.json()["retryable"].(bool); !retry {
			return fmt.Errorf("429 must read retryable: true")
		}
		if x.header.Get("Retry-After") == "" {
			return fmt.Errorf("429 without Retry-After")
		}
		return nil
	}
	return fmt.Errorf("400 searches in a burst met no 429")
}

func probeIdempotencyReplay(ctx context.Context, r *runner, p *probeRun) error {
	sb, err := r.sandboxSession(ctx, p)
	if err != nil {
		return err
	}
	if err := sb.registerMandate(ctx, r, p); err != nil {
		return err
	}
	key := newKey("conf")
	first, err := sb.attempt(ctx, r, p, "allowed", key)
	if err != nil {
		return err
	}
	if first.status != 201 {
		return fmt.Errorf("attempt answered %d: %.200s", first.status, first.body)
	}
	again, err := sb.attempt(ctx, r, p, "allowed", key)
	if err != nil {
		return err
	}
	if again.header.Get("Idempotency-Replayed") != "true" {
		return fmt.Errorf("the same key and body were not replayed (status %d, no Idempotency-Replayed: true)", again.status)
	}
	if replayed, _ := again.json()["replayed"].(bool); !replayed {
		return fmt.Errorf("a replay must read replayed: true")
	}
	a1, _ := first.json()["data"].(map[string]any)
	a2, _ := again.json()["data"].(map[string]any)
	if fmt.Sprint(a1["attempt"]) != fmt.Sprint(a2["attempt"]) {
		return fmt.Errorf("the replay differs from the stored answer")
	}
	// The same key with another body is refused, never re-executed.
	other, err := sb.attempt(ctx, r, p, "approval", key)
	if err != nil {
		return err
	}
	if other.status < 400 {
		return fmt.Errorf("the same key with another body answered %d", other.status)
	}
	return expectError(other, other.status, "idempotency:key_reused")
}
