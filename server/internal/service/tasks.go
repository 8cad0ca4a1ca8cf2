package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

type taskStep struct {
	Name        string     `json:"name"`
	State       string     `json:"state"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	Detail      string     `json:"detail,omitempty"`
}

// Human is a signed-in person acting on the human pages.
type Human struct {
	OrgID, UserID string
}

func (s *Tasks) taskView(t store.Task) (*models.TaskHandle, error) {
	var steps []models.TaskStep
	if err := json.Unmarshal([]byte(t.Steps), &steps); err != nil {
		return nil, err
	}
	id, created := t.ID, t.CreatedAt
	v := &models.TaskHandle{
		Id: &id, CreatedAt: &created, TaskId: t.ID, Kind: models.TaskHandleKind(t.Kind), State: models.TaskHandleState(t.State), Steps: steps,
		PollUrl: s.baseURL() + "/v1/tasks/" + t.ID,
		Receipt: taskReceipt(t), Undo: Undo(nil),
	}
	if t.State == "input_required" && t.GateID != "" {
		v.ApprovalUrl = ptr(s.ApprovalURL(t.GateID))
		v.PollAfterSeconds = ptr(5)
	}
	if t.Payload != "" {
		var pl struct {
			ServiceID   string          `json:"serviceId"`
			PreviewHost string          `json:"previewHost"`
			Domain      string          `json:"domain"`
			Approval    string          `json:"approval"`
			Receipt     *models.Receipt `json:"receipt"`
			Undo        *models.Undo    `json:"undo"`
		}
		if err := json.Unmarshal([]byte(t.Payload), &pl); err == nil {
			if pl.ServiceID != "" {
				v.ServiceId = ptr(pl.ServiceID)
			}
			if pl.PreviewHost != "" {
				v.PreviewUrl = ptr(s.hostURL("https", pl.PreviewHost))
			}
			if pl.Receipt != nil {
				v.Receipt = *pl.Receipt
			}
			if pl.Undo != nil {
				v.Undo = *pl.Undo
			}
			ready := t.Kind == "launch" && t.State == "succeeded"
			domainReady := ready && pl.Domain != "" && pl.Approval != "denied"
			if t.Kind == "launch" {
				v.HttpsReady = &struct {
					Domain  *bool `json:"domain,omitempty"`
					Preview *bool `json:"preview,omitempty"`
				}{Domain: ptr(domainReady), Preview: ptr(ready)}
			}
			if domainReady {
				v.DomainUrl = ptr(s.hostURL("https", pl.Domain))
			}
		}
	}
	if t.Result != "" {
		var r map[string]any
		if err := json.Unmarshal([]byte(t.Result), &r); err != nil {
			return nil, err
		}
		v.Result = &r
	}
	return v, nil
}

// startedView is the task a mutation just started, carrying that
// mutation's receipt, undo and remaining budget.
func (s *Tasks) startedView(t store.Task, m models.MutationResult) (*models.TaskHandle, error) {
	v, err := s.taskView(t)
	if err != nil {
		return nil, err
	}
	v.Receipt, v.Undo, v.BudgetRemainingUsd = m.Receipt, m.Undo, m.BudgetRemainingUsd
	return v, nil
}

// GetTask reads a task of the caller's organisation.
func (s *Tasks) Get(ctx context.Context, orgID, id string) (*models.TaskHandle, []models.Action, error) {
	t, err := s.store.Tasks().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no task %s in your organisation", id)
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	v, err := s.taskView(t)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	if v.BudgetRemainingUsd, err = budgetLeft(ctx, s.store, t.OrgID, t.ProjectID); err != nil {
		return nil, nil, apierr.Internal(err)
	}
	var next []models.Action
	switch t.State {
	case "input_required":
		if t.GateID != "" {
			next = s.approvals.gateActions(t)
		} else {
			// No approval page: a registrant proposed before registrant
			// proposals had gates, confirmed from a mailed link.
			next = []models.Action{actions.Manual("confirm_email", "human"), actions.Retry("get_task", "agent", map[string]any{"id": t.ID}, 5)}
		}
	case "queued", "running":
		next = []models.Action{actions.Retry("get_task", "agent", map[string]any{"id": t.ID}, 1)}
	case "succeeded":
		next = append(succeededActions(t, v), actions.Stop("done"))
	default:
		// A failed task names its way forward when it has one.
		var r struct {
			Actions []models.Action `json:"actions"`
		}
		json.Unmarshal([]byte(t.Result), &r)
		next = append(r.Actions, actions.Stop("terminal_error"))
	}
	return v, next, nil
}

// ListTasks lists the organisation's tasks, newest first.
func (s *Tasks) List(ctx context.Context, orgID string, f store.Filter) (*models.TaskList, []models.Action, error) {
	ts, err := s.store.Tasks().ListFiltered(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &models.TaskList{Tasks: []models.TaskHandle{}}
	names := map[string]string{}       // service id → name, read once a list
	budgets := map[string]models.Usd{} // project id → what remains, read once a list
	for _, t := range ts {
		v, err := s.taskView(t)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		left, ok := budgets[t.ProjectID]
		if !ok {
			if left, err = budgetLeft(ctx, s.store, t.OrgID, t.ProjectID); err != nil {
				return nil, nil, apierr.Internal(err)
			}
			budgets[t.ProjectID] = left
		}
		v.BudgetRemainingUsd = left
		if v.ServiceId != nil {
			name, ok := names[*v.ServiceId]
			if !ok {
				if svc, err := s.store.Services().Get(ctx, orgID, *v.ServiceId); err == nil {
					name = svc.Name
				}
				names[*v.ServiceId] = name
			}
			if name != "" {
				v.ServiceName = &name
			}
		}
		out.Tasks = append(out.Tasks, *v)
	}
	var first []models.Action
	if len(ts) > 0 {
		last := ts[len(ts)-1]
		out.NextCursor = nextCursor(f, len(ts), last.CreatedAt, last.ID)
		first = append(first, actions.Tool("get_task", "agent", map[string]any{"id": ts[0].ID}))
	}
	return out, pageActions("list_tasks", out.NextCursor, f.Args(), first...), nil
}

// succeededActions are what a finished task leaves to do: the service a
// launch, deploy or rollback made, to read (and tear down); the addresses
// a mail setup makes possible.
func succeededActions(t store.Task, v *models.TaskHandle) []models.Action {
	switch t.Kind {
	case "launch", "deploy", "rollback":
		if v.ServiceId == nil {
			return nil
		}
		return []models.Action{actions.Tool("get_service", "agent", map[string]any{"id": *v.ServiceId})}
	case "email_setup":
		var pl struct {
			Domain string `json:"domain"`
		}
		if json.Unmarshal([]byte(t.Payload), &pl) != nil || pl.Domain == "" {
			return nil
		}
		return []models.Action{actions.ToolNeeding("create_email_address", "agent", nil, "address"), actions.Tool("list_email_addresses", "agent", nil)}
	}
	return nil
}

// taskReceipt is the receipt a task shows when the mutation that started
// it kept none in its payload: what was carried out, at no cost, and the
// task it created. Its id is derived from the task's, so every read shows
// the same receipt.
func taskReceipt(t store.Task) models.Receipt {
	return models.Receipt{Id: "rcp_" + strings.TrimPrefix(t.ID, "tsk_"), Action: taskOperation[t.Kind], Costs: []models.CostLine{},
		CreatedResources: []models.ResourceRef{{Type: "task", Id: t.ID}}, CreatedAt: t.CreatedAt.UTC()}
}

// taskOperation is the operation that starts a task of each kind.
var taskOperation = map[string]string{"launch": "launch_service", "deploy": "launch_service", "rollback": "rollback_service",
	"teardown": "teardown_service", "email_setup": "setup_email", "budget_raise": "request_budget_raise", "quote_approval": "create_quote",
	"workflow": "apply_workflow", "registrant_contact": "set_registrant_contact"}

// projectReader is a store or a transaction: what budgetLeft reads.
type projectReader interface{ Projects() store.Projects }

// budgetLeft is what remains of a project's budget, 0 for no project.
func budgetLeft(ctx context.Context, r projectReader, orgID, projectID string) (models.Usd, error) {
	m, err := budgetLeftMicro(ctx, r, orgID, projectID)
	return usd(m), err
}

func budgetLeftMicro(ctx context.Context, r projectReader, orgID, projectID string) (money.MicroUSD, error) {
	if projectID == "" {
		return 0, nil
	}
	p, err := r.Projects().Get(ctx, orgID, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return remaining(p), nil
}
