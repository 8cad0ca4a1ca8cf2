package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// A child project is one an agent makes for work that should leave
// nothing behind, such as a conformance run. Its budget is carved out of
// its parent's remaining budget (the parent's limit goes down by as much)
// and given back when it is deleted, so the organisation's limits add up
// to the same sum throughout: a child never creates money. It inherits
// its parent's policy. Deleting it tears down its services, cancels its
// pending approvals and keeps its row, tasks, receipts and ledger
// entries: money history is never deleted.

// deletableGates are the kinds of pending approval a deletion cancels
// itself: neither moved money yet. A domain registration's gate belongs
// to a launch, which the service's teardown cancels with its refund.
var deletableGates = map[string]bool{"budget_raise": true, "quote_approval": true}

// CreateChild creates a child project of req.ParentID with req.Budget
// carved out of the parent's remaining budget.
func (s *Projects) CreateChild(ctx context.Context, p *auth.Principal, req NewChild) (*ProjectCreation, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" {
		return nil, apierr.New("input:invalid", "name must not be empty").WithField("body.name", "empty")
	}
	amount := req.Budget
	if amount < 0 {
		return nil, apierr.New("input:invalid", "budgetUsd must not be negative").WithField("body.budgetUsd", "negative")
	}
	child := store.Project{ID: auth.ID("prj"), OrgID: p.OrgID, Name: name, LimitMicro: amount, ParentID: req.ParentID, CreatedAt: s.Now().UTC()}
	var parentLeft money.MicroUSD
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		parent, err := tx.Projects().Lock(ctx, p.OrgID, req.ParentID)
		if errors.Is(err, store.ErrNotFound) || err == nil && parent.DeletedAt != nil {
			return projectNotFound(req.ParentID)
		}
		if err != nil {
			return err
		}
		if err := s.expireHolds(ctx, tx, &parent, now); err != nil {
			return err
		}
		if left := remaining(parent); left < amount {
			return apierr.Newf("budget:insufficient", "project %s has %.2f USD left, less than the %.2f USD asked for the child; ask for less, or ask a human to raise the parent's budget", parent.ID, usd(left), usd(amount)).
				WithActions(
					actions.Tool("create_project", "agent", map[string]any{"name": name, "parentProjectId": parent.ID, "budgetUsd": usd(left)}),
					actions.Tool("request_budget_raise", "agent", map[string]any{"id": parent.ID, "amountUsd": usd(amount - left), "reason": "budget for child project " + name}))
		}
		if err := tx.Projects().SetBudgetLimit(ctx, parent.ID, parent.LimitMicro-amount); err != nil {
			return err
		}
		parentLeft, child.Policy = remaining(parent)-amount, parent.Policy
		if err := tx.Projects().Create(ctx, child); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "create_project", ObjectType: "project", ObjectID: child.ID,
			Details: map[string]any{"name": name, "parentProjectId": parent.ID, "budgetLimitMicroUsd": amount, "parentLimitMicroUsd": parent.LimitMicro - amount}}, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	view, err := s.projectView(ctx, child)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	m := s.mutated("create_project", nil, []Resource{{Type: "project", ID: child.ID}}, reverse("delete_project", map[string]any{"id": child.ID}), amount)
	return &ProjectCreation{Project: view, ParentRemaining: parentLeft, Mutated: m}, nil
}

// NewChild is a child project an agent asks for: its name, the project
// whose remaining budget its own is carved from, and how much.
type NewChild struct {
	Name, ParentID string
	Budget         money.MicroUSD
}

// ProjectCreation is a child project just made, with what its parent has
// left.
type ProjectCreation struct {
	Project         Project
	ParentRemaining money.MicroUSD
	Mutated         Mutated
}

// DeletionState is how far a project's deletion went.
type DeletionState string

const (
	// ProjectDeleting: services are still being torn down.
	ProjectDeleting DeletionState = "deleting"
	// ProjectDeleted: done; the unspent budget went back to the parent.
	ProjectDeleted DeletionState = "deleted"
)

// ProjectDeletion is a project's deletion: its teardown tasks, the tasks
// whose approvals it canceled and, once deleted, what went back to the
// parent. Pending are the teardown tasks still running, while deleting.
type ProjectDeletion struct {
	ProjectID, Name, ParentID string
	State                     DeletionState
	TeardownTasks             []string
	CanceledTasks             []string
	Pending                   []string
	Returned                  money.MicroUSD
	DeletedAt                 *time.Time
	Mutated                   Mutated
}

// deletionJSON is the shape a deleted project keeps its deletion in, for
// replays: the contract's, with amounts in USD.
type deletionJSON struct {
	ProjectId          string        `json:"projectId"`
	Name               string        `json:"name"`
	ParentProjectId    string        `json:"parentProjectId"`
	State              DeletionState `json:"state"`
	TeardownTaskIds    []string      `json:"teardownTaskIds"`
	CanceledTaskIds    []string      `json:"canceledTaskIds"`
	ReturnedUsd        float64       `json:"returnedUsd"`
	BudgetRemainingUsd float64       `json:"budgetRemainingUsd"`
	DeletedAt          *time.Time    `json:"deletedAt,omitempty"`
	Receipt            Receipt       `json:"receipt"`
	Undo               Undoing       `json:"undo"`
}

func (d ProjectDeletion) MarshalJSON() ([]byte, error) {
	return json.Marshal(deletionJSON{BudgetRemainingUsd: d.Mutated.BudgetRemaining.USD(), CanceledTaskIds: d.CanceledTasks, DeletedAt: d.DeletedAt,
		Name: d.Name, ParentProjectId: d.ParentID, ProjectId: d.ProjectID, Receipt: d.Mutated.Receipt, ReturnedUsd: d.Returned.USD(),
		State: d.State, TeardownTaskIds: d.TeardownTasks, Undo: d.Mutated.Undo})
}

func (d *ProjectDeletion) UnmarshalJSON(b []byte) error {
	var in deletionJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*d = ProjectDeletion{ProjectID: in.ProjectId, Name: in.Name, ParentID: in.ParentProjectId, State: in.State,
		TeardownTasks: in.TeardownTaskIds, CanceledTasks: in.CanceledTaskIds, Returned: money.FromUSD(in.ReturnedUsd), DeletedAt: in.DeletedAt,
		Mutated: Mutated{Receipt: in.Receipt, Undo: in.Undo, BudgetRemaining: money.FromUSD(in.BudgetRemainingUsd)}}
	return nil
}

// deletion is the steps of delete_project.
type deletion struct{ *Projects }

// Delete deletes a child project: it tears its services down, cancels
// its pending approvals and, once nothing runs, gives its unspent budget
// back to the parent. A deleted project answers its deletion again,
// replayed.
func (s *Projects) Delete(ctx context.Context, p *auth.Principal, id string) (*ProjectDeletion, bool, error) {
	d := deletion{s}
	proj, err := d.deletable(ctx, p, id)
	if err != nil {
		return nil, false, err
	}
	if proj.DeletedAt != nil {
		out, err := d.replay(proj)
		return out, true, err
	}
	tasks, pending, err := d.tearDown(ctx, p, id)
	if err != nil {
		return nil, false, err
	}
	canceled, err := d.cancelGates(ctx, p, id)
	if err != nil {
		return nil, false, err
	}
	if len(pending) > 0 {
		out, err := d.underWay(ctx, p, proj, tasks, pending, canceled)
		return out, false, err
	}
	// Usage metered up to the teardowns is charged before the rest goes
	// back to the parent.
	if err := d.meter.SettleProject(ctx, p.OrgID, id); err != nil {
		return nil, false, apierr.Internal(err)
	}
	return d.finish(ctx, p, id, tasks, canceled)
}

// deletable reads the project and refuses one that cannot be deleted:
// an organisation's own project, one with children, or one whose service
// serves a domain.
func (d deletion) deletable(ctx context.Context, p *auth.Principal, id string) (store.Project, error) {
	proj, err := d.store.Projects().Get(ctx, p.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return proj, projectNotFound(id)
	}
	if err != nil || proj.DeletedAt != nil {
		return proj, err
	}
	if proj.ParentID == "" {
		return proj, apierr.Newf("conflict:state", "project %s (%s) is one of your organisation's own projects; only a child project, made with create_project, can be deleted", id, proj.Name).
			WithActions(actions.Tool("list_projects", "agent", nil), actions.Stop("done"))
	}
	kids, err := d.store.Projects().Children(ctx, p.OrgID, id)
	if err != nil {
		return proj, err
	}
	if len(kids) > 0 {
		return proj, apierr.Newf("conflict:state", "project %s has %d child projects of its own (%s first); delete them first", id, len(kids), kids[0].ID).
			WithActions(actions.Tool("delete_project", "agent", map[string]any{"id": kids[0].ID}), actions.Tool("delete_project", "agent", map[string]any{"id": id}))
	}
	svcs, err := d.store.Services().InProject(ctx, p.OrgID, id)
	if err != nil {
		return proj, err
	}
	for _, svc := range svcs {
		if st := ServiceState(svc.State); svc.Domain != "" && (st == ServiceLive || st == ServiceCrashed) {
			return proj, apierr.Newf("conflict:domain_attached", "%s is attached to service %s (%s) of project %s, and its registration cannot be undone; detach it (detach_domain) or attach it to a service of another project, then delete the project again", svc.Domain, svc.ID, svc.Name, id).
				WithActions(actions.Tool("detach_domain", "agent", map[string]any{"domain": svc.Domain}), actions.Tool("delete_project", "agent", map[string]any{"id": id}))
		}
	}
	return proj, nil
}

// replay is a deleted project's deletion, as it was answered.
func (d deletion) replay(proj store.Project) (*ProjectDeletion, error) {
	var out ProjectDeletion
	if err := json.Unmarshal([]byte(proj.Deletion), &out); err != nil {
		return nil, apierr.Internal(err)
	}
	return &out, nil
}

// tearDown starts (or finds) the teardown of every service of the
// project that still serves or runs, and lists the teardown tasks of all
// its services, and which of them have not ended.
func (d deletion) tearDown(ctx context.Context, p *auth.Principal, id string) (tasks, pending []string, err error) {
	svcs, err := d.store.Services().InProject(ctx, p.OrgID, id)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	tasks, pending = []string{}, []string{}
	for _, svc := range svcs {
		switch ServiceState(svc.State) {
		case ServiceTornDown:
			tasks = append(tasks, svc.TaskID) // its teardown task
			continue
		case ServiceFailed:
			continue
		}
		t, _, err := d.launches.Teardown(ctx, p, svc.ID)
		if err != nil {
			return nil, nil, err
		}
		tasks = append(tasks, t.ID)
		if t.State.Active() {
			pending = append(pending, t.ID)
		}
	}
	return tasks, pending, nil
}

// cancelGates cancels the project's pending approvals, so that no human
// is left to decide them, and ends their tasks canceled. A kind that
// moved money refuses the deletion instead, naming the approval.
func (d deletion) cancelGates(ctx context.Context, p *auth.Principal, id string) ([]string, error) {
	canceled := []string{}
	err := d.store.InTx(ctx, func(tx *store.Tx) error {
		gates, err := tx.Gates().PendingInProject(ctx, p.OrgID, id)
		if err != nil {
			return err
		}
		now := d.Now()
		for _, g := range gates {
			if !deletableGates[g.Kind] {
				return apierr.Newf("conflict:state", "project %s has a %s approval (task %s) waiting for a human; it must be decided before the project can be deleted", id, g.Kind, g.TaskID).
					WithActions(actions.URL(d.ApprovalURL(g.ID), "approve", "human"), actions.Retry("get_task", "agent", map[string]any{"id": g.TaskID}, 5))
			}
			if err := d.cancelGate(ctx, tx, p, g, now); err != nil {
				return err
			}
			canceled = append(canceled, g.TaskID)
		}
		return nil
	})
	return canceled, err
}

// cancelGate closes one pending approval as denied by the deletion and
// ends its task canceled.
func (d deletion) cancelGate(ctx context.Context, tx *store.Tx, p *auth.Principal, g store.Gate, now time.Time) error {
	if err := tx.Gates().Decide(ctx, p.OrgID, g.ID, "denied", "system:delete_project", now); errors.Is(err, store.ErrConflict) {
		return nil
	} else if err != nil {
		return err
	}
	t, err := tx.Tasks().Lock(ctx, p.OrgID, g.TaskID)
	if err != nil {
		return err
	}
	steps, _ := json.Marshal([]TaskStep{{Name: "human_decision", State: StepStateFailed, CompletedAt: ptr(now.UTC()), Detail: "canceled: the project was deleted"}})
	result, _ := json.Marshal(map[string]any{"decision": "canceled", "blockedBy": "conflict:state", "message": "the project was deleted before a human decided"})
	t.State, t.Steps, t.Result, t.UpdatedAt = string(TaskCanceled), string(steps), string(result), now.UTC()
	if err := tx.Tasks().Update(ctx, t); err != nil {
		return err
	}
	_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "cancel_gate", ObjectType: "gate", ObjectID: g.ID,
		Details: map[string]any{"kind": g.Kind, "taskId": t.ID, "projectId": t.ProjectID, "reason": "delete_project"}}, now)
	return err
}

// underWay is the answer while teardowns run: poll them, then delete
// again.
func (d deletion) underWay(ctx context.Context, p *auth.Principal, proj store.Project, tasks, pending, canceled []string) (*ProjectDeletion, error) {
	left, err := budgetLeftMicro(ctx, d.store, p.OrgID, proj.ID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return &ProjectDeletion{ProjectID: proj.ID, Name: proj.Name, ParentID: proj.ParentID, State: ProjectDeleting,
		TeardownTasks: tasks, CanceledTasks: canceled, Pending: pending, Mutated: d.mutated("delete_project", nil, nil, nil, left)}, nil
}

// finish releases the project's holds, gives what it did not spend back
// to its parent and marks it deleted, with its answer for replays. A
// concurrent deletion that finished first is replayed.
func (d deletion) finish(ctx context.Context, p *auth.Principal, id string, tasks, canceled []string) (*ProjectDeletion, bool, error) {
	var out *ProjectDeletion
	replayed := false
	err := d.store.InTx(ctx, func(tx *store.Tx) error {
		now := d.Now()
		proj, err := tx.Projects().Lock(ctx, p.OrgID, id)
		if err != nil {
			return err
		}
		if proj.DeletedAt != nil {
			out, err = d.replay(proj)
			replayed = true
			return err
		}
		if err := d.nothingRuns(ctx, tx, proj); err != nil {
			return err
		}
		if err := d.releaseHolds(ctx, tx, &proj, now); err != nil {
			return err
		}
		returned := remaining(proj)
		if err := tx.Projects().SetBudgetLimit(ctx, id, proj.SpentMicro); err != nil {
			return err
		}
		parent, err := tx.Projects().Lock(ctx, p.OrgID, proj.ParentID)
		if err != nil {
			return fmt.Errorf("parent of %s: %w", id, err)
		}
		if err := tx.Projects().SetBudgetLimit(ctx, parent.ID, parent.LimitMicro+returned); err != nil {
			return err
		}
		m := d.mutated("delete_project", nil, nil, nil, remaining(parent)+returned)
		m.Receipt.Kept = []string{"receipts_and_ledger:" + id}
		out = &ProjectDeletion{ProjectID: id, Name: proj.Name, ParentID: parent.ID, State: ProjectDeleted,
			TeardownTasks: tasks, CanceledTasks: canceled, Returned: returned, DeletedAt: ptr(now.UTC()), Mutated: m}
		body, _ := json.Marshal(out)
		if err := tx.Projects().MarkDeleted(ctx, id, string(body), now); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "delete_project", ObjectType: "project", ObjectID: id,
			Details: map[string]any{"parentProjectId": parent.ID, "returnedMicroUsd": returned, "spentMicroUsd": proj.SpentMicro, "teardownTaskIds": tasks, "canceledTaskIds": canceled}}, now)
		return err
	})
	return out, replayed, err
}

// nothingRuns refuses to finish while a service of the locked project
// still serves or runs: one launched since the teardowns started.
func (d deletion) nothingRuns(ctx context.Context, tx *store.Tx, proj store.Project) error {
	svcs, err := tx.Services().InProject(ctx, proj.OrgID, proj.ID)
	if err != nil {
		return err
	}
	for _, svc := range svcs {
		if st := ServiceState(svc.State); st != ServiceTornDown && st != ServiceFailed {
			return apierr.Newf("conflict:state", "service %s (%s) of project %s is %s; delete the project again to tear it down too", svc.ID, svc.Name, proj.ID, svc.State).
				WithActions(actions.Tool("delete_project", "agent", map[string]any{"id": proj.ID}))
		}
	}
	return nil
}

// releaseHolds gives back every hold the locked project still has: the
// quotes behind them can no longer be launched.
func (d deletion) releaseHolds(ctx context.Context, tx *store.Tx, proj *store.Project, now time.Time) error {
	if err := d.expireHolds(ctx, tx, proj, now); err != nil {
		return err
	}
	holds, err := tx.Quotes().ActiveHolds(ctx, proj.ID, now)
	if err != nil {
		return err
	}
	for _, q := range holds {
		if err := settleHold(ctx, tx, proj, q, "released", "release_quote", now, map[string]any{"reason": "delete_project"}); err != nil {
			return err
		}
	}
	return nil
}
