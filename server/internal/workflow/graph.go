package workflow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/apierr"
)

// Limits on a workflow document, beyond the contract's 50 steps.
const (
	MaxPlanBytes = 256 << 10
	maxDepth     = 8
)

// refRE is an argument that takes an earlier step's output.
var refRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\$\{steps\.([a-z][a-z0-9_]{0,39})\.([A-Za-z][A-Za-z0-9]{0,39})\}$`)
})

// outputs are the fields each tool's step yields to later steps, with a
// value of the right shape for validating a reference before it is known.
var outputs = map[string]map[string]any{
	"create_quote":     {"quoteId": "quo_reference", "decision": "ALLOW", "amountUsd": 1},
	"upload_assets":    {"bundleId": "bnd_reference"},
	"launch_service":   {"serviceId": "svc_reference", "taskId": "tsk_reference", "previewUrl": "https://reference.invalid/"},
	"teardown_service": {"taskId": "tsk_reference"},
	"setup_email":      {"taskId": "tsk_reference"},
	// The registrant step ends once the person confirmed.
	"set_registrant_contact": {"taskId": "tsk_reference"},
}

func invalid(field, problem string, args ...any) *apierr.Error {
	msg := fmt.Sprintf(problem, args...)
	return apierr.New("input:invalid", "the workflow is invalid: "+field+": "+msg).
		WithDetails(models.FieldProblem{Field: field, Problem: msg})
}

// order checks the graph (known tools, unique ids, references and after
// naming earlier-or-other steps, no cycle) and returns the steps in the
// order they run: topological, ties broken by the order written. Each
// step's After then lists every step it waits for, sorted.
func order(steps []models.WorkflowStep) ([]models.WorkflowStep, error) {
	index, err := indexSteps(steps)
	if err != nil {
		return nil, err
	}
	deps := make([][]string, len(steps))
	for i, s := range steps {
		if deps[i], err = dependencies(steps, index, i, s); err != nil {
			return nil, err
		}
	}
	return sortByDependencies(steps, deps)
}

// indexSteps checks each step on its own (a known tool, a unique id, no
// secrets) and maps the step IDs to their places.
func indexSteps(steps []models.WorkflowStep) (map[string]int, error) {
	index := map[string]int{}
	for i, s := range steps {
		field := fmt.Sprintf("body.steps.%d", i)
		if _, ok := outputs[string(s.Tool)]; !ok {
			return nil, invalid(field+".tool", "%q is not an operation a workflow runs (%s)", s.Tool, strings.Join(toolNames(), ", "))
		}
		if _, dup := index[s.Id]; dup {
			return nil, invalid(field+".id", "the id %q is used twice", s.Id)
		}
		// A plan's arguments are shown to humans, signed and kept: no
		// secret goes in them. Checked on the raw arguments, whatever the
		// operation's model says.
		if _, ok := s.Arguments["secrets"]; ok {
			return nil, invalid(field+".arguments.secrets", "a plan's arguments are shown and signed, so a workflow carries no secrets; "+
				"launch without them and set secrets with set_service_env after the launch")
		}
		index[s.Id] = i
	}
	return index, nil
}

// dependencies are the steps the i-th step waits for, sorted: those its
// After names and those its arguments' references name.
func dependencies(steps []models.WorkflowStep, index map[string]int, i int, s models.WorkflowStep) ([]string, error) {
	field := fmt.Sprintf("body.steps.%d", i)
	set := map[string]bool{}
	if s.After != nil {
		for _, a := range *s.After {
			if _, ok := index[a]; !ok {
				return nil, invalid(field+".after", "no step %q", a)
			}
			set[a] = true
		}
	}
	var err error
	walk(s.Arguments, 0, func(v string) {
		if err != nil || !strings.Contains(v, "${") {
			return
		}
		var id string
		if id, err = reference(steps, index, field, v); err == nil {
			set[id] = true
		}
	})
	if err != nil {
		return nil, err
	}
	if set[s.Id] {
		return nil, invalid(field, "the step waits for itself")
	}
	var deps []string
	for d := range set {
		deps = append(deps, d)
	}
	slices.Sort(deps)
	return deps, nil
}

// reference checks an argument written as ${steps.ID.FIELD}, naming a step
// and one of its outputs, and returns the step's ID.
func reference(steps []models.WorkflowStep, index map[string]int, field, v string) (string, error) {
	m := refRE().FindStringSubmatch(v)
	if m == nil {
		return "", invalid(field+".arguments", "%q is not a reference; write ${steps.ID.FIELD}", v)
	}
	j, ok := index[m[1]]
	if !ok {
		return "", invalid(field+".arguments", "%s names no step %q", v, m[1])
	}
	if _, ok := outputs[string(steps[j].Tool)][m[2]]; !ok {
		return "", invalid(field+".arguments", "%s: a %s step yields %s", v, steps[j].Tool, strings.Join(fieldNames(string(steps[j].Tool)), ", "))
	}
	return m[1], nil
}

// sortByDependencies is Kahn's algorithm, always taking the earliest
// written ready step; each step's After becomes its dependencies.
func sortByDependencies(steps []models.WorkflowStep, deps [][]string) ([]models.WorkflowStep, error) {
	done := map[string]bool{}
	var out []models.WorkflowStep
	for len(out) < len(steps) {
		picked := firstReady(steps, deps, done)
		if picked < 0 {
			var left []string
			for _, s := range steps {
				if !done[s.Id] {
					left = append(left, s.Id)
				}
			}
			return nil, invalid("body.steps", "the steps %s wait for each other in a cycle", strings.Join(left, ", "))
		}
		s := steps[picked]
		after := deps[picked]
		if after == nil {
			after = []string{}
		}
		s.After = &after
		out = append(out, s)
		done[s.Id] = true
	}
	return out, nil
}

// firstReady is the earliest written step not done whose dependencies all
// are, or -1.
func firstReady(steps []models.WorkflowStep, deps [][]string, done map[string]bool) int {
	for i, s := range steps {
		if done[s.Id] {
			continue
		}
		ready := true
		for _, d := range deps[i] {
			if !done[d] {
				ready = false
				break
			}
		}
		if ready {
			return i
		}
	}
	return -1
}

// walk calls f with every string in v, to a bounded depth.
func walk(v any, depth int, f func(string)) {
	if depth > maxDepth {
		return
	}
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, e := range x {
			walk(e, depth+1, f)
		}
	case []any:
		for _, e := range x {
			walk(e, depth+1, f)
		}
	}
}

// substitute returns a copy of v with each reference replaced by what
// lookup gives for it.
func substitute(v any, depth int, lookup func(step, field string) (any, bool)) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("arguments nest deeper than %d", maxDepth)
	}
	switch x := v.(type) {
	case string:
		m := refRE().FindStringSubmatch(x)
		if m == nil {
			return x, nil
		}
		out, ok := lookup(m[1], m[2])
		if !ok {
			return nil, fmt.Errorf("%s has no value yet", x)
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, err := substitute(e, depth+1, lookup)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, err := substitute(e, depth+1, lookup)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return v, nil
}

func toolNames() []string {
	var out []string
	for t := range outputs {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func fieldNames(tool string) []string {
	var out []string
	for f := range outputs[tool] {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}
