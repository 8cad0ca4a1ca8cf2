package sdk

import (
	"slices"

	"github.com/pierhq/pier/internal/lib/pathtemplate"
)

// Operation describes one contract operation as a client plans with it;
// the table is generated from the contract. The server keeps its own
// policy table (rate limits, body limits, purity) apart from the SDK.
type Operation struct {
	ID        string
	Method    string
	Path      string
	Authority string // anonymous, agent, holder, sandbox_agent or human
	// Idempotent: the operation takes an Idempotency-Key, and a retry with
	// the same key and body replays the first answer.
	Idempotent bool
	// ReadOnly: the operation changes nothing (a GET, a pure read, or a
	// POST that only asks), so sending it again after an unknown outcome
	// is safe.
	ReadOnly bool
	// Scope is the key scope an agent operation needs.
	Scope string
	// Required names the arguments the operation cannot go without:
	// required path and query parameters and the required members of a
	// required body. A tool action carries each or lists it in
	// missingArguments.
	Required []string
	// InputRequired: the answer can be a task waiting for a human decision
	// (input_required), which the CLI turns into exit code 5.
	InputRequired bool
	// MCPTool is the operation's MCP tool name, or "" when it is no tool.
	MCPTool string
}

// LookupOperation finds the operation with the given id.
func LookupOperation(id string) (Operation, bool) {
	return found(Operations, slices.IndexFunc(Operations, func(op Operation) bool { return op.ID == id }))
}

// MatchOperation finds the operation a method and concrete path belong to.
// A literal segment beats a parameter, as in net/http's ServeMux:
// /v1/domains/search is search_domains, not get_domain.
func MatchOperation(method, path string) (Operation, bool) {
	return found(Operations, pathtemplate.Route(Operations, method, path, func(op Operation) (string, string) { return op.Method, op.Path }))
}

func found(table []Operation, i int) (Operation, bool) {
	if i < 0 {
		return Operation{}, false
	}
	return table[i], true
}
