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
	deps := make([][]string, len(steps))
	for i, s := range steps {
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
			if err != nil {
				return
			}
			if !strings.Contains(v, "${") {
				return
			}
			m := refRE().FindStringSubmatch(v)
			if m == nil {
				err = invalid(field+".arguments", "%q is not a reference; write ${steps.ID.FIELD}", v)
				return
			}
			j, ok := index[m[1]]
			if !ok {
				err = invalid(field+".arguments", "%s names no step %q", v, m[1])
				return
			}
			if _, ok := outputs[string(steps[j].Tool)][m[2]]; !ok {
				err = invalid(field+".arguments", "%s: a %s step yields %s", v, steps[j].Tool, strings.Join(fieldNames(string(steps[j].Tool)), ", "))
				return
			}
			set[m[1]] = true
		})
		if err != nil {
			return nil, err
		}
		if set[s.Id] {
			return nil, invalid(field, "the step waits for itself")
		}
		for d := range set {
			deps[i] = append(deps[i], d)
		}
		slices.Sort(deps[i])
	}
	// Kahn's algorithm, always taking the earliest written ready step.
	done := map[string]bool{}
	var out []models.WorkflowStep
	for len(out) < len(steps) {
		picked := -1
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
				picked = i
				break
			}
		}
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
