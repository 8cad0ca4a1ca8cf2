package contracttest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/pierhq/pier/sdk"
)

// CheckActions walks every typed tool action in a JSON answer, wherever it
// sits (the envelope's actions, data.actions, an undo's command, a task's
// result), and holds each to its target operation: the operation exists
// and the method and path are its own; every argument it requires is in
// arguments or named in missingArguments; every argument it carries is one
// the operation takes, with a value its schema accepts. It returns the
// problems found.
func CheckActions(body []byte) []string {
	once.Do(setup)
	if setupErr != nil {
		return []string{setupErr.Error()}
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var problems []string
	walk(v, func(a map[string]any) {
		problems = append(problems, checkToolAction(a)...)
	})
	return problems
}

func walk(v any, visit func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if x["kind"] == "tool" {
			if _, ok := x["tool"].(string); ok {
				visit(x)
			}
		}
		for _, e := range x {
			walk(e, visit)
		}
	case []any:
		for _, e := range x {
			walk(e, visit)
		}
	}
}

// argumentSchemas maps an operation's argument names (path and query
// parameters, body members) to their schemas.
func argumentSchemas(opID string) (map[string]*openapi3.Schema, bool) {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID != opID {
				continue
			}
			out := map[string]*openapi3.Schema{}
			params := append(openapi3.Parameters{}, item.Parameters...)
			params = append(params, op.Parameters...)
			for _, p := range params {
				if p.Value == nil || p.Value.In == "header" || p.Value.Schema == nil {
					continue
				}
				out[p.Value.Name] = p.Value.Schema.Value
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					for name, ps := range allProperties(mt.Schema.Value) {
						out[name] = ps
					}
				}
			}
			return out, true
		}
	}
	return nil, false
}

func allProperties(s *openapi3.Schema) map[string]*openapi3.Schema {
	out := map[string]*openapi3.Schema{}
	if s == nil {
		return out
	}
	for name, p := range s.Properties {
		out[name] = p.Value
	}
	for _, sub := range s.AllOf {
		for name, p := range allProperties(sub.Value) {
			out[name] = p
		}
	}
	return out
}

func checkToolAction(a map[string]any) []string {
	tool := a["tool"].(string)
	op, ok := sdk.LookupOperation(tool)
	if !ok {
		return []string{fmt.Sprintf("action names tool %q, which is no operation", tool)}
	}
	var problems []string
	fail := func(format string, args ...any) {
		problems = append(problems, tool+": "+fmt.Sprintf(format, args...))
	}
	if h, ok := a["http"].(map[string]any); ok {
		method, _ := h["method"].(string)
		path, _ := h["path"].(string)
		if method != op.Method {
			fail("http.method %s, the operation's is %s", method, op.Method)
		}
		if !strings.Contains(path, "{") {
			if m, ok := sdk.MatchOperation(method, path); !ok || m.ID != op.ID {
				fail("http.path %s is not the operation's path %s", path, op.Path)
			}
		}
	}
	args, _ := a["arguments"].(map[string]any)
	missing := map[string]bool{}
	if l, ok := a["missingArguments"].([]any); ok {
		for _, m := range l {
			if s, ok := m.(string); ok {
				missing[s] = true
			}
		}
	}
	for _, r := range op.Required {
		if _, ok := args[r]; !ok && !missing[r] {
			fail("required argument %q is neither carried nor listed in missingArguments", r)
		}
	}
	schemas, ok := argumentSchemas(tool)
	if !ok {
		fail("not in openapi.yaml")
		return problems
	}
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		s, ok := schemas[name]
		if !ok {
			fail("argument %q is not one the operation takes", name)
			continue
		}
		if s == nil {
			continue
		}
		if err := s.VisitJSON(args[name], openapi3.MultiErrors()); err != nil {
			fail("argument %q does not match its schema: %v", name, strings.Join(strings.Fields(err.Error()), " "))
		}
	}
	for m := range missing {
		if _, ok := schemas[m]; !ok {
			fail("missingArguments names %q, which the operation does not take", m)
		}
	}
	return problems
}
