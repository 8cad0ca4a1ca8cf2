package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

func (o projectRoutes) ExportProject(ctx context.Context, req api.ExportProjectRequestObject) (api.ExportProjectResponseObject, error) {
	pkg, next, err := o.svc.Projects.Export(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.ExportProject200JSONResponse{Data: *pkg, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) CreateProject(ctx context.Context, req api.CreateProjectRequestObject) (api.CreateProjectResponseObject, error) {
	c, next, err := o.svc.Projects.CreateChild(ctx, auth.FromContext(ctx), models.ProjectCreateRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.CreateProject201JSONResponse{Data: *c, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) DeleteProject(ctx context.Context, req api.DeleteProjectRequestObject) (api.DeleteProjectResponseObject, error) {
	d, next, replayed, err := o.svc.Projects.Delete(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	resp := api.DeleteProject200JSONResponse{Data: *d, Actions: next, FormatVersion: FormatVersion}
	if replayed {
		resp.Replayed = &replayed
	}
	return resp, nil
}

func (o projectRoutes) GetProject(ctx context.Context, req api.GetProjectRequestObject) (api.GetProjectResponseObject, error) {
	orgID := auth.FromContext(ctx).OrgID
	p, next, err := o.svc.Projects.Get(ctx, orgID, req.Id)
	if err != nil {
		return nil, err
	}
	svcs, err := o.svc.Launches.ListServices(ctx, orgID, store.Filter{ProjectID: p.Id, Limit: 500})
	if err != nil {
		return nil, err
	}
	list := make([]models.ServiceInfo, 0, len(svcs.Items))
	for _, v := range svcs.Items {
		list = append(list, serviceInfo(v))
	}
	p.Services = &list
	return api.GetProject200JSONResponse{Data: *p, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) ListProjects(ctx context.Context, req api.ListProjectsRequestObject) (api.ListProjectsResponseObject, error) {
	l, next, err := orgList(ctx, req.Params.Cursor, req.Params.Limit, o.svc.Projects.List)
	if err != nil {
		return nil, err
	}
	return api.ListProjects200JSONResponse{Data: l, Actions: next, FormatVersion: FormatVersion}, nil
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
	page, next, err := o.svc.Projects.LedgerEntries(ctx, auth.FromContext(ctx).OrgID, int64(after), limit)
	if err != nil {
		return nil, err
	}
	return api.ListLedgerEntries200JSONResponse{Data: *page, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o projectRoutes) Whoami(ctx context.Context, req api.WhoamiRequestObject) (api.WhoamiResponseObject, error) {
	w, next, err := o.svc.Projects.Whoami(ctx, auth.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	return api.Whoami200JSONResponse{Data: *w, Actions: next, FormatVersion: FormatVersion}, nil
}
