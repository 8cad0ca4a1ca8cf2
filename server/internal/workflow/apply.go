package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/internal/lib/workflowplan"
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// payload is what a workflow task carries between runs.
type payload struct {
	WorkflowID string `json:"workflowId"`
	// AppliedBy is the caller that applied the plan ("key:…" or
	// "grant:…"): the steps run with its authority, not the preparer's.
	AppliedBy string `json:"appliedBy,omitempty"`
	// Outputs are each finished step's outputs, for later references.
	Outputs map[string]map[string]any `json:"outputs"`
	// Children are the launch and teardown tasks steps started.
	Children map[string]string `json:"children"`
	// Receipts are each step's receipt, as its operation answered it.
	Receipts map[string]any `json:"receipts,omitempty"`
	// Report is the per-step account of a failed run: what ran, what was
	// undone and what could not be.
	Report []stepReport `json:"report,omitempty"`
}

type stepReport struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	State  string `json:"state"` // succeeded, failed, skipped, undone, not_undone
	Detail string `json:"detail,omitempty"`
}

type taskStep struct {
	Name        string            `json:"name"`
	State       service.StepState `json:"state"`
	StartedAt   *time.Time        `json:"startedAt,omitempty"`
	CompletedAt *time.Time        `json:"completedAt,omitempty"`
	Detail      string            `json:"detail,omitempty"`
}

// prepareAgain is the action every refusal of a stale plan carries.
func prepareAgain(w store.Workflow, plan workflowplan.Plan) models.Action {
	var steps []any
	for _, s := range plan.Steps {
		steps = append(steps, map[string]any{"id": s.ID, "tool": s.Tool, "arguments": s.Arguments, "after": s.After})
	}
	return actions.Tool("prepare_workflow", "agent", map[string]any{"projectId": w.ProjectID, "steps": steps})
}

// Apply rechecks a prepared workflow and starts the task that runs it,
// once: a later apply, or a concurrent one, answers the same task.
func (e *Engine) Apply(ctx context.Context, p *auth.Principal, id string, req *models.ApplyWorkflowRequest) (*service.Task, bool, error) {
	w, err := e.cfg.Store.Workflows().Get(ctx, p.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, apierr.Newf("not_found:resource", "no workflow %s in your organisation", id)
	}
	if err != nil {
		return nil, false, err
	}
	if req != nil && req.SignedPlan != nil {
		jwks, err := e.JWKS(ctx)
		if err != nil {
			return nil, false, err
		}
		payload, digest, _, err := workflowplan.Verify(*req.SignedPlan, jwks)
		if err != nil {
			return nil, false, apierr.Newf("plan:signature_invalid", "%v", err)
		}
		if digest != w.Digest || string(payload) != w.Plan {
			return nil, false, apierr.Newf("plan:signature_invalid", "the signed plan (digest %s) is not workflow %s's plan (digest %s)", digest, w.ID, w.Digest)
		}
	}
	if w.TaskID != "" {
		return e.replay(ctx, p, w)
	}
	plan, err := decodePlan(w)
	if err != nil {
		return nil, false, err
	}
	if err := e.recheck(ctx, p, w, plan); err != nil {
		// A concurrent apply may have won and already changed what the
		// plan read (bought its domain, say): that one is the answer.
		if again, gerr := e.cfg.Store.Workflows().Get(ctx, p.OrgID, w.ID); gerr == nil && again.TaskID != "" {
			return e.replay(ctx, p, again)
		}
		return nil, false, err
	}
	now := e.cfg.Now().UTC()
	task := store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: w.ProjectID, Kind: "workflow", State: "queued", CreatedAt: now, UpdatedAt: now}
	var steps []taskStep
	for _, s := range plan.Steps {
		steps = append(steps, taskStep{Name: s.ID, State: "pending"})
	}
	sj, _ := json.Marshal(steps)
	pj, _ := json.Marshal(payload{WorkflowID: w.ID, AppliedBy: callerOf(p), Outputs: map[string]map[string]any{}, Children: map[string]string{}})
	task.Steps, task.Payload = string(sj), string(pj)
	won := false
	err = e.cfg.Store.InTx(ctx, func(tx *store.Tx) error {
		locked, err := tx.Workflows().Lock(ctx, p.OrgID, w.ID)
		if err != nil {
			return err
		}
		if locked.TaskID != "" {
			w = locked
			return nil
		}
		if err := tx.Tasks().Insert(ctx, task); err != nil {
			return err
		}
		if won, err = tx.Workflows().MarkApplied(ctx, w.ID, task.ID, now); err != nil || !won {
			return err
		}
		w.TaskID = task.ID
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: "agent:" + callerOf(p), Action: "apply_workflow",
			ObjectType: "workflow", ObjectID: w.ID, Details: map[string]any{"digest": w.Digest, "taskId": task.ID, "totalMicroUsd": plan.TotalMicro}}, now)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !won {
		return e.replay(ctx, p, w)
	}
	if err := e.cfg.Enqueue(ctx, task.ID); err != nil {
		// The task is committed; the runner's start-up sweep finds it.
		e.cfg.Log.Warn("enqueue workflow", "task", task.ID, "err", err)
	}
	view, err := e.cfg.Service.Tasks.Get(ctx, p.OrgID, task.ID)
	return view, false, err
}

func (e *Engine) replay(ctx context.Context, p *auth.Principal, w store.Workflow) (*service.Task, bool, error) {
	view, err := e.cfg.Service.Tasks.Get(ctx, p.OrgID, w.TaskID)
	return view, true, err
}

// recheck reads everything again and refuses what changed.
func (e *Engine) recheck(ctx context.Context, p *auth.Principal, w store.Workflow, plan workflowplan.Plan) error {
	again := prepareAgain(w, plan)
	var steps []models.WorkflowStep
	for _, s := range plan.Steps {
		after := s.After
		steps = append(steps, models.WorkflowStep{Id: s.ID, Tool: models.WorkflowStepTool(s.Tool), Arguments: s.Arguments, After: &after})
	}
	a, err := e.analyze(ctx, p, w.ProjectID, steps)
	if err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) && ae.Code != "auth:insufficient_scope" {
			return ae.WithActions(append(ae.Actions, again)...)
		}
		return err
	}
	// The plan's gates were judged for the key that prepared it; the steps
	// run as this caller. A purchase the plan makes without a human needs
	// this caller to hold buy_domain too.
	for i, s := range a.steps {
		if was := plan.Steps[i]; s.Tool == "launch_service" && s.NeedsApproval && !was.NeedsApproval && !p.HasScope("buy_domain") {
			d, _ := s.Arguments["domain"].(string)
			return apierr.Newf("auth:insufficient_scope", "step %s registers %s without a human's approval, as prepared by a key with the buy_domain scope; "+
				"this key lacks buy_domain: apply with a key that has it, or prepare the workflow again with this key and a human approves the purchase", s.ID, strings.ToLower(d)).
				WithActions(again, actions.Manual("grant_scope", "human"))
		}
	}
	var changed []string
	for i, s := range a.steps {
		if was := plan.Steps[i].PriceMicro; s.PriceMicro != was {
			changed = append(changed, fmt.Sprintf("%s: %s, was %s", s.ID, usd(s.PriceMicro), usd(was)))
		}
	}
	if len(changed) > 0 {
		return apierr.Newf("plan:price_changed", "prices changed since the workflow was prepared (%s); prepare it again", strings.Join(changed, "; ")).WithActions(again)
	}
	key := func(v workflowplan.Version) string { return v.Type + " " + v.ID }
	was := map[string]string{}
	for _, v := range plan.Versions {
		was[key(v)] = v.Version
	}
	for _, v := range a.versions {
		if old, ok := was[key(v)]; !ok || old != v.Version {
			changed = append(changed, fmt.Sprintf("%s %s: %s, was %s", v.Type, v.ID, v.Version, orNone(old)))
		}
		delete(was, key(v))
	}
	for k := range was {
		changed = append(changed, k+" is no longer read")
	}
	// What the projection showed a human must still hold: which steps wait
	// for a human and which cannot be undone.
	for i, s := range a.steps {
		old := plan.Steps[i]
		if s.NeedsApproval != old.NeedsApproval {
			changed = append(changed, fmt.Sprintf("step %s: %s, was %s", s.ID, gate(s.NeedsApproval), gate(old.NeedsApproval)))
		}
		if s.Irreversible != old.Irreversible {
			changed = append(changed, fmt.Sprintf("step %s: %s, was %s", s.ID, reversible(s.Irreversible), reversible(old.Irreversible)))
		}
	}
	slices.Sort(changed)
	if len(changed) > 0 {
		return apierr.Newf("plan:stale", "what the workflow read changed since it was prepared (%s); prepare it again", strings.Join(changed, "; ")).WithActions(again)
	}
	return nil
}

func gate(needsApproval bool) string {
	if needsApproval {
		return "needs a human's approval"
	}
	return "needs no approval"
}

func reversible(irreversible bool) string {
	if irreversible {
		return "irreversible"
	}
	return "reversible"
}

func usd(m int64) string { return money.MicroUSD(m).Decimal() + " USD" }

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
