package mcp

import (
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The SPEC's operations, and the four it names only as MCP tools, are tools.
func TestEverySpecOperationIsATool(t *testing.T) {
	for _, id := range []string{
		"create_signup", "create_billing_setup_link", "poll_billing", "search_domains", "estimate",
		"create_quote", "launch_service", "get_task", "export_project", "create_sandbox_session",
		"get_sandbox_session", "create_sandbox_attempt", "get_sandbox_proof", "get_sandbox_reference",
		"get_reference_proof", "get_reference_proof_jwks", "get_reference_issuer_jwks",
		"get_reference_provenance", "get_verifier_script", "get_holder_script",
		"upload_assets", "prepare_workflow", "apply_workflow", "set_registrant_contact",
	} {
		if _, ok := Lookup(id); !ok {
			t.Errorf("%s is not a tool", id)
		}
	}
	if _, ok := Lookup("mcp"); ok {
		t.Error("the transport itself must not be a tool")
	}
}

// Every inputSchema compiles, and validates the arguments it should.
func TestInputSchemasCompile(t *testing.T) {
	for _, tool := range Tools {
		v, err := jsonschema.UnmarshalJSON(stringsReader(tool.InputSchema))
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem://"+tool.Name, v); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("mem://" + tool.Name)
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if tool.Name == "search_domains" {
			var ok, bad any
			json.Unmarshal([]byte(`{"q":"acme","tldAllowlist":["dev"],"includeExotic":true}`), &ok)
			json.Unmarshal([]byte(`{"q":"acme","colour":"blue"}`), &bad)
			if err := s.Validate(ok); err != nil {
				t.Errorf("valid arguments refused: %v", err)
			}
			if err := s.Validate(bad); err == nil {
				t.Error("unknown argument accepted")
			}
		}
	}
}
