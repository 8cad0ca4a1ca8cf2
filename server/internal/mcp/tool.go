package mcp

// Tool is one MCP tool, generated from one operation.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Method and Path are the REST route the call is dispatched to.
	Method    string
	Path      string
	Authority string
	Anonymous bool
	// Annotations.
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	// DeclaresIdempotencyKey: the tool takes an idempotencyKey argument that
	// travels as the Idempotency-Key header.
	DeclaresIdempotencyKey bool
	SuccessMedia           string
	// Arguments says where each argument goes: path, query, header or body.
	Arguments []Binding
	// InputSchema is a JSON Schema 2020-12 document.
	InputSchema string
}

// Binding places one argument in the REST request.
type Binding struct {
	Name string
	In   string
}

// Lookup finds a tool by name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}
