package main

import (
	"fmt"
	"sort"
	"strings"
)

const draft202012 = "https://json-schema.org/draft/2020-12/schema"

// publishedSchemas names the JSON Schemas the server serves at /schemas/NAME.
// Each is self-contained: the root component plus every component it reaches,
// under $defs.
var publishedSchemas = map[string]string{
	"envelope.json":                 "", // the generic success envelope, built below
	"error.json":                    "ErrorEnvelope",
	"action.json":                   "Action",
	"actions.json":                  "Actions",
	"receipt.json":                  "Receipt",
	"undo.json":                     "Undo",
	"sandbox-reference.json":        "SandboxReferenceManifest",
	"workflow.json":                 "WorkflowRequest",
	"workflow-envelope.json":        "WorkflowEnvelope",
	"conformance-run-v1.json":       "ConformanceRunReportV1",
	"conformance-run-v2.json":       "ConformanceRunReportV2",
	"domain-search-envelope.json":   "DomainSearchEnvelope",
	"estimate-envelope.json":        "EstimateEnvelope",
	"task-envelope.json":            "TaskEnvelope",
	"sandbox-session-envelope.json": "SandboxSessionCreatedEnvelope",
	"sandbox-session-read.json":     "SandboxSessionEnvelope",
	"sandbox-attempt-envelope.json": "SandboxAttemptEnvelope",
	"mutation-result.json":          "MutationResult",
}

func genPublishedSchemas(spec map[string]any) (map[string][]byte, error) {
	out := map[string][]byte{}
	names := make([]string, 0, len(publishedSchemas))
	for n := range publishedSchemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, file := range names {
		root := publishedSchemas[file]
		var doc map[string]any
		if root == "" {
			doc = genericEnvelope(spec)
		} else {
			var err error
			doc, err = bundleSchema(spec, map[string]any{"$ref": "#/components/schemas/" + root})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
		}
		doc["$id"] = "/schemas/" + file
		b, err := marshalJSON(doc)
		if err != nil {
			return nil, err
		}
		out[file] = b
	}
	return out, nil
}

func genericEnvelope(spec map[string]any) map[string]any {
	env := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"data", "actions", "formatVersion"},
		"properties": map[string]any{
			"data":          map[string]any{"type": "object"},
			"actions":       map[string]any{"$ref": "#/components/schemas/Actions"},
			"formatVersion": map[string]any{"$ref": "#/components/schemas/FormatVersion"},
			"replayed":      map[string]any{"type": "boolean", "const": true},
		},
	}
	doc, _ := bundleSchema(spec, env)
	doc["title"] = "Pier success envelope"
	return doc
}

// bundleSchema converts an OpenAPI 3.0 schema into a self-contained JSON
// Schema 2020-12 document.
func bundleSchema(spec map[string]any, root map[string]any) (map[string]any, error) {
	defs := map[string]any{}
	var walkErr error
	var visit func(name string)
	visit = func(name string) {
		if _, ok := defs[name]; ok {
			return
		}
		s := lookupRef(spec, "#/components/schemas/"+name)
		if s == nil {
			walkErr = fmt.Errorf("unknown schema %q", name)
			return
		}
		defs[name] = nil // mark before converting: schemas may recurse
		defs[name] = convertSchema(s, visit)
	}
	top := convertSchema(root, visit)
	if walkErr != nil {
		return nil, walkErr
	}
	out := map[string]any{"$schema": draft202012}
	for k, v := range obj(top) {
		out[k] = v
	}
	if len(defs) > 0 {
		out["$defs"] = defs
	}
	return out, nil
}

// convertSchema rewrites one OpenAPI 3.0 schema as JSON Schema 2020-12:
// refs point into $defs, nullable becomes a null type, discriminators and
// vendor extensions go.
func convertSchema(s map[string]any, visit func(string)) any {
	if s == nil {
		return map[string]any{}
	}
	if ref := str(s["$ref"]); ref != "" {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		visit(name)
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	out := map[string]any{}
	for k, v := range s {
		switch {
		case strings.HasPrefix(k, "x-"), k == "discriminator", k == "nullable", k == "example", k == "xml", k == "externalDocs":
		case k == "properties":
			props := map[string]any{}
			for name, p := range obj(v) {
				props[name] = convertSchema(obj(p), visit)
			}
			out[k] = props
		case k == "items", k == "not":
			out[k] = convertSchema(obj(v), visit)
		case k == "additionalProperties":
			if m := obj(v); m != nil {
				out[k] = convertSchema(m, visit)
			} else {
				out[k] = v
			}
		case k == "allOf", k == "oneOf", k == "anyOf":
			var l []any
			for _, e := range list(v) {
				l = append(l, convertSchema(obj(e), visit))
			}
			out[k] = l
		default:
			out[k] = v
		}
	}
	if nullable, _ := s["nullable"].(bool); nullable {
		_, all := out["allOf"]
		_, one := out["oneOf"]
		_, anyOf := out["anyOf"]
		if all || one || anyOf {
			// A composed schema constrains null too; offer null beside it.
			return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
		}
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
			if enum := list(out["enum"]); enum != nil {
				out["enum"] = append(enum, nil)
			}
		} else {
			return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
		}
	}
	return out
}
