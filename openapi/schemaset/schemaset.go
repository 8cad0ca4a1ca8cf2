// Package schemaset compiles the contract's published JSON Schemas, for
// the conformance runner and the contract tests. It is apart from package
// openapi so that what only reads the contract (pier capabilities) does not
// link the validator, whose packages every start of the CLI would
// initialise (bench/README.md, "CLI start").
package schemaset

import (
	"bytes"
	"io/fs"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/openapi"
)

// Compile compiles the published JSON Schemas (draft 2020-12), by
// file name ("error.json"), each able to refer to the others: what the
// conformance runner and the contract tests validate answers against.
func Compile() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	names, err := fs.Glob(openapi.Schemas, "schemas/*.json")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		b, err := fs.ReadFile(openapi.Schemas, n)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if err := c.AddResource("https://pier.invalid/"+n, doc); err != nil {
			return nil, err
		}
	}
	compiled := map[string]*jsonschema.Schema{}
	for _, n := range names {
		s, err := c.Compile("https://pier.invalid/" + n)
		if err != nil {
			return nil, err
		}
		compiled[strings.TrimPrefix(n, "schemas/")] = s
	}
	return compiled, nil
}
