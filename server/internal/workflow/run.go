package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/internal/lib/workflowplan"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/httpapi"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/tasks"
)

// permanent is a step failure that retrying cannot fix.
type permanent struct{ msg string }

func (p *permanent) Error() string { return p.msg }

// run is one run of a workflow task.
type run struct {
	e     *Engine
	t     store.Task
	w     store.Workflow
	plan  workflowplan.Plan
	p     *auth.Principal
	pl    payload
	steps []taskStep
	// current is the step being run, for the crash tests' pause.
	current string
}

// Run works a workflow task: its steps in order, each once. It returns
// tasks.Wait while a step waits on a launch, a teardown or a human.
func (e *Engine) Run(ctx context.Context, t store.Task) error {
	if service.TaskState(t.State).Ended() {
		return nil
	}
	w, err := e.cfg.Store.Workflows().ByTask(ctx, t.ID)
	if err != nil {
		return err
	}
	plan, err := decodePlan(w)
	if err != nil {
		return err
	}
	r := &run{e: e, t: t, w: w, plan: plan}
	if err := json.Unmarshal([]byte(t.Steps), &r.steps); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(t.Payload), &r.pl); err != nil {
		return err
	}
	r.p = principalOf(w, r.pl)
	if r.pl.Outputs == nil {
		r.pl.Outputs = map[string]map[string]any{}
	}
	if r.pl.Children == nil {
		r.pl.Children = map[string]string{}
	}
	ctx = httpapi.WithPrincipal(ctx, r.p)
	for i, s := range plan.Steps {
		st := &r.steps[i]
		if st.State == service.StepStateSucceeded {
			continue
		}
		now := e.cfg.Now().UTC()
		if st.StartedAt == nil {
			st.StartedAt = &now
		}
		st.State, r.t.State = "running", "running"
		r.current = s.ID
		out, err := r.step(ctx, s)
		var wait *tasks.WaitError
		switch {
		case errors.As(err, &wait):
			if err := r.save(ctx); err != nil {
				return err
			}
			return err
		case err != nil:
			var perm *permanent
			if errors.As(err, &perm) {
				return r.fail(ctx, i, perm.msg)
			}
			st.Detail = err.Error()
			r.save(ctx)
			return err
		}
		done := e.cfg.Now().UTC()
		st.State, st.CompletedAt, st.Detail = "succeeded", &done, summary(s.Tool, out)
		r.pl.Outputs[s.ID] = out
		r.t.GateID = ""
		if err := r.save(ctx); err != nil {
			return err
		}
		if e.cfg.PauseAfter == s.ID {
			e.cfg.Log.Warn("paused at step boundary", "task", t.ID, "step", s.ID)
			<-ctx.Done()
			return ctx.Err()
		}
	}
	r.t.State = "succeeded"
	var report []map[string]any
	for _, s := range plan.Steps {
		report = append(report, map[string]any{"id": s.ID, "tool": s.Tool, "state": "succeeded", "outputs": r.pl.Outputs[s.ID], "receipt": r.pl.Receipts[s.ID]})
	}
	res, _ := json.Marshal(map[string]any{"workflowId": w.ID, "digest": w.Digest, "steps": report})
	r.t.Result = string(res)
	return r.save(ctx)
}

func summary(tool string, out map[string]any) string {
	switch tool {
	case "create_quote":
		return fmt.Sprintf("quote %v (%v)", out["quoteId"], out["decision"])
	case "launch_service":
		return fmt.Sprintf("service %v live at %v", out["serviceId"], out["previewUrl"])
	case "teardown_service":
		return fmt.Sprintf("torn down by task %v", out["taskId"])
	case "setup_email":
		return fmt.Sprintf("mail set up by task %v", out["taskId"])
	case "set_registrant_contact":
		return fmt.Sprintf("registrant confirmed (task %v)", out["taskId"])
	case "upload_assets":
		return fmt.Sprintf("bundle %v", out["bundleId"])
	}
	return ""
}

func (r *run) save(ctx context.Context) error {
	sj, _ := json.Marshal(r.steps)
	pj, _ := json.Marshal(r.pl)
	r.t.Steps, r.t.Payload, r.t.UpdatedAt = string(sj), string(pj), r.e.cfg.Now().UTC()
	return r.e.cfg.Store.Tasks().Update(context.WithoutCancel(ctx), r.t)
}

func (r *run) key(step, suffix string) string {
	return "wf." + r.w.ID + "." + step + suffix
}

// step runs one step and returns its outputs.
func (r *run) step(ctx context.Context, s workflowplan.Step) (map[string]any, error) {
	args, err := substitute(s.Arguments, 0, func(step, field string) (any, bool) {
		v, ok := r.pl.Outputs[step][field]
		return v, ok
	})
	if err != nil {
		return nil, &permanent{fmt.Sprintf("step %s: %v", s.ID, err)}
	}
	m := args.(map[string]any)
	switch s.Tool {
	case "upload_assets":
		id, _ := m["bundleId"].(string)
		v, err := r.e.cfg.Service.Bundles.Version(ctx, r.p, id)
		if err != nil {
			return nil, &permanent{fmt.Sprintf("step %s: %v", s.ID, err)}
		}
		for _, pv := range r.plan.Versions {
			if pv.Type == "bundle" && pv.ID == id && pv.Version != v {
				return nil, &permanent{fmt.Sprintf("step %s: bundle %s changed since the plan was prepared", s.ID, id)}
			}
		}
		return map[string]any{"bundleId": id}, nil
	case "launch_service", "teardown_service", "setup_email", "set_registrant_contact":
		child, ok := r.pl.Children[s.ID]
		if !ok {
			data, err := r.call(ctx, s.Tool, m, r.key(s.ID, ""))
			if err != nil {
				return nil, err
			}
			child, _ = data["taskId"].(string)
			if child == "" {
				return nil, &permanent{fmt.Sprintf("step %s: %s answered no task", s.ID, s.Tool)}
			}
			r.pl.Children[s.ID] = child
			if err := r.save(ctx); err != nil {
				return nil, err
			}
		}
		return r.waitChild(ctx, s, child)
	default:
		data, err := r.call(ctx, s.Tool, m, r.key(s.ID, ""))
		if err != nil {
			return nil, err
		}
		out := map[string]any{"quoteId": data["quoteId"], "decision": data["decision"], "amountUsd": data["amountUsd"]}
		if out["decision"] == "DENY" {
			return nil, &permanent{fmt.Sprintf("step %s: the quote was denied (%v)", s.ID, data["reasons"])}
		}
		return out, nil
	}
}

// call invokes a tool and returns its answer's data. A refusal is
// permanent unless the contract calls it retryable.
func (r *run) call(ctx context.Context, tool string, args map[string]any, key string) (map[string]any, error) {
	status, body, err := r.e.cfg.Invoker().Invoke(ctx, tool, args, key)
	if err != nil && status == 0 {
		return nil, err
	}
	var env struct {
		Data      map[string]any `json:"data"`
		BlockedBy string         `json:"blockedBy"`
		Message   string         `json:"message"`
		Retryable bool           `json:"retryable"`
	}
	if err == nil {
		if jerr := json.Unmarshal(body, &env); jerr != nil {
			return nil, fmt.Errorf("%s answered %d with no envelope", tool, status)
		}
	} else {
		env.BlockedBy, env.Message = "input:invalid", err.Error()
	}
	if status < 400 && r.e.cfg.PauseInside != "" && r.e.cfg.PauseInside == r.current {
		// The operation ran but the step is not saved: the worst moment
		// to die.
		r.e.cfg.Log.Warn("paused inside step", "task", r.t.ID, "step", r.current)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if status < 400 && env.Data["receipt"] != nil && !strings.HasSuffix(key, ".undo") {
		if r.pl.Receipts == nil {
			r.pl.Receipts = map[string]any{}
		}
		r.pl.Receipts[r.current] = env.Data["receipt"]
	}
	if status >= 400 {
		msg := fmt.Sprintf("%s: %s (%s)", tool, env.Message, env.BlockedBy)
		if env.Retryable {
			return nil, errors.New(msg)
		}
		return nil, &permanent{msg}
	}
	return env.Data, nil
}

// waitChild follows the launch or teardown a step started: its outputs
// once it succeeded, a permanent failure once it failed, and otherwise a
// wait, showing its human gate on the workflow's task meanwhile.
func (r *run) waitChild(ctx context.Context, s workflowplan.Step, child string) (map[string]any, error) {
	deadline := time.Now().Add(r.e.cfg.ChildWait)
	for {
		t, err := r.e.cfg.Store.Tasks().Get(ctx, r.p.OrgID, child)
		if err != nil {
			return nil, err
		}
		switch service.TaskState(t.State) {
		case service.TaskSucceeded:
			view, err := r.e.cfg.Service.Tasks.Get(ctx, r.p.OrgID, child)
			if err != nil {
				return nil, err
			}
			out := map[string]any{"taskId": child}
			if s.Tool == "launch_service" {
				if view.ServiceID != "" {
					out["serviceId"] = view.ServiceID
				}
				if view.PreviewURL != "" {
					out["previewUrl"] = view.PreviewURL
				}
			}
			return out, nil
		case service.TaskFailed, service.TaskCanceled:
			var res struct {
				Error string `json:"error"`
			}
			json.Unmarshal([]byte(t.Result), &res)
			return nil, &permanent{fmt.Sprintf("step %s: task %s %s: %s", s.ID, child, t.State, res.Error)}
		case service.TaskInputRequired:
			i := r.index(s.ID)
			r.steps[i].State, r.steps[i].Detail = service.StepStateInputRequired, "task "+child+" waits for a human"
			r.t.State, r.t.GateID = "input_required", t.GateID
			return nil, tasks.Wait(2 * time.Second)
		}
		if time.Now().After(deadline) {
			return nil, tasks.Wait(time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func (r *run) index(id string) int {
	for i, s := range r.plan.Steps {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// fail ends the task at step i: every step not yet run is skipped,
// completed reversible steps undone in reverse, and each step reported.
//
// Steps that do not depend on the failed one are skipped too, on purpose:
// a workflow is applied as a whole, and a failure rolls back what ran. A
// step started after the failure would only be undone again, and some
// cannot be (a domain bought, a service torn down, a registrant
// confirmed, the mail add-on's charge), so running it would spend money
// and change things for a plan already being rolled back. The report says
// which skipped steps depended on the failure and which were stopped.
func (r *run) fail(ctx context.Context, i int, msg string) error {
	now := r.e.cfg.Now().UTC()
	r.steps[i].State, r.steps[i].CompletedAt, r.steps[i].Detail = "failed", &now, msg
	failed := r.plan.Steps[i].ID
	// Steps are in run order, so one pass finds every transitive dependant.
	dependant := map[string]bool{failed: true}
	for _, s := range r.plan.Steps {
		for _, d := range s.After {
			if dependant[d] {
				dependant[s.ID] = true
			}
		}
	}
	report := make([]stepReport, len(r.plan.Steps))
	for j, s := range r.plan.Steps {
		report[j] = stepReport{ID: s.ID, Tool: s.Tool, State: string(r.steps[j].State)}
		if j == i {
			report[j].Detail = msg
		}
		if r.steps[j].State == service.StepStatePending || r.steps[j].State == service.StepStateRunning || r.steps[j].State == service.StepStateInputRequired {
			if j != i {
				detail := "not run: the workflow stopped when step " + failed + " failed"
				if dependant[s.ID] {
					detail = "not run: it depends on step " + failed + ", which failed"
				}
				r.steps[j].State, r.steps[j].Detail = "skipped", detail
				report[j].State, report[j].Detail = "skipped", detail
			}
		}
	}
	for j := len(r.plan.Steps) - 1; j >= 0; j-- {
		if r.steps[j].State != service.StepStateSucceeded {
			continue
		}
		report[j].State, report[j].Detail = r.undo(ctx, r.plan.Steps[j])
		r.steps[j].Detail += "; " + report[j].State + ": " + report[j].Detail
	}
	r.pl.Report = report
	r.t.State, r.t.GateID = "failed", ""
	res, _ := json.Marshal(map[string]any{"error": msg, "blockedBy": "provider:failed", "retryable": false, "workflowId": r.w.ID, "steps": report})
	r.t.Result = string(res)
	return r.save(ctx)
}

// undo reverses a completed step where it can, and says so.
func (r *run) undo(ctx context.Context, s workflowplan.Step) (string, string) {
	out := r.pl.Outputs[s.ID]
	switch s.Tool {
	case "create_quote":
		id, _ := out["quoteId"].(string)
		if _, err := r.call(ctx, "release_quote", map[string]any{"id": id}, r.key(s.ID, ".undo")); err != nil {
			return "not_undone", "quote " + id + " was not released: " + err.Error()
		}
		return "undone", "quote " + id + " released, or already consumed by a launch"
	case "launch_service":
		id, _ := out["serviceId"].(string)
		data, err := r.call(ctx, "teardown_service", map[string]any{"id": id}, r.key(s.ID, ".undo"))
		if err != nil {
			return "not_undone", "service " + id + " was not torn down: " + err.Error()
		}
		detail := fmt.Sprintf("service %s is being torn down (task %v)", id, data["taskId"])
		if d, _ := s.Arguments["domain"].(string); d != "" && s.Irreversible {
			return "not_undone", detail + "; the registration of " + strings.ToLower(d) + " cannot be undone: it stays registered to you"
		}
		return "undone", detail
	case "teardown_service":
		return "not_undone", "a teardown cannot be undone; launch the service again"
	case "setup_email":
		d, _ := s.Arguments["domain"].(string)
		if _, err := r.call(ctx, "remove_email", map[string]any{"domain": d}, r.key(s.ID, ".undo")); err != nil {
			return "not_undone", "the mail records of " + d + " were not removed: " + err.Error()
		}
		return "undone", "the mail records of " + d + " were removed; the add-on's charge stays"
	case "set_registrant_contact":
		return "not_undone", "a confirmed registrant stays recorded; propose another to change it"
	}
	return "undone", "nothing to undo"
}

// Fail ends a task whose runs kept failing.
func (e *Engine) Fail(ctx context.Context, t store.Task, cause error) error {
	w, err := e.cfg.Store.Workflows().ByTask(ctx, t.ID)
	if err != nil {
		return err
	}
	plan, err := decodePlan(w)
	if err != nil {
		return err
	}
	r := &run{e: e, t: t, w: w, plan: plan}
	json.Unmarshal([]byte(t.Steps), &r.steps)
	json.Unmarshal([]byte(t.Payload), &r.pl)
	r.p = principalOf(w, r.pl)
	i := 0
	for j := range r.steps {
		if r.steps[j].State != service.StepStateSucceeded {
			i = j
			break
		}
	}
	return r.fail(httpapi.WithPrincipal(ctx, r.p), i, "kept failing and was stopped after its retries: "+cause.Error())
}
