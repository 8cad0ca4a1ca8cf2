// Command gen reads openapi/openapi.yaml and writes everything that is derived
// from it besides oapi-codegen's output: the JSON form of the document, the
// published JSON Schemas, the SDK's operation and blockedBy tables and typed
// methods, the CLI command tree and the MCP tool table.
//
// It fails, rather than guessing, on colliding command names, on parameters
// that clash with the CLI's global flags, and on tool arguments that collide.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	specPath := filepath.Join(root, "openapi", "openapi.yaml")

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		return fmt.Errorf("load %s: %w", specPath, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return fmt.Errorf("validate %s: %w", specPath, err)
	}

	spec, err := loadRaw(specPath)
	if err != nil {
		return err
	}
	ops, err := collectOperations(spec)
	if err != nil {
		return err
	}
	blocked, err := collectBlockedBy(spec)
	if err != nil {
		return err
	}

	outputs := []struct {
		path string
		gen  func() ([]byte, error)
	}{
		{"openapi/openapi.json", func() ([]byte, error) { return marshalJSON(spec) }},
		{"sdk/operations.gen.go", func() ([]byte, error) { return genSDKOperations(ops) }},
		{"sdk/models.gen.go", func() ([]byte, error) { return genSDKModels(root) }},
		{"models/blockedby.gen.go", func() ([]byte, error) { return genBlockedBy(blocked) }},
		{"server/internal/operation/operations.gen.go", func() ([]byte, error) { return genServerOperations(ops) }},
		{"sdk/methods.gen.go", func() ([]byte, error) { return genSDKMethods(ops) }},
		{"cli/cmd/operations/commands.gen.go", func() ([]byte, error) { return genCLI(ops) }},
		{"server/internal/mcp/tools.gen.go", func() ([]byte, error) { return genMCPTools(spec, ops) }},
		{"server/internal/httpapi/unimplemented.gen.go", func() ([]byte, error) { return genUnimplemented(ops) }},
	}
	schemas, err := genPublishedSchemas(spec)
	if err != nil {
		return err
	}
	for name, body := range schemas {
		body := body
		outputs = append(outputs, struct {
			path string
			gen  func() ([]byte, error)
		}{"openapi/schemas/" + name, func() ([]byte, error) { return body, nil }})
	}

	for _, o := range outputs {
		b, err := o.gen()
		if err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
		p := filepath.Join(root, o.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeIfChanged(p, b); err != nil {
			return err
		}
	}
	return nil
}

func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return nil
	}
	return os.WriteFile(path, b, 0o644)
}

func genUnimplemented(ops []*operation) ([]byte, error) {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("package httpapi\n\nimport (\n\t\"context\"\n\n\t\"github.com/pierhq/pier/server/api\"\n)\n\n")
	b.WriteString("// Unimplemented answers every operation with plan:not_implemented. The\n")
	b.WriteString("// handler embeds it and overrides what is served.\n")
	b.WriteString("type Unimplemented struct{}\n\n")
	for _, op := range ops {
		n := goName(op.ID)
		fmt.Fprintf(&b, "func (Unimplemented) %s(ctx context.Context, request api.%sRequestObject) (api.%sResponseObject, error) {\n\treturn nil, notImplemented(%q)\n}\n\n", n, n, n, op.ID)
	}
	return gofmt([]byte(b.String()))
}
