// Package operation is the server's policy table: for every operation of
// the contract, who may call it and with which key scope, whether it takes
// an Idempotency-Key, its rate-limit class, body limit and purity. The
// table is generated from the contract's x- members by internal/gen.
package operation

import (
	"slices"

	"github.com/pierhq/pier/internal/lib/pathtemplate"
)

// Operation is one operation's policy.
type Operation struct {
	ID            string
	Method        string
	Path          string
	Authority     string // anonymous, agent, holder, sandbox_agent or human
	Anonymous     bool
	Idempotent    bool // declares Idempotency-Key
	RateLimit     string
	BodyLimit     int64
	SuccessStatus int
	HasBody       bool
	// Pure: the answer is a function of the request alone.
	Pure bool
	// Scope is the key scope an agent operation needs.
	Scope string
	// Required names the arguments the operation cannot go without:
	// required path and query parameters and the required members of a
	// required body.
	Required []string
	// InputRequired: the answer can be a task waiting for a human decision.
	InputRequired bool
	// MCPTool is the operation's MCP tool name, or "" when it is no tool.
	MCPTool string
}

// Lookup finds the operation with the given id.
func Lookup(id string) (Operation, bool) {
	return found(slices.IndexFunc(All, func(op Operation) bool { return op.ID == id }))
}

// Match finds the operation a method and concrete path belong to; a
// literal segment beats a parameter.
func Match(method, path string) (Operation, bool) {
	return found(pathtemplate.Route(All, method, path, func(op Operation) (string, string) { return op.Method, op.Path }))
}

func found(i int) (Operation, bool) {
	if i < 0 {
		return Operation{}, false
	}
	return All[i], true
}
