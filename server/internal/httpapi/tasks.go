package httpapi

import (
	"context"
	"encoding/json"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func (o taskRoutes) ListTasks(ctx context.Context, req api.ListTasksRequestObject) (api.ListTasksResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, func(f *store.Filter) { f.State = deref(req.Params.State) },
		o.svc.Tasks.List, func(t service.Task) models.TaskHandle { return *TaskHandle(&t) }, func(t service.Task) string { return t.ID }, "list_tasks", "get_task")
	if err != nil {
		return nil, err
	}
	return api.ListTasks200JSONResponse{Data: models.TaskList{Tasks: l.Items, NextCursor: l.NextCursor}, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func (o taskRoutes) GetTask(ctx context.Context, req api.GetTaskRequestObject) (api.GetTaskResponseObject, error) {
	t, err := o.svc.Tasks.Get(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetTask200JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}, nil
}

// TaskHandle is the contract's view of a task.
func TaskHandle(t *service.Task) *models.TaskHandle {
	id, created := t.ID, t.CreatedAt
	v := &models.TaskHandle{
		Id: &id, CreatedAt: &created, TaskId: t.ID, Kind: models.TaskHandleKind(t.Kind), State: models.TaskHandleState(t.State),
		Steps: make([]models.TaskStep, 0, len(t.Steps)), PollUrl: t.PollURL, Receipt: wireReceipt(t.Receipt), Undo: wireUndo(t.Undo),
		BudgetRemainingUsd: t.BudgetRemaining.USD(),
		ServiceId:          optional(t.ServiceID), ServiceName: optional(t.ServiceName),
		PreviewUrl: optional(t.PreviewURL), DomainUrl: optional(t.DomainURL),
	}
	for _, s := range t.Steps {
		v.Steps = append(v.Steps, models.TaskStep{Name: s.Name, State: models.TaskStepState(s.State), StartedAt: s.StartedAt,
			CompletedAt: s.CompletedAt, Detail: optional(s.Detail)})
	}
	if t.ApprovalURL != "" {
		v.ApprovalUrl, v.PollAfterSeconds = &t.ApprovalURL, ptr(5)
	}
	if t.HTTPS != nil {
		v.HttpsReady = &struct {
			Domain  *bool `json:"domain,omitempty"`
			Preview *bool `json:"preview,omitempty"`
		}{Domain: ptr(t.HTTPS.Domain), Preview: ptr(t.HTTPS.Preview)}
	}
	if t.Result != nil {
		v.Result = &t.Result
	}
	return v
}

// TaskActions are the next steps a task's state leaves: a human's
// decision to wait for, a task to poll, what a finished task made
// possible, or the way forward a failed one named.
func TaskActions(t *service.Task) []models.Action {
	switch t.State {
	case service.TaskInputRequired:
		if t.GateID != "" {
			return actions.Gate(t.ID, t.ApprovalURL)
		}
		// No approval page: a registrant proposed before registrant
		// proposals had gates, confirmed from a mailed link.
		return []models.Action{actions.Manual("confirm_email", "human"), actions.Retry("get_task", "agent", map[string]any{"id": t.ID}, 5)}
	case service.TaskQueued, service.TaskRunning:
		return []models.Action{actions.Retry("get_task", "agent", map[string]any{"id": t.ID}, 1)}
	case service.TaskSucceeded:
		return append(succeededActions(t), actions.Stop("done"))
	}
	var next []models.Action
	json.Unmarshal(t.Remedies, &next)
	return append(next, actions.Stop("terminal_error"))
}

// succeededActions are what a finished task leaves to do: the service a
// launch, deploy or rollback made, to read (and tear down); the addresses
// a mail setup makes possible.
func succeededActions(t *service.Task) []models.Action {
	switch t.Kind {
	case service.TaskKindLaunch, service.TaskKindDeploy, service.TaskKindRollback:
		if t.ServiceID == "" {
			return nil
		}
		return []models.Action{actions.Tool("get_service", "agent", map[string]any{"id": t.ServiceID})}
	case service.TaskKindEmailSetup:
		if t.Domain == "" {
			return nil
		}
		return []models.Action{actions.ToolNeeding("create_email_address", "agent", nil, "address"), actions.Tool("list_email_addresses", "agent", nil)}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// optional is s, or nil when it is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
