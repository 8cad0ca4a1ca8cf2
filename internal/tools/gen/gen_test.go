package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestRunReproducesCommittedFiles generates from the repository's contract
// into a scratch root and compares every output with the committed file,
// so a generator change that is not followed by `make generate` fails here
// as well as in CI's check.
func TestRunReproducesCommittedFiles(t *testing.T) {
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	if err := os.MkdirAll(filepath.Join(scratch, "openapi"), 0o755); err != nil {
		t.Fatal(err)
	}
	contract, err := os.ReadFile(filepath.Join(repo, "openapi", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "openapi", "openapi.yaml"), contract, 0o644); err != nil {
		t.Fatal(err)
	}
	// The SDK's names for the models are read from package models, which
	// oapi-codegen writes; bring its files along.
	if err := os.MkdirAll(filepath.Join(scratch, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"models.gen.go", "blockedby.go", "generate.go"} {
		b, err := os.ReadFile(filepath.Join(repo, "models", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scratch, "models", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(scratch); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(scratch, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "openapi.yaml") {
			return err
		}
		rel, _ := filepath.Rel(scratch, p)
		got, _ := os.ReadFile(p)
		want, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			t.Errorf("%s: generated but not committed: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: differs from the committed file; run make generate", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 {
		t.Errorf("generated %d files, want at least the six fixed outputs", n)
	}
}

const miniSpec = `
openapi: 3.1.0
paths:
  /v1/things/{id}:
    get:
      operationId: get_thing
      x-authority: agent
      x-scope: things:read
      x-pure: true
      x-cli: {command: things get, args: [id]}
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        '200': {description: ok, content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}}
  /v1/things:
    post:
      operationId: create_thing
      x-authority: agent
      x-scope: things:write
      x-body-limit: 4096
      x-cli: {command: things create}
      x-mcp: {destructive: true}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              properties:
                name: {type: string, description: The thing's name.}
                size: {type: integer}
      responses:
        '201': {description: made, content: {application/json: {schema: {$ref: '#/components/schemas/Thing'}}}}
components:
  schemas:
    Thing: {type: object}
`

func parseSpec(t *testing.T, src string) map[string]any {
	t.Helper()
	var y any
	if err := yaml.Unmarshal([]byte(src), &y); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, _ := yaml.Marshal(y)
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := loadRaw(p)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestCollectOperations(t *testing.T) {
	ops, err := collectOperations(parseSpec(t, miniSpec))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].ID != "create_thing" || ops[1].ID != "get_thing" {
		t.Fatalf("operations %v, want create_thing and get_thing sorted by id", ops)
	}
	create, get := ops[0], ops[1]
	if !create.Idempotent || create.BodyLimit != 4096 || !create.BodyRequired || create.SuccessStatus != 201 || create.SuccessSchema != "Thing" {
		t.Errorf("create_thing: %+v", create)
	}
	if len(create.BodyFields) != 2 || create.BodyFields[0].Name != "name" || !create.BodyFields[0].Required || create.BodyFields[1].Required {
		t.Errorf("create_thing body fields: %+v", create.BodyFields)
	}
	if !create.MCP.Destructive || create.Scope != "things:write" {
		t.Errorf("create_thing extensions: mcp %+v scope %q", create.MCP, create.Scope)
	}
	if !get.Pure || get.Idempotent || len(get.Params) != 1 || get.Params[0].In != "path" || !get.Params[0].Required {
		t.Errorf("get_thing: %+v", get)
	}
	if get.CLI.Command != "things get" || len(get.CLI.Args) != 1 {
		t.Errorf("get_thing cli: %+v", get.CLI)
	}
}

func TestCollectOperationsRefusesIncompleteContracts(t *testing.T) {
	cases := []struct {
		name, from, to, want string
	}{
		{"no operationId", "operationId: get_thing", "summary: x", "missing operationId"},
		{"no authority", "x-authority: agent\n      x-scope: things:read", "x-scope: things:read", "missing x-authority"},
		{"agent without scope", "x-scope: things:read\n", "\n", "needs x-scope"},
		{"duplicate id", "operationId: create_thing", "operationId: get_thing", "duplicate operationId"},
		{"unknown cli field", "x-cli: {command: things create}", "x-cli: {command: things create, colour: red}", "unknown field"},
		{"no cli command", "x-cli: {command: things create}", "x-cli: {}", "missing x-cli.command"},
		{"header parameter", "name: Idempotency-Key", "name: X-Other", "unsupported header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(miniSpec, c.from, c.to, 1)
			if src == miniSpec {
				t.Fatalf("the case did not change the spec")
			}
			_, err := collectOperations(parseSpec(t, src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

func TestCollectBlockedByMatchesItsEnum(t *testing.T) {
	base := `
components:
  schemas:
    BlockedBy:
      type: string
      enum: [budget:exceeded, auth:missing]
      x-blocked-by:
        - {code: budget:exceeded, status: 402, retryable: false, description: over}
        - {code: auth:missing, status: 401, retryable: false, description: who}
`
	table, err := collectBlockedBy(parseSpec(t, base))
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 2 || table[0].Code != "auth:missing" || table[1].Status != 402 {
		t.Errorf("table %+v, want both codes sorted", table)
	}
	for name, src := range map[string]string{
		"code not in enum":   strings.Replace(base, "enum: [budget:exceeded, auth:missing]", "enum: [budget:exceeded]", 1),
		"enum without entry": strings.Replace(base, "enum: [budget:exceeded, auth:missing]", "enum: [budget:exceeded, auth:missing, plan:x]", 1),
		"listed twice":       strings.Replace(base, "code: auth:missing", "code: budget:exceeded", 1),
	} {
		if _, err := collectBlockedBy(parseSpec(t, src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"get_thing": "GetThing", "sandbox-holder": "SandboxHolder", "a.b c": "ABC", "x": "X"} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"projectId": "project-id", "includeExotic": "include-exotic", "max_price": "max-price", "name": "name"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}
