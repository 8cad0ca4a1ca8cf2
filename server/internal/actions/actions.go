// Package actions builds the typed next steps that every envelope carries.
// A tool action names the operation, its HTTP method and concrete path, the
// headers it needs and the actor who must take it, all derived from the
// contract's operation table so they cannot drift from the routes.
package actions

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/pierhq/pier/sdk"
)

// Tool returns an action calling operation id with args. Path parameters are
// filled from args; the rest stay as arguments.
func Tool(id string, actor sdk.Actor, args map[string]any) sdk.Action {
	op, ok := sdk.LookupOperation(id)
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
	t := sdk.ToolAction{
		Kind:  sdk.Tool,
		Actor: actor,
		Tool:  id,
		Http:  sdk.HttpCall{Method: sdk.HttpCallMethod(op.Method), Path: path},
	}
	if len(args) > 0 {
		t.Arguments = &args
	}
	if len(headers) > 0 {
		t.RequiredHeaders = &headers
	}
	var a sdk.Action
	if err := a.FromToolAction(t); err != nil {
		panic(err)
	}
	return a
}

// ToolAction is Tool without the union wrapper, for undo commands.
func ToolAction(id string, actor sdk.Actor, args map[string]any) sdk.ToolAction {
	t, err := Tool(id, actor, args).AsToolAction()
	if err != nil {
		panic(err)
	}
	return t
}

// Retry returns a tool action that repeats a call after a wait.
func Retry(id string, actor sdk.Actor, args map[string]any, afterSeconds int) sdk.Action {
	t := ToolAction(id, actor, args)
	t.RetryAfterSeconds = &afterSeconds
	var a sdk.Action
	a.FromToolAction(t)
	return a
}

// URL returns an action sending a person to a URL.
func URL(u string, purpose sdk.UrlActionPurpose, actor sdk.Actor) sdk.Action {
	var a sdk.Action
	a.FromUrlAction(sdk.UrlAction{Kind: sdk.Url, Actor: actor, Url: u, Purpose: purpose})
	return a
}

// Manual returns an action naming a step from the closed list.
func Manual(step sdk.ManualActionStep, actor sdk.Actor) sdk.Action {
	var a sdk.Action
	a.FromManualAction(sdk.ManualAction{Kind: sdk.Manual, Actor: actor, Step: step})
	return a
}

// Stop returns the terminal action.
func Stop(reason sdk.StopActionReason) sdk.Action {
	var a sdk.Action
	a.FromStopAction(sdk.StopAction{Kind: sdk.Stop, Reason: reason})
	return a
}
