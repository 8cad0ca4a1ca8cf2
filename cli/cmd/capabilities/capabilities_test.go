package capabilities_test

import (
	"encoding/json"
	"testing"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/cli/cmd/capabilities"
	"github.com/pierhq/pier/cli/internal/clitest"
	"github.com/pierhq/pier/openapi"
)

// TestCapabilitiesCoverTheContract: every operationId in the contract is
// listed once, with the contract's method, path, scope, idempotency (read-only
// operations are idempotent; idempotencyKey says a retry needs the key) and
// input_required marker, and the command that carries its annotation.
func TestCapabilitiesCoverTheContract(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID   string `json:"operationId"`
			Scope         string `json:"x-scope"`
			InputRequired bool   `json:"x-input-required"`
			Parameters    []struct {
				Ref string `json:"$ref"`
			} `json:"parameters"`
			MCP struct {
				Exclude    bool `json:"exclude"`
				ReadOnly   bool `json:"readOnly"`
				Idempotent bool `json:"idempotent"`
			} `json:"x-mcp"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	f, ts := clitest.NewFactory(nil)
	if code := cli.Run(f, []string{"capabilities", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	var out struct{ Operations []capabilities.Capability }
	if err := json.Unmarshal(ts.Out.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]capabilities.Capability{}
	for _, c := range out.Operations {
		if _, dup := got[c.Operation]; dup {
			t.Errorf("%s listed twice", c.Operation)
		}
		got[c.Operation] = c
	}
	n := 0
	for path, item := range doc.Paths {
		for method, op := range item {
			if op.OperationID == "" {
				continue
			}
			n++
			c, ok := got[op.OperationID]
			if !ok {
				t.Errorf("%s is not listed", op.OperationID)
				continue
			}
			key := false
			for _, p := range op.Parameters {
				key = key || p.Ref == "#/components/parameters/IdempotencyKey" || p.Ref == "#/components/parameters/IdempotencyKeyRequired"
			}
			readOnly := method == "get" || op.MCP.ReadOnly
			if c.Path != path || c.Method != map[string]string{"get": "GET", "post": "POST", "put": "PUT", "delete": "DELETE", "patch": "PATCH"}[method] ||
				c.IdempotencyKey != key || c.ReadOnly != readOnly || c.Idempotent != (readOnly || op.MCP.Idempotent || key) || c.InputRequired != op.InputRequired || (op.Scope != "" && op.Scope != "none" && (len(c.Scopes) != 1 || c.Scopes[0] != op.Scope)) || (op.Scope == "none" && len(c.Scopes) != 0) ||
				(c.MCPTool == "") != op.MCP.Exclude {
				t.Errorf("%s: %+v does not match the contract", op.OperationID, c)
			}
			if c.Command == "" && op.OperationID != "mcp" {
				t.Errorf("%s has no command", op.OperationID)
			}
		}
	}
	if n != len(out.Operations) {
		t.Errorf("%d operations in the contract, %d listed", n, len(out.Operations))
	}
	if c := got["launch_service"]; !c.InputRequired || c.Command != "pier projects launch <id>" || c.ReadOnly || !c.Idempotent || !c.IdempotencyKey {
		t.Errorf("launch_service: %+v", c)
	}
	// Reads are idempotent, though they take no key.
	for _, id := range []string{"get_task", "list_services", "search_domains", "estimate"} {
		if c := got[id]; !c.ReadOnly || !c.Idempotent || c.IdempotencyKey {
			t.Errorf("%s: %+v", id, c)
		}
	}
	if c := got["create_signup"]; c.Idempotent || c.ReadOnly {
		t.Errorf("create_signup is not safe to retry: %+v", c)
	}
}
