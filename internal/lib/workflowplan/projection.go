package workflowplan

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// A prepared workflow (what prepare_workflow and get_workflow answer)
// carries the signed plan and, beside it, an unsigned projection of it for
// people to read: totals, steps, tools, prices. Nothing but the signature
// covers the plan, so a verifier that checked only signedPlan would pass a
// projection edited to show another total or another tool. CheckProjection
// closes that: every member the plan determines must say what the signed
// plan says, and a member it does not know is refused.

// unsignedMembers are the prepared workflow's members the plan does not
// hold: the workflow's state on the server, which the signature cannot
// vouch for.
var unsignedMembers = map[string]bool{"createdAt": true, "state": true, "taskId": true,
	// The envelope members every mutation carries (SPEC §2.1): the
	// preparation's receipt, its undo and the project's budget now.
	"receipt": true, "undo": true, "budgetRemainingUsd": true}

// Projection is the part of a prepared workflow that follows from the
// signed plan, in its JSON form: the server's projection and what a
// verifier expects of one.
func Projection(p Plan, digest, kid string) map[string]any {
	steps := make([]any, 0, len(p.Steps))
	for _, s := range p.Steps {
		st := map[string]any{
			"id": s.ID, "tool": s.Tool, "arguments": s.Arguments, "after": s.After,
			"priceUsd": float64(s.PriceMicro) / 1e6, "irreversible": s.Irreversible, "needsApproval": s.NeedsApproval,
		}
		if s.Approval != "" {
			st["approvalReason"] = s.Approval
		}
		steps = append(steps, st)
	}
	versions := make([]any, 0, len(p.Versions))
	for _, v := range p.Versions {
		versions = append(versions, map[string]any{"type": v.Type, "id": v.ID, "version": v.Version})
	}
	return map[string]any{
		"workflowId": p.WorkflowID, "projectId": p.ProjectID, "digest": digest, "keyId": kid,
		"totalUsd": float64(p.TotalMicro) / 1e6, "steps": steps, "versions": versions,
	}
}

// ProjectionError is a prepared workflow whose unsigned members disagree
// with its signed plan.
type ProjectionError struct {
	// Path names the first member that disagrees, as data.steps[1].tool.
	Path      string
	Want, Got string
}

func (e *ProjectionError) Error() string {
	switch {
	case e.Got == "":
		return fmt.Sprintf("%s is missing; the signed plan has %s", e.Path, e.Want)
	case e.Want == "":
		return fmt.Sprintf("%s (%s) is not part of a prepared workflow and the signature does not cover it", e.Path, e.Got)
	}
	return fmt.Sprintf("%s reads %s but the signed plan says %s", e.Path, e.Got, e.Want)
}

// CheckProjection checks a prepared workflow's data object against its
// signed plan (already verified, with its digest and kid): every member
// the plan determines must equal the plan's, and no member may be one the
// plan does not know, besides signedPlan and the unsigned state members.
// It returns the unsigned members present, which the signature does not
// vouch for.
func CheckProjection(p Plan, digest, kid string, data []byte) (unsigned []string, err error) {
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		return nil, fmt.Errorf("the prepared workflow is not a JSON object: %v", err)
	}
	var want map[string]any
	b, _ := json.Marshal(Projection(p, digest, kid))
	if err := json.Unmarshal(b, &want); err != nil {
		return nil, err
	}
	for _, k := range memberNames(want, got) {
		w, inPlan := want[k]
		g, present := got[k]
		switch {
		case k == "signedPlan":
		case unsignedMembers[k]:
			unsigned = append(unsigned, k)
		case !inPlan:
			return nil, &ProjectionError{Path: "data." + k, Got: short(g)}
		case !present:
			return nil, &ProjectionError{Path: "data." + k, Want: short(w)}
		default:
			if e := firstDiff("data."+k, w, g); e != nil {
				return nil, e
			}
		}
	}
	return unsigned, nil
}

// memberNames is the sorted union of two objects' member names: the
// order in which a difference is looked for, so that it is always the
// same one that is reported.
func memberNames(want, got map[string]any) []string {
	keys := slices.Collect(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// firstDiff is the first place got differs from want, in a stable order.
func firstDiff(path string, want, got any) *ProjectionError {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		for _, k := range memberNames(w, g) {
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !wok:
				return &ProjectionError{Path: path + "." + k, Got: short(gv)}
			case !gok:
				return &ProjectionError{Path: path + "." + k, Want: short(wv)}
			}
			if e := firstDiff(path+"."+k, wv, gv); e != nil {
				return e
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		if len(g) != len(w) {
			return &ProjectionError{Path: path, Want: strconv.Itoa(len(w)) + " entries", Got: strconv.Itoa(len(g)) + " entries"}
		}
		for i := range w {
			if e := firstDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); e != nil {
				return e
			}
		}
		return nil
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return &ProjectionError{Path: path, Want: short(want), Got: short(got)}
}

// short renders a value for an error message.
func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "…"
	}
	return string(b)
}
