package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func (o projectRoutes) ExportProject(ctx context.Context, req api.ExportProjectRequestObject) (api.ExportProjectResponseObject, error) {
	pkg, err := o.svc.Projects.Export(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	next := []models.Action{actions.Stop("done")}
	if pkg.TransferURL != "" {
		next = append([]models.Action{actions.URL(pkg.TransferURL, "transfer_out", "human")}, next...)
	}
	return api.ExportProject200JSONResponse{Data: leavePackage(pkg), Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) CreateProject(ctx context.Context, req api.CreateProjectRequestObject) (api.CreateProjectResponseObject, error) {
	b := req.Body
	c, err := o.svc.Projects.CreateChild(ctx, auth.FromContext(ctx), service.NewChild{Name: b.Name, ParentID: b.ParentProjectId, Budget: money.FromUSD(b.BudgetUsd)})
	if err != nil {
		return nil, err
	}
	m := wireMutated(c.Mutated)
	out := models.ProjectCreation{Project: project(c.Project), ParentProjectId: c.Project.ParentID, ParentRemainingUsd: c.ParentRemaining.USD(),
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	next := []models.Action{
		actions.Tool("get_project", "agent", map[string]any{"id": c.Project.ID}),
		actions.Tool("delete_project", "agent", map[string]any{"id": c.Project.ID}),
	}
	return api.CreateProject201JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) DeleteProject(ctx context.Context, req api.DeleteProjectRequestObject) (api.DeleteProjectResponseObject, error) {
	d, replayed, err := o.svc.Projects.Delete(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	resp := api.DeleteProject200JSONResponse{Data: projectDeletion(d), Actions: deletionActions(d), FormatVersion: FormatVersion}
	if replayed {
		resp.Replayed = &replayed
	}
	return resp, nil
}

// deletionActions are what a deletion leaves to do: while deleting, poll
// the teardowns still running and delete again; once deleted, read the
// parent the budget went back to.
func deletionActions(d *service.ProjectDeletion) []models.Action {
	if d.State == service.ProjectDeleted {
		return []models.Action{actions.Tool("get_project", "agent", map[string]any{"id": d.ParentID}), actions.Stop("done")}
	}
	var next []models.Action
	for _, t := range d.Pending {
		next = append(next, actions.Retry("get_task", "agent", map[string]any{"id": t}, 2))
	}
	return append(next, actions.Retry("delete_project", "agent", map[string]any{"id": d.ProjectID}, 2))
}

func (o projectRoutes) GetProject(ctx context.Context, req api.GetProjectRequestObject) (api.GetProjectResponseObject, error) {
	orgID := auth.FromContext(ctx).OrgID
	v, err := o.svc.Projects.Get(ctx, orgID, req.Id)
	if err != nil {
		return nil, err
	}
	svcs, err := o.svc.Launches.ListServices(ctx, orgID, store.Filter{ProjectID: v.ID, Limit: 500})
	if err != nil {
		return nil, err
	}
	p := project(*v)
	list := make([]models.ServiceInfo, 0, len(svcs.Items))
	for _, s := range svcs.Items {
		list = append(list, serviceInfo(s))
	}
	p.Services = &list
	next := []models.Action{
		actions.Tool("create_quote", "agent", map[string]any{"projectId": v.ID}),
		actions.Tool("list_services", "agent", map[string]any{"projectId": v.ID}),
		actions.Stop("done"),
	}
	return api.GetProject200JSONResponse{Data: p, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) ListProjects(ctx context.Context, req api.ListProjectsRequestObject) (api.ListProjectsResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, nil, o.svc.Projects.List, project, func(p service.Project) string { return p.ID }, "list_projects", "get_project")
	if err != nil {
		return nil, err
	}
	return api.ListProjects200JSONResponse{Data: models.ProjectList{Projects: l.Items, NextCursor: l.NextCursor}, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) RequestBudgetRaise(ctx context.Context, req api.RequestBudgetRaiseRequestObject) (api.RequestBudgetRaiseResponseObject, error) {
	t, err := o.svc.Approvals.RequestBudgetRaise(ctx, auth.FromContext(ctx), req.Id, money.FromUSD(req.Body.AmountUsd), req.Body.Reason)
	if err != nil {
		return nil, err
	}
	return api.RequestBudgetRaise202JSONResponse{Data: *TaskHandle(t), Actions: TaskActions(t), FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) ListLedgerEntries(ctx context.Context, req api.ListLedgerEntriesRequestObject) (api.ListLedgerEntriesResponseObject, error) {
	after, limit := 0, 100
	if req.Params.After != nil {
		after = *req.Params.After
	}
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	page, err := o.svc.Projects.LedgerEntries(ctx, auth.FromContext(ctx).OrgID, int64(after), limit)
	if err != nil {
		return nil, err
	}
	out := models.LedgerPage{Entries: make([]models.LedgerEntry, 0, len(page.Entries)), HeadHash: page.HeadHash}
	for _, e := range page.Entries {
		out.Entries = append(out.Entries, models.LedgerEntry{
			Seq: int(e.Seq), At: e.At, OrgId: e.OrgID, Actor: e.Actor, Action: e.Action, ObjectType: e.ObjectType,
			ObjectId: e.ObjectID, Details: e.Details, PrevHash: e.PrevHash, Hash: e.Hash,
		})
	}
	next := []models.Action{actions.Stop("done")}
	if n := len(page.Entries); n == limit && limit > 0 {
		next = []models.Action{actions.Tool("list_ledger_entries", "agent", map[string]any{"after": page.Entries[n-1].Seq, "limit": limit})}
	}
	return api.ListLedgerEntries200JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) Whoami(ctx context.Context, req api.WhoamiRequestObject) (api.WhoamiResponseObject, error) {
	w, err := o.svc.Projects.Whoami(ctx, auth.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	next := []models.Action{actions.Tool("list_projects", "agent", nil)}
	if w.Project != "" {
		next = append(next, actions.Tool("get_project", "agent", map[string]any{"id": w.Project}))
	}
	return api.Whoami200JSONResponse{Data: whoami(w), Actions: append(next, actions.Stop("done")), FormatVersion: FormatVersion}, nil
}
