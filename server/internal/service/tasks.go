package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// TaskStep is one step of a task, as the task keeps it.
type TaskStep struct {
	Name        string     `json:"name"`
	State       StepState  `json:"state"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	Detail      string     `json:"detail,omitempty"`
}

// Human is a signed-in person acting on the human pages.
type Human struct {
	OrgID, UserID string
}

// Task is durable work a mutation started: a launch, a deploy, a teardown,
// a mail set-up, a human's decision. The doors show it as the contract's
// task handle and derive the next steps from its kind and state.
type Task struct {
	ID        string
	Kind      TaskKind
	State     TaskState
	Steps     []TaskStep
	CreatedAt time.Time
	// PollURL is where the task is read again.
	PollURL string
	// GateID and ApprovalURL name the human gate the task waits on, when
	// it waits on one.
	GateID, ApprovalURL string
	// ServiceID is the service a launch, deploy, rollback or teardown
	// works on; ServiceName is filled in by lists.
	ServiceID, ServiceName string
	// Domain is the domain a launch attaches or a mail set-up covers.
	Domain     string
	PreviewURL string
	// DomainURL is set once a launch serves its domain.
	DomainURL string
	// HTTPS says what a launch serves over HTTPS; nil for other kinds.
	HTTPS *HTTPSReady
	// Result is what the task ended with, nil until it has one.
	Result map[string]any
	// Remedies are the next steps a failed task named, as it kept them.
	Remedies json.RawMessage
	Receipt  Receipt
	Undo     Undoing
	// BudgetRemaining is what is left of the task's project's budget.
	BudgetRemaining money.MicroUSD
}

// HTTPSReady says which of a launch's addresses serve over HTTPS.
type HTTPSReady struct{ Domain, Preview bool }

// taskView is the domain's view of a stored task.
func (s *Tasks) taskView(t store.Task) (*Task, error) {
	v := &Task{ID: t.ID, Kind: TaskKind(t.Kind), State: TaskState(t.State), CreatedAt: t.CreatedAt, GateID: t.GateID,
		PollURL: s.baseURL() + "/v1/tasks/" + t.ID, Receipt: taskReceipt(t), Undo: undoneBy(nil)}
	if err := json.Unmarshal([]byte(t.Steps), &v.Steps); err != nil {
		return nil, err
	}
	if v.State == TaskInputRequired && t.GateID != "" {
		v.ApprovalURL = s.ApprovalURL(t.GateID)
	}
	if t.Payload != "" {
		var pl struct {
			ServiceID   string   `json:"serviceId"`
			PreviewHost string   `json:"previewHost"`
			Domain      string   `json:"domain"`
			Approval    string   `json:"approval"`
			Receipt     *Receipt `json:"receipt"`
			Undo        *Undoing `json:"undo"`
		}
		if err := json.Unmarshal([]byte(t.Payload), &pl); err == nil {
			v.ServiceID, v.Domain = pl.ServiceID, pl.Domain
			if pl.PreviewHost != "" {
				v.PreviewURL = s.hostURL("https", pl.PreviewHost)
			}
			if pl.Receipt != nil {
				v.Receipt = *pl.Receipt
			}
			if pl.Undo != nil {
				v.Undo = *pl.Undo
			}
			ready := v.Kind == TaskKindLaunch && v.State == TaskSucceeded
			domainReady := ready && pl.Domain != "" && GateState(pl.Approval) != GateDenied
			if v.Kind == TaskKindLaunch {
				v.HTTPS = &HTTPSReady{Domain: domainReady, Preview: ready}
			}
			if domainReady {
				v.DomainURL = s.hostURL("https", pl.Domain)
			}
		}
	}
	if t.Result != "" {
		if err := json.Unmarshal([]byte(t.Result), &v.Result); err != nil {
			return nil, err
		}
		if v.State != TaskSucceeded {
			var r struct {
				Actions json.RawMessage `json:"actions"`
			}
			json.Unmarshal([]byte(t.Result), &r)
			v.Remedies = r.Actions
		}
	}
	return v, nil
}

// startedView is the task a mutation just started, carrying that
// mutation's receipt, undo and remaining budget.
func (s *Tasks) startedView(t store.Task, m Mutated) (*Task, error) {
	v, err := s.taskView(t)
	if err != nil {
		return nil, err
	}
	v.Receipt, v.Undo, v.BudgetRemaining = m.Receipt, m.Undo, m.BudgetRemaining
	return v, nil
}

// Get reads a task of the caller's organisation.
func (s *Tasks) Get(ctx context.Context, orgID, id string) (*Task, error) {
	t, err := s.store.Tasks().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notInOrg("task", id, "list_tasks")
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	v, err := s.taskView(t)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if v.BudgetRemaining, err = budgetLeftMicro(ctx, s.store, t.OrgID, t.ProjectID); err != nil {
		return nil, apierr.Internal(err)
	}
	return v, nil
}

// List lists the organisation's tasks, newest first.
func (s *Tasks) List(ctx context.Context, orgID string, f store.Filter) (*Page[Task], error) {
	ts, err := s.store.Tasks().ListFiltered(ctx, orgID, f)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := &Page[Task]{Items: []Task{}, Args: f.Args()}
	names := map[string]string{}           // service id → name, read once a list
	budgets := map[string]money.MicroUSD{} // project id → what remains, read once a list
	for _, t := range ts {
		v, err := s.taskView(t)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		left, ok := budgets[t.ProjectID]
		if !ok {
			if left, err = budgetLeftMicro(ctx, s.store, t.OrgID, t.ProjectID); err != nil {
				return nil, apierr.Internal(err)
			}
			budgets[t.ProjectID] = left
		}
		v.BudgetRemaining = left
		if v.ServiceID != "" {
			name, ok := names[v.ServiceID]
			if !ok {
				if svc, err := s.store.Services().Get(ctx, orgID, v.ServiceID); err == nil {
					name = svc.Name
				}
				names[v.ServiceID] = name
			}
			v.ServiceName = name
		}
		out.Items = append(out.Items, *v)
	}
	if len(ts) > 0 {
		last := ts[len(ts)-1]
		out.NextCursor = nextCursor(f, len(ts), last.CreatedAt, last.ID)
	}
	return out, nil
}

// taskReceipt is the receipt a task shows when the mutation that started
// it kept none in its payload: what was carried out, at no cost, and the
// task it created. Its id is derived from the task's, so every read shows
// the same receipt.
func taskReceipt(t store.Task) Receipt {
	return Receipt{ID: "rcp_" + strings.TrimPrefix(t.ID, "tsk_"), Action: taskOperation[t.Kind],
		Created: []Resource{{Type: "task", ID: t.ID}}, At: t.CreatedAt.UTC()}
}

// taskOperation is the operation that starts a task of each kind.
var taskOperation = map[string]string{"launch": "launch_service", "deploy": "launch_service", "rollback": "rollback_service",
	"teardown": "teardown_service", "email_setup": "setup_email", "budget_raise": "request_budget_raise", "quote_approval": "create_quote",
	"workflow": "apply_workflow", "registrant_contact": "set_registrant_contact"}

// projectReader is a store or a transaction: what budgetLeftMicro reads.
type projectReader interface{ Projects() store.Projects }

// budgetLeftMicro is what remains of a project's budget, 0 for no project.
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
