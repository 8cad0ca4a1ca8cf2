package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// node is a decoded YAML or JSON value: map[string]any, []any, string,
// float64, bool or nil.
type node = any

func loadRaw(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		return nil, err
	}
	// Round-trip through JSON so every value has its JSON type.
	j, err := json.Marshal(y)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func obj(v node) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(v node) string {
	s, _ := v.(string)
	return s
}

func list(v node) []any {
	l, _ := v.([]any)
	return l
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// resolve follows a local $ref.
func resolve(spec map[string]any, v node) map[string]any {
	m := obj(v)
	for i := 0; i < 16 && m != nil; i++ {
		ref := str(m["$ref"])
		if ref == "" {
			return m
		}
		m = lookupRef(spec, ref)
	}
	return m
}

func lookupRef(spec map[string]any, ref string) map[string]any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var cur node = spec
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = obj(cur)[part]
	}
	return obj(cur)
}

type param struct {
	Name        string
	In          string
	Required    bool
	Description string
	Schema      map[string]any // resolved
	RawSchema   map[string]any
}

type bodyField struct {
	Name        string
	Required    bool
	Description string
	Schema      map[string]any // resolved
	RawSchema   map[string]any
}

type cliExt struct {
	Command string   `json:"command"`
	Exclude bool     `json:"exclude"`
	Args    []string `json:"args"`
	Table   *struct {
		Path    string   `json:"path"`
		Columns []string `json:"columns"`
	} `json:"table"`
}

type mcpExt struct {
	ReadOnly    bool `json:"readOnly"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
	Exclude     bool `json:"exclude"`
}

type operation struct {
	ID          string
	Method      string
	Path        string
	Summary     string
	Description string
	Tags        []string
	Params      []param // path and query, in spec order
	Idempotent  bool    // declares Idempotency-Key
	// IdempotencyKeyRequired: the header is required (an operation that
	// moves money), so the MCP tool's idempotencyKey argument is too.
	IdempotencyKeyRequired bool
	Body                   *map[string]any
	BodyRequired           bool
	BodyFields             []bodyField
	BodyMedia              string
	SuccessStatus          int
	SuccessMedia           string
	SuccessSchema          string // component name, or "" for a plain string
	Anonymous              bool
	Authority              string
	RateLimit              string
	BodyLimit              int64
	Pure                   bool
	Scope                  string
	// InputRequired: the answer can be a task waiting for a human
	// (x-input-required).
	InputRequired bool
	CLI           cliExt
	MCP           mcpExt
}

var methodOrder = []string{"get", "put", "post", "patch", "delete"}

func collectOperations(spec map[string]any) ([]*operation, error) {
	var ops []*operation
	seen := map[string]bool{}
	paths := obj(spec["paths"])
	for _, path := range sortedKeys(paths) {
		item := obj(paths[path])
		for _, method := range methodOrder {
			raw := obj(item[method])
			if raw == nil {
				continue
			}
			op, err := parseOperation(spec, path, strings.ToUpper(method), raw)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", strings.ToUpper(method), path, err)
			}
			if seen[op.ID] {
				return nil, fmt.Errorf("duplicate operationId %q", op.ID)
			}
			seen[op.ID] = true
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].ID < ops[j].ID })
	return ops, nil
}

func parseOperation(spec map[string]any, path, method string, raw map[string]any) (*operation, error) {
	op := &operation{
		ID:          str(raw["operationId"]),
		Method:      method,
		Path:        path,
		Summary:     str(raw["summary"]),
		Description: strings.TrimSpace(str(raw["description"])),
		Authority:   str(raw["x-authority"]),
		RateLimit:   str(raw["x-rate-limit"]),
	}
	if op.ID == "" {
		return nil, fmt.Errorf("missing operationId")
	}
	if op.Authority == "" {
		return nil, fmt.Errorf("%s: missing x-authority", op.ID)
	}
	for _, t := range list(raw["tags"]) {
		op.Tags = append(op.Tags, str(t))
	}
	if sec, ok := raw["security"]; ok && len(list(sec)) == 0 {
		op.Anonymous = true
	}
	op.Pure, _ = raw["x-pure"].(bool)
	op.InputRequired, _ = raw["x-input-required"].(bool)
	op.Scope = str(raw["x-scope"])
	if op.Authority == "agent" && op.Scope == "" {
		return nil, fmt.Errorf("%s: an agent operation needs x-scope", op.ID)
	}
	if op.Scope == "none" {
		// Any valid key may call it (whoami): said outright, never by
		// leaving x-scope out.
		op.Scope = ""
	}
	if v, ok := raw["x-body-limit"].(float64); ok {
		op.BodyLimit = int64(v)
	}
	if err := decodeExt(raw["x-cli"], &op.CLI); err != nil {
		return nil, err
	}
	if err := decodeExt(raw["x-mcp"], &op.MCP); err != nil {
		return nil, err
	}
	if op.CLI.Command == "" && !op.CLI.Exclude {
		return nil, fmt.Errorf("%s: missing x-cli.command", op.ID)
	}

	if err := op.readParams(spec, raw); err != nil {
		return nil, err
	}
	op.readBody(spec, raw)
	op.readSuccess(spec, raw)
	if op.SuccessStatus == 0 {
		return nil, fmt.Errorf("%s: no 2xx response", op.ID)
	}
	return op, nil
}

// readParams reads the path and query parameters; the one header an
// operation takes is Idempotency-Key, which makes it idempotent.
func (op *operation) readParams(spec map[string]any, raw map[string]any) error {
	for _, p := range list(raw["parameters"]) {
		pm := resolve(spec, p)
		name, in := str(pm["name"]), str(pm["in"])
		if in == "header" {
			if name == "Idempotency-Key" {
				op.Idempotent = true
				op.IdempotencyKeyRequired, _ = pm["required"].(bool)
				continue
			}
			return fmt.Errorf("%s: unsupported header parameter %q", op.ID, name)
		}
		required, _ := pm["required"].(bool)
		op.Params = append(op.Params, param{
			Name:        name,
			In:          in,
			Required:    required,
			Description: strings.TrimSpace(str(pm["description"])),
			Schema:      resolve(spec, pm["schema"]),
			RawSchema:   obj(pm["schema"]),
		})
	}
	return nil
}

// readBody reads the request body's media type and its top-level fields.
func (op *operation) readBody(spec map[string]any, raw map[string]any) {
	if rb := resolve(spec, raw["requestBody"]); rb != nil {
		op.BodyRequired, _ = rb["required"].(bool)
		content := obj(rb["content"])
		for _, media := range sortedKeys(content) {
			op.BodyMedia = media
			raw := obj(obj(content[media])["schema"])
			op.Body = &raw
			schema := resolve(spec, raw)
			req := map[string]bool{}
			for _, r := range list(schema["required"]) {
				req[str(r)] = true
			}
			props := obj(schema["properties"])
			for _, name := range sortedKeys(props) {
				op.BodyFields = append(op.BodyFields, bodyField{
					Name:        name,
					Required:    req[name],
					Description: strings.TrimSpace(str(resolve(spec, props[name])["description"])),
					Schema:      resolve(spec, props[name]),
					RawSchema:   obj(props[name]),
				})
			}
		}
	}
}

// readSuccess reads the first 2xx response: its status, media type and
// schema.
func (op *operation) readSuccess(spec map[string]any, raw map[string]any) {
	responses := obj(raw["responses"])
	for _, code := range sortedKeys(responses) {
		if len(code) != 3 || code[0] != '2' {
			continue
		}
		var status int
		fmt.Sscanf(code, "%d", &status)
		op.SuccessStatus = status
		resp := resolve(spec, responses[code])
		content := obj(resp["content"])
		for _, media := range sortedKeys(content) {
			op.SuccessMedia = media
			ref := str(obj(obj(content[media])["schema"])["$ref"])
			op.SuccessSchema = strings.TrimPrefix(ref, "#/components/schemas/")
		}
		break
	}
}

func decodeExt(v node, out any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

type blockedBy struct {
	Code        string `json:"code"`
	Status      int    `json:"status"`
	Retryable   bool   `json:"retryable"`
	Description string `json:"description"`
}

func collectBlockedBy(spec map[string]any) ([]blockedBy, error) {
	schema := lookupRef(spec, "#/components/schemas/BlockedBy")
	var table []blockedBy
	if err := decodeExt(schema["x-blocked-by"], &table); err != nil {
		return nil, fmt.Errorf("x-blocked-by: %w", err)
	}
	enum := map[string]bool{}
	for _, e := range list(schema["enum"]) {
		enum[str(e)] = true
	}
	seen := map[string]bool{}
	for _, b := range table {
		if !enum[b.Code] {
			return nil, fmt.Errorf("x-blocked-by: %q is not in the BlockedBy enum", b.Code)
		}
		if seen[b.Code] {
			return nil, fmt.Errorf("x-blocked-by: %q listed twice", b.Code)
		}
		seen[b.Code] = true
	}
	for code := range enum {
		if !seen[code] {
			return nil, fmt.Errorf("BlockedBy %q has no x-blocked-by entry", code)
		}
	}
	sort.Slice(table, func(i, j int) bool { return table[i].Code < table[j].Code })
	return table, nil
}

// goName turns snake_case or kebab-case into Go's CamelCase the way
// oapi-codegen does for operation ids.
func goName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' || r == '-' || r == '.' || r == ' ' {
			up = true
			continue
		}
		if up {
			b.WriteString(strings.ToUpper(string(r)))
			up = false
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// kebab turns camelCase into kebab-case for flag names.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r + ('a' - 'A'))
			continue
		}
		if r == '_' {
			b.WriteByte('-')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
