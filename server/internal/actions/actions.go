// Package actions builds the typed next steps that every envelope carries.
// A tool action names the operation, its HTTP method and concrete path, the
// headers it needs and the actor who must take it, all derived from the
// contract's operation table so they cannot drift from the routes.
package actions

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/jsonappend"
	"github.com/pierhq/pier/server/internal/operation"
)

// ToolNeeding is Tool for a call that also needs arguments the contract
// leaves optional but this call cannot go without (an edge launch's
// bundleId): they are listed in missingArguments when args lacks them.
func ToolNeeding(id string, actor models.Actor, args map[string]any, needed ...string) models.Action {
	a := Tool(id, actor, args)
	t, err := a.AsToolAction()
	if err != nil {
		return a
	}
	var missing []string
	if t.MissingArguments != nil {
		missing = *t.MissingArguments
	}
	for _, n := range needed {
		if _, ok := args[n]; !ok && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.MissingArguments = &missing
	}
	return wrapTool(t)
}

// Tool returns an action calling operation id with args. Path parameters are
// filled from args; the rest stay as arguments. Required arguments args
// lacks are listed in missingArguments.
func Tool(id string, actor models.Actor, args map[string]any) models.Action {
	return wrapTool(toolAction(id, actor, args))
}

// toolAction is Tool's action before it goes into the union.
func toolAction(id string, actor models.Actor, args map[string]any) models.ToolAction {
	op, ok := operation.Lookup(id)
	if !ok {
		panic(fmt.Sprintf("actions: unknown operation %q", id))
	}
	path := op.Path
	for k, v := range args {
		token := "{" + k + "}"
		if strings.Contains(path, token) {
			path = strings.ReplaceAll(path, token, url.PathEscape(fmt.Sprint(v)))
		}
	}
	var headers []string
	switch op.Authority {
	case "agent", "sandbox_agent":
		headers = append(headers, "Authorization")
	}
	if op.HasBody {
		headers = append(headers, "Content-Type")
	}
	if op.Idempotent {
		headers = append(headers, "Idempotency-Key")
	}
	t := models.ToolAction{
		Kind:  models.Tool,
		Actor: actor,
		Tool:  id,
		Http:  models.HttpCall{Method: models.HttpCallMethod(op.Method), Path: path},
	}
	if len(args) > 0 {
		t.Arguments = &args
	}
	// Whatever the operation requires and the action does not carry is
	// named, so that no action is a dead end: the agent knows what it must
	// still supply.
	var missing []string
	for _, r := range op.Required {
		if _, ok := args[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		t.MissingArguments = &missing
	}
	if len(headers) > 0 {
		t.RequiredHeaders = &headers
	}
	return t
}

// Wrap puts a typed action into the union.
func Wrap(v any) models.Action { return wrap(v) }

// wrap stores v as the union's JSON. The generated From* methods merge JSON
// documents to set the discriminator, which costs more than the whole rest
// of a search; every variant here already carries its kind.
func wrap(v any) models.Action {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var a models.Action
	if err := a.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return a
}

// wrapTool is wrap for a tool action, whose JSON is written without
// reflection (jsonappend.ToolAction: json.Marshal's bytes, which
// TestWrapToolIsWrap compares): every answer offers one or more.
func wrapTool(t models.ToolAction) models.Action {
	var a models.Action
	if err := a.UnmarshalJSON(jsonappend.ToolAction(nil, &t)); err != nil {
		panic(err)
	}
	return a
}

// ToolAction is Tool without the union wrapper, for undo commands.
// It is built as Tool builds it, without the trip through the union's
// JSON and back, which cost a write as much as its ledger entry.
func ToolAction(id string, actor models.Actor, args map[string]any) models.ToolAction {
	return toolAction(id, actor, args)
}

// Retry returns a tool action that repeats a call after a wait.
func Retry(id string, actor models.Actor, args map[string]any, afterSeconds int) models.Action {
	t := ToolAction(id, actor, args)
	t.RetryAfterSeconds = &afterSeconds
	return wrapTool(t)
}

// URL returns an action sending a person to a URL.
func URL(u string, purpose models.UrlActionPurpose, actor models.Actor) models.Action {
	return wrap(models.UrlAction{Kind: models.Url, Actor: actor, Url: u, Purpose: purpose})
}

// Manual returns an action naming a step from the closed list.
func Manual(step models.ManualActionStep, actor models.Actor) models.Action {
	return wrap(models.ManualAction{Kind: models.Manual, Actor: actor, Step: step})
}

// Stop returns the terminal action.
func Stop(reason models.StopActionReason) models.Action {
	return wrap(models.StopAction{Kind: models.Stop, Reason: reason})
}

// Page is what a page of a list leaves to do: first, then the next page
// when there is one (the filters carried along), then stop.
func Page(op string, next *string, filters map[string]any, first ...models.Action) []models.Action {
	out := append([]models.Action{}, first...)
	if next != nil {
		args := map[string]any{"cursor": *next}
		for k, v := range filters {
			args[k] = v
		}
		out = append(out, Tool(op, "agent", args))
	}
	return append(out, Stop("done"))
}

// Gate is what to do while a human decides a task's gate: the human opens
// the approval page, and the agent polls the task once they have.
func Gate(taskID, approvalURL string) []models.Action {
	poll := ToolAction("get_task", "agent", map[string]any{"id": taskID})
	after := []string{"approve"}
	poll.After = &after
	wait := 5
	poll.RetryAfterSeconds = &wait
	u, _ := URL(approvalURL, "approve", "human").AsUrlAction()
	id := "approve"
	u.Id = &id
	return []models.Action{wrap(u), wrapTool(poll)}
}

// Names renders actions as a reader scans them: a tool by its name, a URL
// as url:<purpose>, a manual step as manual:<step> and a stop as
// stop:<reason> (any other kind by its kind).
func Names(acts []models.Action) []string {
	var out []string
	for _, a := range acts {
		kind, _ := a.Discriminator()
		switch kind {
		case "tool":
			ta, _ := a.AsToolAction()
			out = append(out, ta.Tool)
		case "url":
			u, _ := a.AsUrlAction()
			out = append(out, "url:"+string(u.Purpose))
		case "manual":
			m, _ := a.AsManualAction()
			out = append(out, "manual:"+string(m.Step))
		case "stop":
			st, _ := a.AsStopAction()
			out = append(out, "stop:"+string(st.Reason))
		default:
			out = append(out, kind)
		}
	}
	return out
}
