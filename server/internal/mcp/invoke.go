package mcp

import (
	"context"
	"fmt"
	"net/http"

	"github.com/pierhq/pier/server/internal/httpapi"
)

// Validate checks arguments against a tool's inputSchema, as a tools/call
// would, without calling it. An unknown tool is an error.
func (h *Handler) Validate(tool string, args map[string]any) error {
	t, ok := h.tools[tool]
	if !ok {
		return fmt.Errorf("no tool %q", tool)
	}
	if err := t.schema.Validate(args); err != nil {
		return argumentError(err)
	}
	return nil
}

// Invoke calls a tool in-process, for callers inside the server that act for
// an agent without holding its credential (a workflow's steps, run by a
// durable task). The REST handler reads the principal from ctx, which only
// in-process code can set (httpapi.WithPrincipal). It answers the REST
// status and body, the same envelope the agent would get.
func (h *Handler) Invoke(ctx context.Context, tool string, args map[string]any, idempotencyKey string) (int, []byte, error) {
	t, ok := h.tools[tool]
	if !ok {
		return 0, nil, fmt.Errorf("no tool %q", tool)
	}
	if err := t.schema.Validate(args); err != nil {
		e := argumentError(err)
		return e.Status(), nil, e
	}
	rs, err := t.shape(args)
	if err != nil {
		return 0, nil, err
	}
	req, err := rs.request(ctx, t.Method, http.Header{}, caller{remoteAddr: "127.0.0.1:0"})
	if err != nil {
		return 0, nil, err
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	rec := httpapi.NewRecorder(0)
	h.rest.ServeHTTP(rec, req)
	status, _, body := rec.Result()
	return status, body, nil
}
