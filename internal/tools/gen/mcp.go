package main

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// genMCPTools writes the MCP tool table. A tool's inputSchema merges the
// operation's path and query parameters, an `idempotencyKey` argument when the
// operation declares Idempotency-Key, and the top-level body fields.
func genMCPTools(spec map[string]any, ops []*operation) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package mcp\n\n")
	b.WriteString("// Tools lists every operation that is an MCP tool, ordered by name.\n")
	b.WriteString("var Tools = []Tool{\n")
	for _, op := range ops {
		if op.MCP.Exclude {
			continue
		}
		schema, bindings, err := toolSchema(spec, op)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.ID, err)
		}
		js, err := json.Marshal(schema)
		if err != nil {
			return nil, err
		}
		desc := op.Summary
		if op.Description != "" {
			desc += "\n\n" + op.Description
		}
		fmt.Fprintf(&b, "\t{\n\t\tName: %q,\n\t\tTitle: %q,\n\t\tDescription: %q,\n", op.ID, op.Summary, desc)
		fmt.Fprintf(&b, "\t\tMethod: %q, Path: %q, Authority: %q, Anonymous: %t,\n", op.Method, op.Path, op.Authority, op.Anonymous)
		fmt.Fprintf(&b, "\t\tReadOnly: %t, Destructive: %t, Idempotent: %t, DeclaresIdempotencyKey: %t,\n", op.MCP.ReadOnly, op.MCP.Destructive, op.MCP.Idempotent, op.Idempotent)
		fmt.Fprintf(&b, "\t\tSuccessMedia: %q,\n", op.SuccessMedia)
		b.WriteString("\t\tArguments: []Binding{")
		for _, a := range bindings {
			fmt.Fprintf(&b, "{Name: %q, In: %q}, ", a[0], a[1])
		}
		b.WriteString("},\n")
		fmt.Fprintf(&b, "\t\tInputSchema: %q,\n\t},\n", string(js))
	}
	b.WriteString("}\n")
	return gofmt(b.Bytes())
}

func toolSchema(spec map[string]any, op *operation) (map[string]any, [][2]string, error) {
	props := map[string]any{}
	var required []any
	var bindings [][2]string
	add := func(name, in string, s map[string]any, req bool, desc string) error {
		if _, ok := props[name]; ok {
			return fmt.Errorf("argument %q is both a parameter and a body field", name)
		}
		if desc != "" && s["$ref"] != nil {
			s = map[string]any{"allOf": []any{s}, "description": desc}
		} else if desc != "" {
			c := map[string]any{}
			for k, v := range s {
				c[k] = v
			}
			c["description"] = desc
			s = c
		}
		props[name] = s
		if req {
			required = append(required, name)
		}
		bindings = append(bindings, [2]string{name, in})
		return nil
	}
	for _, p := range op.Params {
		if err := add(p.Name, p.In, p.RawSchema, p.Required, p.Description); err != nil {
			return nil, nil, err
		}
	}
	if op.Idempotent {
		key := lookupRef(spec, "#/components/parameters/IdempotencyKey")
		desc := "Sent as the Idempotency-Key header: the same key and arguments replay the stored result."
		if op.IdempotencyKeyRequired {
			desc = "Required: sent as the Idempotency-Key header, so that a retry is recognised as one: the same key and arguments replay the stored result."
		}
		if err := add("idempotencyKey", "header", obj(key["schema"]), op.IdempotencyKeyRequired, desc); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range op.BodyFields {
		if err := add(f.Name, "body", f.RawSchema, f.Required, ""); err != nil {
			return nil, nil, err
		}
	}
	root := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		root["required"] = required
	}
	doc, err := bundleSchema(spec, root)
	if err != nil {
		return nil, nil, err
	}
	return doc, bindings, nil
}
