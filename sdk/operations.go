package sdk

import "strings"

// Operation describes one contract operation; the table is generated.
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
	for _, op := range Operations {
		if op.ID == id {
			return op, true
		}
	}
	return Operation{}, false
}

// MatchOperation finds the operation a method and concrete path belong to.
// A literal segment beats a parameter, as in net/http's ServeMux:
// /v1/domains/search is search_domains, not get_domain.
func MatchOperation(method, path string) (Operation, bool) {
	best, bestParams, found := Operation{}, 0, false
	for _, op := range Operations {
		if op.Method != method || !matchPath(op.Path, path) {
			continue
		}
		if n := strings.Count(op.Path, "{"); !found || n < bestParams {
			best, bestParams, found = op, n, true
		}
	}
	return best, found
}

func matchPath(template, path string) bool {
	t := strings.Split(strings.Trim(template, "/"), "/")
	p := strings.Split(strings.Trim(path, "/"), "/")
	if len(t) != len(p) {
		return false
	}
	for i := range t {
		if strings.HasPrefix(t[i], "{") {
			if p[i] == "" {
				return false
			}
			continue
		}
		if t[i] != p[i] {
			return false
		}
	}
	return true
}
