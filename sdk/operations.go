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
func MatchOperation(method, path string) (Operation, bool) {
	for _, op := range Operations {
		if op.Method == method && matchPath(op.Path, path) {
			return op, true
		}
	}
	return Operation{}, false
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
